"""Placement without double booking, the reasons a job waits, and event-driven scheduling
(a pass runs when something changes, never on a fixed tick), on simulated GPUs."""
import json
import os
import time

import pytest

from conftest import GIB, MIB, gpu, read_json, wait_for

HEADROOM = 256 * MIB


def attempts_on(gpus_doc, index):
    return {a["job"] for a in gpus_doc["gpus"][index]["attempts"]}


def gpu_indices(job):
    return job["attempts"][-1]["gpu_indices"]


def assert_stays(tq, job_id, state, seconds=1.0):
    """The job keeps `state` for a while: several samples (100 ms) and passes go by."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert tq.state(job_id) == state
        time.sleep(0.1)


def test_two_jobs_share_a_gpu_and_a_third_waits_before_they_allocate(tq):
    late = tq.fake_job("--mem-gib", "28", "--alloc-after", "3600")
    a = tq.submit("--mem", "30GiB", cmd=late)
    b = tq.submit("--mem", "30GiB", cmd=late)
    c = tq.submit("--mem", "30GiB", cmd=late)
    tq.wait_state(a, "running")
    tq.wait_state(b, "running")
    # Neither has touched its memory, so NVML says 80 GiB free; the reservations count.
    assert_stays(tq, c, "queued")
    doc = tq.gpus()["gpus"][0]
    assert doc["memory_used"] == 0
    assert doc["memory_reserved"] == 60 * GIB
    assert doc["memory_usable"] == 20 * GIB - HEADROOM
    assert attempts_on(tq.gpus(), 0) == {a, b}
    reason = tq.show(c)["reason"]
    assert reason.startswith("needs 1 GPU with 30.0 GiB usable; best: GPU 0 with 19.8 GiB"), reason

    tq.run("cancel", str(a))
    tq.wait_state(a, "cancelled")
    job = tq.wait_state(c, "running")
    assert gpu_indices(job) == [0]


def test_memory_used_by_others_is_respected(make_trainq):
    tq = make_trainq([gpu(0, others="60GiB")])
    job_id = tq.submit("--mem", "30GiB", cmd=tq.fake_job("--duration", "0.2"))
    assert_stays(tq, job_id, "queued")
    job = tq.show(job_id)
    assert job["reason"] == "needs 1 GPU with 30.0 GiB usable; best: GPU 0 with 19.8 GiB", job
    listed = [j for j in tq.ls() if j["id"] == job_id]
    assert listed and listed[0]["reason"] == job["reason"]
    assert "needs 1 GPU with 30.0 GiB usable" in tq.run("ls").stdout
    assert "needs 1 GPU with 30.0 GiB usable" in tq.run("show", str(job_id)).stdout

    tq.set_gpus([gpu(0, others="40GiB")])  # the other user freed 20 GiB
    tq.wait_state(job_id, "succeeded")


def test_other_processes_are_respected(make_trainq, foreign_process):
    tq = make_trainq([gpu(0, other_processes=[{"pid": foreign_process, "bytes": "70GiB"}])])
    job_id = tq.submit("--mem", "20GiB", cmd=tq.fake_job("--duration", "0.2"))
    assert_stays(tq, job_id, "queued")
    others = tq.gpus()["gpus"][0]["other_processes"]
    assert others == [{"pid": foreign_process, "used_bytes": 70 * GIB}]
    assert "needs 1 GPU with 20.0 GiB usable; best: GPU 0 with 9.8 GiB" in tq.show(job_id)["reason"]

    tq.set_gpus([gpu(0, other_processes=[{"pid": foreign_process, "bytes": "10GiB"}])])
    tq.wait_state(job_id, "succeeded")


def test_exclusive_job_takes_only_an_untouched_gpu(make_trainq, foreign_process):
    # GPU 0: another user's process (too big for the 10 GiB job); GPU 1 or 2: a trainq job.
    big = [{"pid": foreign_process, "bytes": "75GiB"}]
    tq = make_trainq([gpu(0, other_processes=big), gpu(1), gpu(2)])
    shared = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--wait-file", tq.path("never")))
    assert gpu_indices(tq.wait_state(shared, "running")) in ([1], [2])
    free_gpu = 3 - gpu_indices(tq.show(shared))[0]

    whole = tq.submit(cmd=tq.fake_job("--wait-file", tq.path("never")))
    job = tq.wait_state(whole, "running")
    assert gpu_indices(job) == [free_gpu]
    assert job["exclusive"] is True
    assert job["attempts"][0]["reserved_bytes"] == 80 * GIB

    second = tq.submit(cmd=tq.fake_job("--duration", "0.1"))
    assert_stays(tq, second, "queued")
    assert tq.show(second)["reason"].startswith("needs 1 whole GPU")
    # A small foreign process still makes GPU 0 unavailable to a whole-GPU job.
    tq.set_gpus([gpu(0, other_processes=[{"pid": foreign_process, "bytes": "512MiB"}]),
                 gpu(1), gpu(2)])
    wait_for(lambda: tq.gpus()["gpus"][0]["memory_used"] == 512 * MIB, what="the new sample")
    assert_stays(tq, second, "queued")
    assert "other process" in tq.show(second)["reason"]
    tq.set_gpus([gpu(0), gpu(1), gpu(2)])  # the foreign process ended
    job = tq.wait_state(second, "succeeded")
    assert gpu_indices(job) == [0]


def test_a_whole_gpu_job_passes_over_memory_another_container_holds(make_trainq):
    """A GPU shared with another container: 70 GiB used, no process NVML can list."""
    tq = make_trainq([gpu(0, others="70GiB"), gpu(1, others="512MiB")])
    first = tq.submit(cmd=tq.fake_job("--wait-file", tq.path("never")))
    assert gpu_indices(tq.wait_state(first, "running")) == [1]  # 512 MiB: under 1 GiB
    second = tq.submit(cmd=["true"])
    assert_stays(tq, second, "queued", seconds=0.5)
    reason = tq.show(second)["reason"]
    assert ("taken: GPU 0 with 70.0 GiB in use by others (whole_gpu_max_used = 1.0 GiB), "
            f"GPU 1 by job {first}") in reason, reason
    explained = json.loads(tq.run("explain", str(second), "--json").stdout)
    assert explained["gpus"][0]["memory_usable"] == 10 * GIB - HEADROOM
    assert [g["fits"] for g in explained["gpus"]] == [False, False]


def test_multi_gpu_job_gets_gpus_on_one_node(make_trainq):
    tq = make_trainq([gpu(0), gpu(1, others="75GiB"), gpu(2), gpu(3)])
    env_out = tq.path("env.json")
    job_id = tq.submit("--gpus", "3", "--mem", "20GiB",
                       cmd=tq.fake_job("--env-out", env_out, "--mem-gib", "4", "--duration", "1"))
    job = tq.wait_state(job_id, "succeeded")
    attempt = job["attempts"][0]
    assert attempt["peak_mem_bytes"] == 4 * GIB  # per GPU, as --mem: the most on any one
    assert "reserved 20.0 GiB per GPU  peak 4.0 GiB per GPU" in tq.run("show", str(job_id)).stdout
    assert sorted(attempt["gpu_indices"]) == [0, 2, 3]  # GPU 1 has no room
    env = wait_for(lambda: read_json(env_out), what="the job's environment")
    assert sorted(int(i) for i in env["CUDA_VISIBLE_DEVICES"].split(",")) == [0, 2, 3]
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(str(i) for i in attempt["gpu_indices"])
    assert env["TRAINQ_GPUS"].split(",") == attempt["gpu_uuids"]

    both = tq.submit("--gpus", "2", cmd=tq.fake_job("--env-out", env_out))
    job = tq.wait_state(both, "succeeded")
    assert len(set(gpu_indices(job))) == 2


def test_late_allocation_never_oversubscribes(make_trainq):
    tq = make_trainq([gpu(0, others="4GiB")])
    total, others = 80 * GIB, 4 * GIB
    jobs = [tq.submit("--mem", "30GiB",
                      cmd=tq.fake_job("--mem-gib", "29", "--alloc-after", str(0.3 + 0.3 * (i % 3)),
                                      "--duration", "0.8"))
            for i in range(6)]
    most_at_once = 0
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        doc = tq.gpus()["gpus"][0]
        held = sum(max(a["reserved_bytes"], a["used_bytes"] or 0) for a in doc["attempts"])
        assert held + others <= total - HEADROOM, doc
        assert doc["memory_usable"] <= total, doc
        most_at_once = max(most_at_once, len(doc["attempts"]))
        if all(j["state"] == "succeeded" for j in tq.ls("--all")):
            break
    else:
        pytest.fail(f"the queue did not drain: {tq.ls('--all')}\n{tq.daemon_log()}")
    assert most_at_once == 2
    for job_id in jobs:
        assert tq.show(job_id)["attempts"][0]["peak_mem_bytes"] == 29 * GIB


def test_scheduling_is_driven_by_events_not_a_tick(make_trainq):
    # No sampling tick within the test: only submits and exits can start jobs.
    tq = make_trainq([gpu(0)], sample_interval="1h")
    first = tq.submit(cmd=tq.fake_job("--wait-file", tq.path("first-done")))
    tq.wait_state(first, "running")
    nxt = tq.submit(cmd=tq.fake_job("--wait-file", tq.path("next-done")))
    last = tq.submit("--mem", "1GiB", cmd=tq.fake_job())
    assert_stays(tq, nxt, "queued", seconds=0.5)
    assert tq.state(last) == "queued"
    open(tq.path("first-done"), "w").close()
    tq.wait_state(first, "succeeded")
    tq.wait_state(nxt, "running")
    assert tq.state(last) == "queued"
    open(tq.path("next-done"), "w").close()
    tq.wait_state(last, "succeeded")


def test_a_job_exit_frees_its_memory_without_waiting_for_a_sample(make_trainq):
    tq = make_trainq([gpu(0)], sample_interval="1h")
    holder = tq.submit("--mem", "30GiB", cmd=tq.fake_job("--mem-gib", "30",
                                                         "--wait-file", tq.path("go")))
    tq.wait_state(holder, "running")
    wait_for(lambda: os.listdir(tq.usage_dir), what="the job to allocate")
    # A restarted daemon samples once at start: it sees the 30 GiB the job holds.
    tq.run("daemon", "stop")
    assert tq.gpus()["gpus"][0]["memory_used"] == 30 * GIB
    big = tq.submit("--mem", "60GiB", cmd=["true"])
    assert_stays(tq, big, "queued", seconds=0.5)
    assert "best: GPU 0 with 49.8 GiB" in tq.show(big)["reason"]
    open(tq.path("go"), "w").close()
    tq.wait_state(holder, "succeeded")
    tq.wait_state(big, "succeeded")


def test_reason_is_current_after_cancel_and_retry(make_trainq):
    tq = make_trainq([gpu(0, others="70GiB")])
    job_id = tq.submit("--mem", "20GiB", cmd=["true"])
    wait_for(lambda: tq.show(job_id)["reason"].startswith("needs 1 GPU"), what="a reason")
    reason = tq.show(job_id)["reason"]
    tq.run("cancel", str(job_id))
    tq.run("retry", str(job_id))
    wait_for(lambda: tq.show(job_id)["reason"] == reason, timeout=5,
             what=f"the reason to be {reason!r} again")
    assert tq.state(job_id) == "queued"


def test_cpu_jobs_queue_on_cpu_slots(make_trainq):
    tq = make_trainq(cpu_slots=3)
    a = tq.submit("--gpus", "0", "--cpus", "2", cmd=tq.fake_job("--wait-file", tq.path("go")))
    b = tq.submit("--gpus", "0", "--cpus", "2", cmd=["true"])
    tq.wait_state(a, "running")
    assert_stays(tq, b, "queued", seconds=0.5)
    assert tq.show(b)["reason"] == "needs 2 CPU slots; 1 of 3 free (raise cpu_slots: trainq config set cpu-slots N)"
    assert tq.gpus()["cpu_slots_used"] == 2
    open(tq.path("go"), "w").close()
    tq.wait_state(b, "succeeded")
