"""Job dependencies (--after, --after-any) through the real daemon and CLI."""
import json
import os

from conftest import process_gone, wait_for


def attempts_of(tq, job_id):
    return tq.show(job_id)["attempts"]


def test_after_chain_runs_in_order_and_waits_blocked(tq):
    go = tq.path("go")
    a = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    b = tq.submit("--gpus", "0", "--after", str(a), cmd=tq.fake_job())
    c = tq.submit("--gpus", "0", "--after", str(b), cmd=tq.fake_job())
    tq.wait_state(a, "running")
    job_b = tq.show(b)
    assert job_b["state"] == "blocked"
    assert job_b["after"] == [a] and job_b["after_any"] == []
    wait_for(lambda: tq.show(b)["reason"] == f"waiting for job {a} (running)",
             what="b's reason to name the running dependency")
    assert tq.show(c)["reason"] == f"waiting for job {b} (blocked)"
    listed = {j["id"]: j["state"] for j in tq.ls()}
    assert listed[b] == "blocked" and listed[c] == "blocked"
    table = tq.run("ls").stdout
    assert "blocked" in table and f"waiting for job {a}" in table
    assert attempts_of(tq, b) == [] and attempts_of(tq, c) == []

    open(go, "w").close()
    done_c = tq.wait_state(c, "succeeded")
    done_a, done_b = tq.show(a), tq.show(b)
    assert done_a["state"] == done_b["state"] == "succeeded"
    # Each started only after its dependency ended.
    assert done_b["attempts"][0]["started_at"] >= done_a["attempts"][0]["ended_at"]
    assert done_c["attempts"][0]["started_at"] >= done_b["attempts"][0]["ended_at"]


def test_failure_cancels_down_the_chain_and_after_any_still_runs(tq):
    go = tq.path("go")
    a = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go, "--exit", "3"))
    b = tq.submit("--gpus", "0", "--after", str(a), cmd=tq.fake_job())
    c = tq.submit("--gpus", "0", "--after", str(b), cmd=tq.fake_job())
    d = tq.submit("--gpus", "0", "--after-any", str(a), cmd=tq.fake_job())
    e = tq.submit("--gpus", "0", "--after", f"{a},{d}", cmd=tq.fake_job())
    tq.wait_state(a, "running")
    assert {tq.state(x) for x in (b, c, d, e)} == {"blocked"}
    open(go, "w").close()
    assert tq.wait_state(a, "failed")["reason"] == "exit code 3"
    job_b = tq.wait_state(b, "cancelled")
    assert job_b["reason"] == f"dependency {a} failed"
    job_c = tq.wait_state(c, "cancelled")
    assert job_c["reason"] == f"dependency {b} was cancelled (dependency {a} failed)"
    assert tq.wait_state(e, "cancelled")["reason"] == f"dependency {a} failed"
    tq.wait_state(d, "succeeded")
    for x in (b, c, e):
        assert attempts_of(tq, x) == [], f"job {x} must never have run"


def test_cancel_a_blocked_job_and_its_dependents_follow(tq):
    go = tq.path("go")
    a = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    b = tq.submit("--gpus", "0", "--after", str(a), cmd=tq.fake_job())
    c = tq.submit("--gpus", "0", "--after", str(b), cmd=tq.fake_job())
    assert tq.state(b) == "blocked"
    out = tq.run("cancel", str(b)).stdout
    assert "blocked" in out
    assert tq.state(b) == "cancelled"
    job_c = tq.wait_state(c, "cancelled")
    assert job_c["reason"] == f"dependency {b} was cancelled"
    open(go, "w").close()
    tq.wait_state(a, "succeeded")
    assert tq.state(b) == "cancelled" and attempts_of(tq, b) == []


def test_dependencies_already_done_at_submit_resolve_at_once(tq):
    ok = tq.submit("--gpus", "0", cmd=["true"])
    bad = tq.submit("--gpus", "0", cmd=["false"])
    tq.wait_state(ok, "succeeded")
    tq.wait_state(bad, "failed")
    runs = tq.submit("--gpus", "0", "--after", str(ok), "--after-any", str(bad), cmd=["true"])
    tq.wait_state(runs, "succeeded")
    r = tq.run("submit", "--json", "--gpus", "0", "--after", f"{ok},{bad}", "--", "true")
    doomed = json.loads(r.stdout)
    assert doomed["state"] == "cancelled"
    assert doomed["reason"] == f"dependency {bad} failed"


def test_bad_dependency_ids_exit_2_and_store_nothing(tq):
    a = tq.submit("--gpus", "0", cmd=["true"])
    before = len(tq.ls("--all"))
    for opts, words in [(["--after", "99"], ["--after", "no job 99"]),
                        (["--after-any", f"{a},77"], ["--after-any", "no job 77"]),
                        (["--after", "abc"], ["--after", "'abc' is not a job id"]),
                        (["--after", "0"], ["--after", "'0'"]),
                        (["--after", f"{a},"], ["--after"])]:
        r = tq.run("submit", "--gpus", "0", *opts, "--", "true", check=False)
        assert r.returncode == 2, (opts, r.stdout, r.stderr)
        for word in words:
            assert word in r.stderr, (opts, r.stderr)
    # A batch with one bad dependency stores none of its jobs.
    jobs_file = tq.path("jobs.txt")
    with open(jobs_file, "w") as f:
        f.write("true\n")
        f.write(json.dumps({"command": ["true"], "after": [a]}) + "\n")
        f.write(json.dumps({"command": ["true"], "after": [12345]}) + "\n")
    r = tq.run("submit", "--gpus", "0", "--from", jobs_file, check=False)
    # The daemon's "jobs[2]" is named as the file's line.
    assert r.returncode == 2 and "jobs.txt line 3: --after" in r.stderr and "12345" in r.stderr, \
        r.stderr
    answer = tq.api("POST", "/v1/jobs", {"command": ["true"], "cwd": tq.work, "gpus": 0,
                                         "after": [4242]})
    assert answer.status == 400 and "no job 4242" in answer.body["error"]["message"]
    answer = tq.api("POST", "/v1/jobs", {"command": ["true"], "cwd": tq.work, "gpus": 0,
                                         "after": ["x"]})
    assert answer.status == 400 and "after[0]" in answer.body["error"]["message"]
    assert len(tq.ls("--all")) == before


def test_dependency_that_ends_while_the_daemon_is_dead_is_resolved_after_restart(tq):
    go = tq.path("go")
    a = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    b = tq.submit("--gpus", "0", "--after", str(a), cmd=tq.fake_job())
    failing = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go, "--exit", "1"))
    c = tq.submit("--gpus", "0", "--after", str(failing), cmd=tq.fake_job())
    tq.wait_state(a, "running")
    tq.wait_state(failing, "running")
    shims = [attempts_of(tq, x)[0]["pid"] for x in (a, failing)]
    tq.kill_daemon()
    open(go, "w").close()  # both dependencies end while no daemon runs
    wait_for(lambda: all(process_gone(p) for p in shims), what="the shims to end")
    tq.wait_state(b, "succeeded")  # any command restarts the daemon
    assert tq.state(a) == "succeeded"
    job_c = tq.wait_state(c, "cancelled")
    assert job_c["reason"] == f"dependency {failing} failed"


def test_retry_of_a_job_with_dependencies_waits_again(tq):
    go = tq.path("go")
    a = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go, "--exit", "1"))
    b = tq.submit("--gpus", "0", "--after", str(a), cmd=["true"])
    open(go, "w").close()
    tq.wait_state(a, "failed")
    tq.wait_state(b, "cancelled")
    os.unlink(go)
    tq.run("retry", str(a))  # runs again and waits for the go file
    tq.wait_state(a, "running")
    r = tq.run("retry", str(b))
    assert r.stdout.startswith(f"job {b} is back in the queue, blocked: waiting for job {a}")
    job_b = tq.wait_state(b, "blocked")
    assert job_b["reason"] == f"waiting for job {a} (running)"


def test_retry_says_what_happened_when_the_job_did_not_go_back(tq):
    a = tq.submit("--gpus", "0", cmd=["false"])
    b = tq.submit("--gpus", "0", "--after", str(a), cmd=["true"])
    tq.wait_state(a, "failed")
    tq.wait_state(b, "cancelled")
    # Its dependency is still failed: the retried job is cancelled again at once.
    r = tq.run("retry", str(b), check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"job {b} was retried but did not go back to the queue: it is cancelled" in r.stderr
    assert f"dependency {a} failed" in r.stderr
    assert "queued again" not in r.stdout
