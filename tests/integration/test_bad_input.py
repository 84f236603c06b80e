"""Bad input: refused with exit 2 (3 for unknown jobs), one line on stderr,
nothing stored; malformed requests on the socket get an error and the daemon keeps serving."""
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

from conftest import DEFAULT_CONFIG, Trainq, gpu, trainq_binary

BAD_SUBMITS = {
    "unknown unit": (["--mem", "20XB"], ["true"], "--mem"),
    "negative mem": (["--mem", "-1G"], ["true"], "--mem"),
    "negative mem =": (["--mem=-1G"], ["true"], "--mem"),
    "zero mem": (["--mem", "0"], ["true"], "--mem"),
    "negative gpus": (["--gpus", "-1"], ["true"], "--gpus"),
    "negative gpus =": (["--gpus=-1"], ["true"], "--gpus"),
    "too many gpus": (["--gpus", "9999"], ["true"], "--gpus 2"),
    "not a count": (["--gpus", "two"], ["true"], "--gpus"),
    "empty command": ([], [], "command"),
    "missing cwd": (["--cwd", "/nonexistent/dir"], ["true"], "--cwd"),
    "env without =": (["--env", "NOEQUALS"], ["true"], "--env"),
    "unknown flag": (["--bogus"], ["true"], "--bogus"),
    "mem on a cpu job": (["--gpus", "0", "--mem", "1GiB"], ["true"], "--mem"),
    "too many cpus": (["--cpus", "1000"], ["true"], "--cpus"),
    "negative retries": (["--retries", "-2"], ["true"], "--retries"),
    # Accepted once, and then waited forever, ran for 2h40m, or said "does not exist".
    "mem beyond the largest GPU": (["--mem", "81GiB"], ["true"], "(the largest has 80.0 GiB)"),
    "minutes past 59": (["--time", "1:99:99"], ["true"], "--time: '1:99:99'"),
    "cwd is a file": (["--cwd", "/etc/passwd"], ["true"], "/etc/passwd is not a directory"),
    "bad node name": (["--node", "gpu1,bad name"], ["true"], "--node: 'bad name' is not a node name"),
    "empty node name": (["--exclude-node", "a,,b"], ["true"], "--exclude-node: '' is not a node name"),
    "node allowed and excluded": (["--node", "a", "--exclude-node", "a"], ["true"],
                                  "a is also given with --node"),
    "zero nodes": (["--nodes", "0"], ["true"], "--nodes: 0 is not between 1 and 1024"),
    "gang of cpu jobs": (["-N", "2", "--gpus", "0"], ["true"], "--nodes: a job over several nodes"),
}


def stored_ids(t):
    answer = t.api("GET", "/v1/jobs?all=1")
    assert answer.status == 200, answer.raw
    return [j["id"] for j in answer.body["jobs"]]


@pytest.fixture(scope="module")
def instance():
    """One daemon for the whole file: refusals must leave it and the queue untouched. At the
    end, the next id follows the last stored one: refusals use up no ids."""
    root = tempfile.mkdtemp(prefix="tq-", dir="/tmp")
    t = Trainq(root, [gpu(0), gpu(1)], dict(DEFAULT_CONFIG, max_request="256KiB"))
    try:
        first = t.submit("--gpus", "0", cmd=["true"])
        yield t
        assert [j["id"] for j in t.ls("--all")] == [first]
        assert t.submit("--gpus", "0", cmd=["true"]) == first + 1
    finally:
        try:
            t.cleanup()
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tq(instance):
    """The instance; checks afterwards that the test stored nothing."""
    before = stored_ids(instance)
    yield instance
    assert stored_ids(instance) == before, "a refused input was stored"


def assert_one_line_error(r, code, mentions=None):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("trainq: ") and r.stderr.count("\n") == 1, r.stderr
    if mentions:
        assert mentions in r.stderr, r.stderr


@pytest.mark.parametrize("case", sorted(BAD_SUBMITS))
def test_bad_submit_is_refused(tq, case):
    opts, cmd, mentions = BAD_SUBMITS[case]
    args = ["submit", *opts, "--", *cmd] if cmd or opts else ["submit"]
    assert_one_line_error(tq.run(*args, check=False), 2, mentions)
    if not cmd:
        assert_one_line_error(tq.run("submit", "--", check=False), 2, "command")


def run_bytes(tq, args, env=None):
    """trainq with arguments (and environment) that are bytes, not text."""
    proc = subprocess.run([trainq_binary(), *args], env=env or tq.env, cwd=tq.work,
                          capture_output=True, timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode(errors="replace"),
                                       proc.stderr.decode(errors="replace"))


def test_bytes_that_are_not_utf8_are_refused_not_replaced(tq):
    r = run_bytes(tq, ["submit", "--gpus", "0", "--", "echo", b"caf\xe9"])
    assert_one_line_error(r, 2, "command[1]: byte 0xe9 at offset 3 is not UTF-8")
    env = {os.fsencode(k): os.fsencode(v) for k, v in tq.env.items()}
    env[b"LATIN1_VAR"] = b"gr\xfc\xdf"
    r = run_bytes(tq, ["submit", "--gpus", "0", "--", "true"], env=env)
    assert_one_line_error(r, 2, "environment variable LATIN1_VAR")
    assert "--env LATIN1_VAR=VALUE" in r.stderr, r.stderr


def test_a_command_execve_would_refuse_is_refused_at_submit(tq):
    answer = tq.api("POST", "/v1/jobs", {"command": ["echo", "a" * 140000], "gpus": 0,
                                         "cwd": tq.work})
    assert answer.status == 400, answer.raw
    assert "argument 1 is 140000 bytes" in answer.body["error"]["message"]


def test_too_many_gpus_names_the_largest_count(tq):
    r = tq.run("submit", "--gpus", "3", "--", "true", check=False)
    assert_one_line_error(r, 2, "--gpus")
    assert "has 2" in r.stderr and "--gpus 2" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["show", "abc"], ["show", "1.5"], ["logs", "x"],
                                  ["cancel", "1x"], ["retry", "0"], ["show", "--", "-3"],
                                  ["ls", "--bogus"], ["show"], ["frobnicate"]])
def test_bad_arguments_exit_2(tq, args):
    assert_one_line_error(tq.run(*args, check=False), 2)


@pytest.mark.parametrize("command", ["show", "logs", "cancel", "retry"])
def test_unknown_job_exits_3(tq, command):
    assert_one_line_error(tq.run(command, "999", check=False), 3, "999")


def test_bad_state_filter(tq):
    assert_one_line_error(tq.run("ls", "--state", "sleeping", check=False), 2, "sleeping")


# --- straight to the socket ---

def assert_still_serving(tq):
    assert tq.run("ls").returncode == 0
    assert tq.api("GET", "/v1/status").status == 200


@pytest.mark.parametrize("body", [
    b'{"command": ["true"]',                         # truncated
    b'{"command": "true"}',                          # wrong type
    b'{"command": ["true"], "gpus": "1"}',
    b'{"command": ["true"], "mem": 20}',
    b'{"command": ["true"], "env": {"A": 1}}',
    b'{"command": ["true"], "surprise": 1}',
    b'["true"]',
    b'{"jobs": []}',
    b'{"jobs": "x"}',
    b'\xff\xfe not json',
    b'',
])
def test_malformed_submit_body(tq, body):
    answer = tq.api("POST", "/v1/jobs", body)
    assert answer.status == 400, answer.raw
    assert answer.error_code == "invalid"
    assert answer.body["error"]["message"]
    assert_still_serving(tq)


def test_body_over_the_limit(tq):
    body = b'{"command": ["true"], "name": "' + b"x" * (1 << 20) + b'"}'
    answer = tq.api("POST", "/v1/jobs", body)
    assert answer.status == 413, answer.raw
    assert answer.error_code == "invalid"
    assert_still_serving(tq)


@pytest.mark.parametrize("data", [
    b"\x00\x01\x02garbage that is not HTTP\r\n\r\n",
    b"HELLO\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"POST /v1/jobs HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"POST /v1/jobs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
])
def test_garbage_bytes(tq, data):
    answer = tq.raw_request(data)
    if answer.raw:  # an error response, or nothing and a closed connection
        assert answer.status == 400, answer.raw
        assert answer.error_code == "invalid"
    assert_still_serving(tq)


def test_half_request_then_close(tq):
    for data in (b"POST /v1/jobs HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"comm",
                 b"GET /v1/jo", b"POST /v1/jobs HTTP/1.1\r\nContent-Le"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(tq.socket_path)
            s.sendall(data)
        assert_still_serving(tq)


def test_a_stalled_client_does_not_block_others(tq):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(tq.socket_path)
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        assert_still_serving(tq)


@pytest.mark.parametrize("method,target,status,code", [
    ("GET", "/v1/nothing", 404, "not_found"),
    ("DELETE", "/v1/jobs", 404, "not_found"),
    ("GET", "/v1/jobs/abc", 400, "invalid"),
    ("GET", "/v1/jobs/999", 404, "not_found"),
    ("POST", "/v1/jobs/1/explode", 404, "not_found"),
    ("GET", "/v1/jobs?state=nope", 400, "invalid"),
    ("GET", "/v1/jobs?limit=-1", 400, "invalid"),
])
def test_bad_routes(tq, method, target, status, code):
    answer = tq.api(method, target)
    assert answer.status == status, answer.raw
    assert answer.error_code == code
    assert_still_serving(tq)


def test_the_api_needs_only_a_command(make_trainq):
    t = make_trainq()
    t.run("ls")
    answer = t.api("POST", "/v1/jobs", {"command": ["pwd"], "gpus": 0})
    assert answer.status == 201, answer.raw
    job = answer.body["ids"][0]
    t.wait_state(job, ["succeeded"])
    home = os.path.expanduser("~")
    assert t.show(job)["cwd"] == home
    assert open(os.path.join(t.run_dir(job), "output.log")).read().strip() == home


def test_control_characters_are_shown_escaped(make_trainq):
    t = make_trainq()
    job = t.submit("--gpus", "0", cmd=["echo", "\x1b]0;pwned\x07\x1b[2Jgone"])
    for out in (t.run("show", str(job)).stdout, t.run("ls").stdout):
        assert "\x1b" not in out and "\x07" not in out, repr(out)
    assert "\\x1b]0;pwned\\x07\\x1b[2Jgone" in t.run("show", str(job)).stdout
    # --json carries the bytes as they are (JSON-escaped), for scripts.
    assert t.show(job)["command"][1] == "\x1b]0;pwned\x07\x1b[2Jgone"


def test_bad_config_is_reported_at_once(make_trainq):
    t = make_trainq(oom_backoff="soon", bogus_option=1)
    r = t.run("ls", check=False, timeout=10)
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "oom_backoff" in r.stderr, r.stderr
    assert t.daemon_pid() is None
    t.write_config(DEFAULT_CONFIG)
    assert t.run("ls").stdout.startswith("ID")


def test_an_ask_no_gpu_can_ever_give_is_refused(tq):
    # 80 GiB GPUs with 256 MiB of headroom: 80 GiB or 100% would wait forever.
    for mem, most in (("80GiB", "at most 79.8 GiB"), ("100%", "at most 99.6%")):
        r = tq.run("submit", "--mem", mem, "--", "true", check=False)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--mem" in r.stderr and "can never fit" in r.stderr and most in r.stderr, r.stderr
    # (the fixture checks that nothing was stored)
