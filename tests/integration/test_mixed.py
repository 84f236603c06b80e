"""A mixed workload end to end: GPU jobs that allocate late, CPU jobs, OOM retries and
multi-GPU jobs drain on two simulated GPUs while the daemon is killed twice. Throughout,
no GPU is over-subscribed; at the end every job succeeded and every attempt ran once."""
import time

from conftest import GIB, MIB, gpu, read_lines

OTHERS = {0: 0, 1: 20 * GIB}  # another user holds 20 GiB of GPU 1


def submit_mix(tq, marker):
    ids = []
    for i in range(24):
        kind = i % 4
        if kind == 0:
            opts, args = ["--mem", "25GiB"], ["--mem-gib", "20", "--alloc-after", "0.2",
                                              "--duration", "1"]
        elif kind == 1:
            opts, args = ["--gpus", "0"], ["--duration", "1"]
        elif kind == 2:
            opts, args = ["--mem", "10GiB"], ["--oom-on-attempts", "1"]
        else:
            opts, args = ["--gpus", "2", "--mem", "5GiB"], ["--mem-gib", "5", "--duration", "1"]
        ids.append(tq.submit(*opts, cmd=tq.fake_job("--marker", marker, *args)))
    return ids


def assert_not_oversubscribed(tq):
    for g in tq.gpus()["gpus"]:
        held = sum(max(a["reserved_bytes"], a["used_bytes"] or 0) for a in g["attempts"])
        assert held + OTHERS[g["index"]] <= 80 * GIB - 256 * MIB, g


def test_mixed_workload_drains_through_daemon_kills(make_trainq):
    tq = make_trainq([gpu(0), gpu(1, others="20GiB")], cpu_slots=6)
    marker = tq.path("marker")
    ids = submit_mix(tq, marker)
    tq.kill_daemon()  # while the first jobs start
    killed_again = False
    # The jobs last a second each so the drain outlasts a few listings on a loaded machine:
    # the second kill must land while jobs are still left.
    deadline = time.monotonic() + 120
    while True:
        jobs = tq.ls("--all")
        done = sum(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs)
        if done == len(jobs):
            break
        assert time.monotonic() < deadline, [(j["id"], j["state"], j["reason"]) for j in jobs]
        assert_not_oversubscribed(tq)
        # At the first listing that finds some done and some left: a later threshold (a
        # third done) was passed between two listings on a loaded machine, and the second
        # kill never came.
        if not killed_again and done > 0:
            tq.kill_daemon()  # in the middle of the drain
            killed_again = True
    assert killed_again
    assert sorted(j["id"] for j in jobs) == ids
    lines = read_lines(marker)
    for job in jobs:
        assert job["state"] == "succeeded", (job, tq.run_dirs_text(job["id"]))
        started = [a for a in job["attempts"] if a["exit_code"] is not None]
        runs = [line for line in lines if line.startswith(f"job {job['id']} ")]
        assert len(runs) == len(started), (job["id"], runs, job["attempts"])
    oom_jobs = [tq.show(i) for i in ids[2::4]]
    assert all(j["attempts"][0]["oom"] for j in oom_jobs)
