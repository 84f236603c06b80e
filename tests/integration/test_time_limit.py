"""The wall-clock limit (--time): enforced by the shim, so it holds across daemon restarts."""
import json
import os

from conftest import process_gone, wait_for

OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def child_pid(tq, name):
    path = tq.path(name)
    wait_for(lambda: os.path.exists(path) and open(path).read().strip(), what=f"{name}")
    return int(open(path).read())


def test_job_past_its_limit_fails_with_its_whole_tree_gone(tq):
    # The background child ignores SIGTERM: only the SIGKILL after the grace period ends it.
    script = ("(trap '' TERM; exec sleep 300) & echo $! > child.pid; "
              "echo started; sleep 300")
    job_id = tq.submit("--gpus", "0", "--time", "2s", cmd=["sh", "-c", script])
    child = child_pid(tq, "child.pid")
    job = tq.wait_state(job_id, "failed", timeout=30)
    assert job["reason"] == "time limit (2s)"
    assert job["time_limit_ms"] == 2000
    assert len(job["attempts"]) == 1
    attempt = job["attempts"][0]
    assert attempt["end_reason"] == "time limit (2s)"
    assert attempt["signal"] == 15  # the shell died of the SIGTERM
    assert process_gone(child), "the job's child outlived the time limit"
    record = json.load(open(os.path.join(attempt["run_dir"], "exit.json")))
    assert record["time_limit"] is True and record["cancelled"] is False
    assert "time limit (2s) reached" in open(attempt["log_path"]).read()
    shown = tq.run("show", str(job_id)).stdout
    assert "time limit:  2s" in shown


def test_oom_text_in_a_job_stopped_by_the_limit_is_not_retried(tq):
    script = f"echo '{OOM_LINE}' >&2; sleep 300"
    job_id = tq.submit("--gpus", "0", "--retries", "3", "--time", "1s", cmd=["sh", "-c", script])
    job = tq.wait_state(job_id, "failed", timeout=30)
    assert job["reason"] == "time limit (1s)"
    assert len(job["attempts"]) == 1
    assert job["attempts"][0]["oom"] is False


def test_job_within_its_limit_succeeds(tq):
    job_id = tq.submit("--gpus", "0", "--time", "1h", cmd=["true"])
    job = tq.wait_state(job_id, "succeeded")
    assert job["time_limit_ms"] == 3600 * 1000


def test_limit_holds_while_the_daemon_is_dead(tq):
    job_id = tq.submit("--gpus", "0", "--time", "3s", cmd=["sh", "-c",
                                                         "echo $$ > main.pid; sleep 300"])
    main = child_pid(tq, "main.pid")
    tq.kill_daemon()
    wait_for(lambda: process_gone(main), timeout=30, what="the shim to stop the job")
    job = tq.wait_state(job_id, "failed")  # restarts the daemon, which collects the record
    assert job["reason"] == "time limit (3s)"


def test_time_forms_and_bad_values(tq):
    for text, ms in [("90", 90 * 60 * 1000), ("1:30:00", 90 * 60 * 1000), ("2h30m", 9000000)]:
        r = tq.run("submit", "--json", "--gpus", "0", "--time", text, "--", "true")
        assert json.loads(r.stdout)["time_limit_ms"] == ms, text
    before = len(tq.ls("--all"))
    for bad in ["soon", "0", "5x", "1:2:3:4"]:
        r = tq.run("submit", "--gpus", "0", "--time", bad, "--", "true", check=False)
        assert r.returncode == 2, (bad, r.stderr)
        assert "--time" in r.stderr, (bad, r.stderr)
    assert len(tq.ls("--all")) == before
