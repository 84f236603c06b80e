"""Per-user limits set at run time (docs/scheduling.md, "Per-user limits"): with
`max_jobs_per_user 1` a user's second job waits, `trainq ls` and `trainq show` say why, and
lifting the limit (`config set max_jobs_per_user 0`) starts it at once."""
import json
import time

from conftest import gpu


def assert_stays(tq, job_id, state, seconds=1.0):
    """The job keeps `state` while several samples (100 ms) and passes go by."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert tq.state(job_id) == state
        time.sleep(0.1)


def test_max_jobs_per_user_holds_back_a_second_job_until_lifted(make_trainq):
    tq = make_trainq([gpu(0), gpu(1)])
    done = tq.path("done")
    out = tq.run("config", "set", "max_jobs_per_user", "1").stdout
    assert "max_jobs_per_user = 1 (was 0)" in out
    a = tq.submit("--gpus", "1", cmd=tq.fake_job("--wait-file", done))
    tq.wait_state(a, "running")
    b = tq.submit("--gpus", "1", cmd=tq.fake_job("--wait-file", done))
    assert_stays(tq, b, "queued")  # GPU 1 is free, but the user runs their one job

    user = tq.show(b)["user"]
    reason = f"waiting: {user} has 1 job running; max_jobs_per_user = 1"
    assert tq.show(b)["reason"] == reason
    assert [j["reason"] for j in tq.ls() if j["id"] == b] == [reason]
    table = tq.run("ls").stdout
    assert reason in next(line for line in table.splitlines() if line.startswith(str(b)))
    assert reason in tq.run("show", str(b)).stdout

    tq.run("config", "set", "max_jobs_per_user", "0")
    job = tq.wait_state(b, "running")
    assert job["attempts"][-1]["gpu_indices"] == [1]
    open(done, "w").close()
    tq.wait_state(a, "succeeded")
    tq.wait_state(b, "succeeded")


def test_per_user_limits_are_settable_and_persisted(make_trainq):
    tq = make_trainq([gpu(0)])
    tq.run("config", "set", "max-gpus-per-user", "4")
    tq.run("config", "set", "max_jobs_per_user", "2")
    doc = json.loads(tq.run("config", "show", "--json").stdout)
    assert doc["max_gpus_per_user"] == 4 and doc["max_jobs_per_user"] == 2
    tq.kill_daemon()
    assert tq.run("config", "get", "max_gpus_per_user").stdout.strip() == "4"
    bad = tq.run("config", "set", "max_gpus_per_user", "lots", check=False)
    assert bad.returncode == 2
    assert "max_gpus_per_user: 'lots' is not a GPU count" in bad.stderr
