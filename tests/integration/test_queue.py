"""The durable queue, retry and `daemon stop`, through the real CLI and API."""
import json
import os
import threading

from conftest import process_gone, read_lines, wait_for


def all_jobs(tq):
    return {j["id"]: j for j in tq.ls("--all")}


def test_acknowledged_submit_survives_kill9_and_runs(tq):
    tq.start_daemon()
    marker = tq.path("marker")
    # kill -9 the moment the id is printed, several times: the kill lands at different
    # points of storing, placing and starting the job.
    ids = []
    for _ in range(4):
        ids.append(tq.submit("--gpus", "0", cmd=tq.fake_job("--marker", marker)))
        tq.kill_daemon()
    jobs = all_jobs(tq)  # any command restarts the daemon
    assert set(ids) <= set(jobs), f"acknowledged jobs lost: {set(ids) - set(jobs)}"
    for job_id in ids:
        job = tq.wait_state(job_id, "succeeded")
        ran = [a for a in job["attempts"] if a["exit_code"] is not None]
        assert len(ran) == 1, job["attempts"]
    lines = read_lines(marker)
    for job_id in ids:
        assert sum(line.startswith(f"job {job_id} ") for line in lines) == 1, lines


def test_submit_json_prints_the_stored_job(tq):
    r = tq.run("submit", "--json", "--gpus", "0", "--name", "j", "--priority", "3", "--retries",
               "5", "--cpus", "2", "--", "echo", "hi there")
    job = json.loads(r.stdout)
    assert job["id"] == 1 and job["name"] == "j" and job["command"] == ["echo", "hi there"]
    assert (job["priority"], job["retries"], job["cpus"], job["gpus"]) == (3, 5, 2, 0)
    assert job["cwd"] == tq.work
    assert "env" not in job  # it holds secrets
    tq.wait_state(1, "succeeded")


def test_ids_are_never_reused_across_restarts(tq):
    first = [tq.submit("--gpus", "0", cmd=["true"]) for _ in range(3)]
    assert first == sorted(first) and len(set(first)) == 3
    tq.kill_daemon()
    after_kill = tq.submit("--gpus", "0", cmd=["true"])
    tq.run("daemon", "stop")
    after_stop = tq.submit("--gpus", "0", cmd=["true"])
    assert after_kill == first[-1] + 1
    assert after_stop == after_kill + 1
    assert sorted(all_jobs(tq)) == first + [after_kill, after_stop]


def test_concurrent_submits_get_distinct_ids(tq):
    # No daemon runs yet: the 30 CLIs also race to start it, and exactly one must win.
    results = [None] * 30

    def submit(i):
        results[i] = tq.run("submit", "--gpus", "0", "--name", f"c{i}", "--", "true", check=False)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert r.returncode == 0, r.stderr
    ids = [int(r.stdout.strip()) for r in results]
    assert len(set(ids)) == len(ids), sorted(ids)
    jobs = all_jobs(tq)
    assert sorted(jobs) == sorted(ids)
    assert {jobs[i]["name"] for i in ids} == {f"c{i}" for i in range(len(results))}
    for job_id in ids:
        tq.wait_state(job_id, "succeeded")


def job_body(tq, **kw):
    body = {"command": ["true"], "cwd": tq.work, "gpus": 0}
    body.update(kw)
    return body


def test_batch_submit_is_all_or_nothing(tq):
    tq.start_daemon()
    bad_batches = [
        [job_body(tq), job_body(tq, gpus="one")],                   # wrong type
        [job_body(tq), job_body(tq, cwd=tq.path("missing"))],       # fails validation
        [job_body(tq), job_body(tq, bogus=1), job_body(tq)],        # unknown key
        [job_body(tq), job_body(tq, command=[])],                   # empty command
    ]
    for batch in bad_batches:
        answer = tq.api("POST", "/v1/jobs", {"jobs": batch})
        assert answer.status == 400, answer.raw
        assert answer.error_code == "invalid"
        assert "jobs[1]" in answer.body["error"]["message"]
    assert all_jobs(tq) == {}

    answer = tq.api("POST", "/v1/jobs", {"jobs": [job_body(tq, name=f"b{i}") for i in range(5)]})
    assert answer.status == 201, answer.raw
    ids = answer.body["ids"]
    assert ids == list(range(ids[0], ids[0] + 5))
    assert ids[0] == 1, "refused batches must not use up ids"
    jobs = all_jobs(tq)
    assert sorted(jobs) == ids
    assert [jobs[i]["name"] for i in ids] == [f"b{i}" for i in range(5)]


def test_retry_of_a_failed_job_makes_attempt_2(tq):
    script = 'echo "attempt $TRAINQ_ATTEMPT"; test "$TRAINQ_ATTEMPT" = 2 || exit 3'
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    job = tq.wait_state(job_id, "failed")
    assert len(job["attempts"]) == 1
    assert job["attempts"][0]["exit_code"] == 3
    assert not job["attempts"][0]["oom"]

    out = tq.run("retry", str(job_id)).stdout
    assert f"job {job_id}" in out
    job = tq.wait_state(job_id, "succeeded")
    assert [a["n"] for a in job["attempts"]] == [1, 2]
    assert [a["state"] for a in job["attempts"]] == ["failed", "succeeded"]
    assert tq.run("logs", str(job_id)).stdout == "attempt 2\n"
    assert tq.run("logs", str(job_id), "--attempt", "1").stdout == "attempt 1\n"

    # A job that has not ended cannot be retried.
    waiting = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", tq.path("never")))
    tq.wait_state(waiting, "running")
    r = tq.run("retry", str(waiting), check=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "running" in r.stderr, r.stderr


def test_daemon_stop_when_none_runs(tq):
    r = tq.run("daemon", "stop")
    assert "no trainq daemon runs" in r.stdout
    assert tq.daemon_pid() is None, "daemon stop must not start a daemon"
    pid = tq.start_daemon()
    r = tq.run("daemon", "stop")
    assert f"daemon pid {pid} stopping" in r.stdout
    wait_for(lambda: process_gone(pid), timeout=10, what="the stopped daemon to exit")
    assert tq.daemon_pid() is None
    assert "no trainq daemon runs" in tq.run("daemon", "stop").stdout
    assert os.path.exists(os.path.join(tq.state_dir, "trainq.db"))


def test_a_state_dir_too_long_for_a_socket_path(make_trainq):
    # A Unix socket path has at most 107 bytes: the socket then lives in the runtime dir.
    tq = make_trainq(state_subdir="/".join(["a-rather-long-directory-name"] * 5))
    assert len(tq.state_dir) > 120
    job_id = tq.submit("--gpus", "0", cmd=["echo", "deep"])
    tq.wait_state(job_id, "succeeded")
    assert tq.run("logs", str(job_id)).stdout == "deep\n"
    assert not os.path.exists(os.path.join(tq.state_dir, "trainq.sock"))
    tq.run("daemon", "stop")
    assert "no trainq daemon runs" in tq.run("daemon", "stop").stdout


def test_keep_alive_connection_serves_several_requests(tq):
    tq.start_daemon()
    head = "GET /v1/status HTTP/1.1\r\nHost: trainq\r\n\r\n"
    last = "GET /v1/jobs HTTP/1.1\r\nHost: trainq\r\nConnection: close\r\n\r\n"
    answer = tq.raw_request((head + head + last).encode())
    assert answer.raw.count(b"HTTP/1.1 200") == 3, answer.raw
    assert answer.raw.rstrip().endswith(b'{"cluster":false,"jobs":[]}'), answer.raw
