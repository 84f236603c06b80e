"""Cancels through the real CLI, API and shims: a cancel that reaches a job at any moment of
its start ends it cancelled, never failed, and a range is one decision (nothing starts
between two of its cancels)."""
from conftest import gpu, wait_for

ACTIVE = "queued,blocked,starting,running"


def submit_body(tq, cmd, **fields):
    body = {"command": cmd, "cwd": tq.work, "env": {"PATH": "/usr/bin:/bin"}, "gpus": 0}
    body.update(fields)
    return body


def api_submit(tq, *bodies):
    """Submits jobs in one request straight through the socket; their ids."""
    payload = bodies[0] if len(bodies) == 1 else {"jobs": list(bodies)}
    answer = tq.api("POST", "/v1/jobs", payload)
    assert answer.status == 201, answer.raw
    return answer.body["ids"]


def jobs(tq, query):
    answer = tq.api("GET", "/v1/jobs?" + query)
    assert answer.status == 200, answer.raw
    return answer.body["jobs"]


def wait_none_active(tq, timeout=60):
    wait_for(lambda: not jobs(tq, "state=" + ACTIVE), timeout=timeout,
             what="every job to end")


def not_cancelled(tq, ids):
    """(id, state, reason) of each job of `ids` that did not end cancelled."""
    wanted = set(ids)
    return [(j["id"], j["state"], j.get("reason")) for j in jobs(tq, "all=1")
            if j["id"] in wanted and j["state"] != "cancelled"]


# The report: four 40 GiB GPUs, three jobs wanting 30 GiB on all four. Job 1's stop frees
# its GPUs; before, the client's next request found job 3 started and killed its new shim.
def test_cancel_of_a_range_cancels_the_running_and_the_waiting(make_trainq):
    tq = make_trainq(gpus=[gpu(i, total="40GiB") for i in range(4)])
    for round_ in range(3):
        ids = [tq.submit("--mem", "30GiB", "--gpus", "4", cmd=["sleep", "30"]) for _ in range(3)]
        tq.wait_state(ids[0], "running")
        assert [tq.state(i) for i in ids[1:]] == ["queued", "queued"]
        out = tq.run("cancel", f"{ids[0]}-{ids[-1]}").stdout
        # Durations as people read them, as the daemon's log writes them.
        assert f"job {ids[0]}: stopping its processes (SIGTERM, then SIGKILL after 1s)" in out
        for i in ids:
            job = tq.wait_state(i, ["cancelled", "failed", "succeeded"])
            assert job["state"] == "cancelled", (round_, job)
        assert all(len(tq.show(i)["attempts"]) == 0 for i in ids[1:]), "a waiting job started"


# Submit and cancel at once, 200 times, over one daemon: the cancel lands before the pass,
# while the shim is being started, or just after; every job must end cancelled.
def test_a_cancel_at_any_moment_of_a_start_is_a_cancel(tq):
    tq.start_daemon()
    ids = []
    for i in range(200):
        [job_id] = api_submit(tq, submit_body(tq, ["sleep", "30"]))
        ids.append(job_id)
        target = f"/v1/jobs/{job_id}/cancel" if i % 2 else "/v1/jobs/cancel"
        answer = tq.api("POST", target, None if i % 2 else {"ids": [job_id]})
        assert answer.status == 200, answer.raw
    wait_none_active(tq)
    assert not_cancelled(tq, ids) == []
    started = [j for j in jobs(tq, "all=1") if j["attempts"]]
    assert started, "no shim was ever started: every cancel came before the pass"


# 50 ranges over jobs of which some run and some wait (two CPU slots for four jobs), half of
# them cancelled the moment they are submitted, half once two run.
def test_range_cancels_over_running_and_waiting_jobs(make_trainq):
    tq = make_trainq(cpu_slots=2)
    tq.start_daemon()
    ids = []
    for round_ in range(50):
        batch = api_submit(tq, *[submit_body(tq, ["sleep", "30"]) for _ in range(4)])
        ids += batch
        if round_ % 2:
            wait_for(lambda: len(jobs(tq, "state=running")) == 2, timeout=20,
                     what=f"two jobs of round {round_} to run")
        tq.run("cancel", f"{batch[0]}-{batch[-1]}")
    wait_none_active(tq)
    assert not_cancelled(tq, ids) == []
    started = [j for j in jobs(tq, "all=1") if j["attempts"]]
    assert started, "no job ever ran: the cancels reached only waiting jobs"


def test_a_batch_cancel_reports_each_job_and_refuses_a_bad_list(tq):
    tq.start_daemon()
    done, sleeper = api_submit(tq, submit_body(tq, ["true"]), submit_body(tq, ["sleep", "30"]))
    tq.wait_state(done, "succeeded")
    tq.wait_state(sleeper, "running")
    bad = tq.api("POST", "/v1/jobs/cancel", {"ids": [sleeper, "x"]})
    assert bad.status == 400 and "ids[1]" in bad.body["error"]["message"], bad.raw
    assert tq.state(sleeper) == "running", "a refused request cancelled a job"

    answer = tq.api("POST", "/v1/jobs/cancel", {"ids": [done, sleeper, 999]})
    assert answer.status == 200, answer.raw
    results = answer.body["results"]
    assert [r["id"] for r in results] == [done, sleeper, 999]
    assert results[0]["error"]["code"] == "conflict"
    assert results[1]["state"] == "running" and "stopping" in results[1]["message"]
    assert results[2]["error"]["code"] == "not_found"
    assert tq.wait_state(sleeper, ["cancelled", "failed"])["state"] == "cancelled"
    # The CLI prints each job's refusal and exits with the worst: not found (3).
    proc = tq.run("cancel", str(done), "999", check=False)
    assert proc.returncode == 3, proc.stderr
    assert "already ended" in proc.stderr and "999" in proc.stderr, proc.stderr
