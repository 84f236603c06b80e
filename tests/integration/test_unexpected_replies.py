"""Replies trainq did not expect (a daemon of another version kept running across an
upgrade): every command says what it missed in one line and exits 1, never throws or aborts.
And a request the daemon received is never sent twice: only a connection that could not be
made is retried (after starting the daemon) — except a submit, which carries an
Idempotency-Key so that the daemon answers a repeat with the ids it already stored."""
import json
import os
import subprocess
import tempfile

import pytest

from conftest import check_no_sanitizer_report, trainq_binary
from fake_daemon import FakeDaemon

STATUS = {"pid": 4242, "state_dir": "/x", "node": "n", "probe": "no GPUs",
          "running_attempts": 0}


@pytest.fixture
def state_dir():
    with tempfile.TemporaryDirectory(prefix="tq-", dir="/tmp") as root:
        yield os.path.join(root, "state")


def run(state_dir, *args):
    env = dict(os.environ, TRAINQ_STATE_DIR=state_dir)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    proc = subprocess.run([trainq_binary(), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    check_no_sanitizer_report(proc.stderr, f"trainq {' '.join(args)}")
    return proc


def serve(state_dir, replies):
    os.makedirs(state_dir, exist_ok=True)
    table = {("GET", "/v1/status"): (200, STATUS)}
    table.update(replies)
    return FakeDaemon(os.path.join(state_dir, "trainq.sock"), table)


CASES = [
    # (command, route, reply, what the message must name)
    (["ls"], ("GET", "/v1/jobs"), {"items": []}, "lacks field 'jobs' (an array)"),
    (["ls"], ("GET", "/v1/jobs"), {"jobs": "none"}, "field 'jobs' as a string"),
    (["ls"], ("GET", "/v1/jobs"), [1, 2], "is an array, not an object"),
    (["ls"], ("GET", "/v1/jobs"), {"jobs": [{"id": 1, "attempts": 3}]}, "'jobs[0].attempts'"),
    (["ls", "--json"], ("GET", "/v1/jobs"), {}, "lacks field 'jobs'"),
    (["submit", "--", "true"], ("POST", "/v1/jobs"), {"id": 7}, "lacks field 'ids'"),
    (["submit", "--", "true"], ("POST", "/v1/jobs"), {"ids": ["7"]}, "'ids[0]'"),
    (["submit", "--", "true"], ("POST", "/v1/jobs"), {"ids": []}, "'ids'"),
    (["show", "1"], ("GET", "/v1/jobs/1"), {"id": 1, "command": "true"}, "field 'command'"),
    (["show", "1"], ("GET", "/v1/jobs/1"), {"id": 1, "command": ["true"], "attempts": [
        {"n": 1, "gpu_indices": [0, "1"]}]}, "'attempts[0].gpu_indices[1]'"),
    (["logs", "1"], ("GET", "/v1/jobs/1"), {"id": 1, "state": "running"}, "'attempts'"),
    (["logs", "1"], ("GET", "/v1/jobs/1"), {"id": 1, "state": "running", "attempts": [
        {"n": 1, "state": "running"}]}, "'attempts[0].log_path'"),
    (["cancel", "1"], ("POST", "/v1/jobs/cancel"), {"ok": True}, "lacks field 'results'"),
    (["cancel", "1"], ("POST", "/v1/jobs/cancel"), {"results": [{"id": 1, "ok": True}]},
     "'results[0].message'"),
    (["cancel", "1"], ("POST", "/v1/jobs/cancel"), {"results": [{"id": 1, "error": "no"}]},
     "'results[0].error'"),
    (["retry", "1"], ("POST", "/v1/jobs/retry"), {"results": [{"id": 1, "message": 5}]},
     "field 'results[0].message' as a number"),
    (["gpus"], ("GET", "/v1/gpus"), {"gpus": [{"index": 0, "attempts": [{"job": "x", "attempt": 1}]}]},
     "'gpus[0].attempts[0].job'"),
    (["gpus", "--topo"], ("GET", "/v1/gpus"), {"gpus": [{"name": "x"}]}, "'gpus[0].index'"),
    (["explain", "1"], ("GET", "/v1/jobs/1/explain"), {"job": 1, "waiting": True, "holds": []},
     "lacks field 'fair_share'"),
    (["config", "show"], ("GET", "/v1/config"), {"options": {}}, "field 'options' as an object"),
    (["config", "get", "devices"], ("GET", "/v1/config"), {"options": [{"value": 1}]},
     "'options[0].name'"),
    (["config", "set", "devices", "all"], ("PUT", "/v1/config"), {}, "'message'"),
    (["daemon", "status"], ("GET", "/v1/status"), {"pid": "4242"}, "field 'pid' as a string"),
    (["ls"], ("GET", "/v1/jobs"), b"<html>not json</html>", "not JSON"),
]


@pytest.mark.parametrize("args,route,reply,names", CASES,
                         ids=[f"{' '.join(c[0])}:{c[3]}" for c in CASES])
def test_a_reply_of_another_shape_is_one_line_and_exit_1(state_dir, args, route, reply, names):
    with serve(state_dir, {route: (200, reply)}) as daemon:
        proc = run(state_dir, *args)
        # `daemon status` asks whether a daemon runs before it asks for the status.
        assert daemon.count(*route) == (2 if route == ("GET", "/v1/status") else 1)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("trainq: "), proc.stderr
    assert names in lines[0], proc.stderr
    assert "terminate" not in proc.stderr and "exception" not in proc.stderr


def test_a_503_is_reported_not_sent_again(state_dir):
    busy = {"error": {"code": "unavailable", "message": "the store is busy; try again"}}
    with serve(state_dir, {("POST", "/v1/jobs"): (503, busy)}) as daemon:
        proc = run(state_dir, "submit", "--", "true")
        assert daemon.count("POST", "/v1/jobs") == 1, daemon.received
    assert proc.returncode != 0
    assert proc.stderr.strip() == "trainq: the store is busy; try again"


def test_a_submit_whose_answer_was_lost_is_sent_again_with_the_same_key(state_dir):
    replies = [(200, None), (200, {"ids": [7], "repeated": True})]
    with serve(state_dir, {("POST", "/v1/jobs"): replies}) as daemon:
        proc = run(state_dir, "submit", "--", "true")
        assert daemon.count("POST", "/v1/jobs") == 2, daemon.received
        keys = [h.get("Idempotency-Key") for (m, p, _), h in zip(daemon.received, daemon.headers)
                if (m, p) == ("POST", "/v1/jobs")]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "7"
    assert keys[0] and keys[0] == keys[1], keys
    # Each invocation makes its own key: a second submit is a new request.
    with serve(state_dir, {("POST", "/v1/jobs"): (201, {"ids": [8]})}) as daemon:
        assert run(state_dir, "submit", "--", "true").stdout.strip() == "8"
        assert daemon.headers[-1].get("Idempotency-Key") not in (None, keys[0])


def test_a_daemon_older_than_the_batch_routes_is_named_as_such(state_dir):
    old = {"error": {"code": "invalid",
                     "message": "job id: 'cancel' is not a job id; use a positive integer"}}
    with serve(state_dir, {("POST", "/v1/jobs/cancel"): (400, old)}) as daemon:
        proc = run(state_dir, "cancel", "1-3")
        assert daemon.count("POST", "/v1/jobs/cancel") == 1, daemon.received
    assert proc.returncode == 1, proc.stderr
    assert "daemon is older than this trainq" in proc.stderr, proc.stderr
    assert "trainq daemon stop" in proc.stderr, proc.stderr


def test_a_connection_lost_after_the_request_is_not_sent_again(state_dir):
    with serve(state_dir, {("POST", "/v1/jobs/cancel"): (200, None)}) as daemon:
        proc = run(state_dir, "cancel", "3")
        assert daemon.count("POST", "/v1/jobs/cancel") == 1, daemon.received
    assert proc.returncode == 1, proc.stderr
    assert "reading the trainq daemon's answer failed" in proc.stderr


def test_a_read_whose_answer_was_lost_is_asked_once_more(state_dir):
    job = {"id": 3, "name": "x", "state": "queued", "reason": "", "user": "u", "attempts": []}
    with serve(state_dir, {("GET", "/v1/jobs/3"): [(200, None), (200, job), (200, None)],
                           ("GET", "/v1/status"): (200, {"pid": 1})}) as daemon:
        proc = run(state_dir, "show", "--json", "3")
        assert daemon.count("GET", "/v1/jobs/3") == 2, daemon.received
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["id"] == 3
    # Once more only: a read lost twice is reported.
    with serve(state_dir, {("GET", "/v1/jobs/3"): (200, None),
                           ("GET", "/v1/status"): (200, {"pid": 1})}) as daemon:
        proc = run(state_dir, "show", "--json", "3")
        assert daemon.count("GET", "/v1/jobs/3") == 2, daemon.received
    assert proc.returncode == 1 and "reading the trainq daemon's answer failed" in proc.stderr
