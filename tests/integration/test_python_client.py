"""The Python client (python/trainq, docs/python.md) as a user runs it: Debian's own
interpreter in a subprocess, importing the package from the source tree or from where pip
installed it, against a real daemon with simulated GPUs."""
import json
import os
import shutil
import subprocess
import tempfile
import textwrap

from conftest import check_no_sanitizer_report
from fake_daemon import FakeDaemon
from test_listen import cert, free_port  # noqa: F401 (cert is a fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_SOURCE = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
PYTHON = "/usr/bin/python3"

# Every script's start: `caught(f, ...)` is None, or [class, code, http_status, message].
PRELUDE = """
import json, os, sys
import trainq

def caught(f, *args, **kw):
    try:
        f(*args, **kw)
    except trainq.TrainqError as e:
        return [type(e).__name__, e.code, e.http_status, e.message]
    return None

def out(value):
    print(json.dumps(value))
"""


def run_python(tq, script, *args, pythonpath=PACKAGE_SOURCE, env=None, timeout=120,
               python=PYTHON):
    """Runs PRELUDE + script with `python` (Debian's own by default) in the instance's work
    dir and returns the JSON of its last line of output."""
    env = dict(tq.env if env is None else env, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    code = PRELUDE + textwrap.dedent(script)
    proc = subprocess.run([python, "-c", code, *map(str, args)], env=env, cwd=tq.work,
                          capture_output=True, text=True, timeout=timeout)
    check_no_sanitizer_report(proc.stderr, "stderr of the Python client")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.splitlines()[-1])


def test_submit_wait_and_read_the_log_starting_the_daemon(tq):
    assert tq.daemon_pid() is None
    result = run_python(tq, """
        q = trainq.Client()
        good = q.submit(["sh", "-c", "echo hello from $WHO; pwd; echo $TRAINQ_SUBMIT_DIR"],
                        env={"WHO": "python"},
                        name="good", mem="1GiB")
        bad = q.submit("sh -c 'echo oops; exit 3'", gpus=0, retries=0)
        out({"good": q.wait(good, timeout=60, poll=0.05), "bad": q.wait(bad, timeout=60),
             "log": q.logs(good).decode(), "bad_log": q.logs(bad, attempt=1).decode(),
             "listed": [j["id"] for j in q.list(all=True)], "gpus": q.gpus()["gpus"]})
    """)
    assert tq.daemon_pid(), "the client did not start the personal daemon"
    good, bad = result["good"], result["bad"]
    assert good["state"] == "succeeded" and good["name"] == "good", good
    assert good["cwd"] == tq.work and good["gpus"] == 1 and good["mem_bytes"] == 1 << 30, good
    assert good["attempts"][-1]["exit_code"] == 0
    assert result["log"] == f"hello from python\n{tq.work}\n{tq.work}\n"
    assert bad["state"] == "failed" and bad["attempts"][-1]["exit_code"] == 3, bad
    assert result["bad_log"] == "oops\n"
    assert result["listed"] == [good["id"], bad["id"]]
    assert [g["uuid"] for g in result["gpus"]] == ["GPU-sim-0"]
    assert tq.show(good["id"])["command"] == ["sh", "-c",
                                              "echo hello from $WHO; pwd; echo $TRAINQ_SUBMIT_DIR"]


def test_cancel_a_waiting_job_and_a_wait_that_times_out(tq):
    release = tq.path("release")
    result = run_python(tq, """
        q = trainq.Client()
        first = q.submit(sys.argv[1:], gpus=0)
        waiting = q.submit(["true"], gpus=0, after=first)
        blocked = q.get(waiting)["state"]
        timed_out = caught(q.wait, first, timeout=0.2, poll=0.05)
        not_started = caught(q.logs, waiting)
        q.cancel(waiting)
        cancelled = q.wait(waiting, timeout=30)
        open(sys.argv[sys.argv.index("--wait-file") + 1], "w").close()
        out({"blocked": blocked, "timed_out": timed_out, "not_started": not_started,
             "cancelled": cancelled, "first": q.wait(first, timeout=60),
             "waiting_now": q.list(state="blocked")})
    """, *tq.fake_job("--wait-file", release))
    assert result["blocked"] == "blocked"
    assert result["timed_out"][:3] == ["Timeout", "timeout", None], result["timed_out"]
    assert result["not_started"][:3] == ["TrainqError", "conflict", 409], result["not_started"]
    assert result["cancelled"]["state"] == "cancelled"
    assert result["first"]["state"] == "succeeded"
    assert result["waiting_now"] == []


def test_cancel_many_and_retry_many_are_one_request_each(tq):
    tq.start_daemon()
    result = run_python(tq, """
        q = trainq.Client()
        ids = [q.submit(["sleep", "30"], gpus=0) for _ in range(3)]
        cancelled = q.cancel_many(ids + [999999])
        ended = [q.wait(i, timeout=30)["state"] for i in ids]
        out({"ids": ids, "cancelled": cancelled, "ended": ended,
             "retried": q.retry_many(ids[:1]), "none": q.retry_many([]),
             "twice": caught(q.cancel_many, [ids[0], ids[0]])})
    """)
    ids = result["ids"]
    assert [r["id"] for r in result["cancelled"]] == ids + [999999]
    assert all("message" in r for r in result["cancelled"][:3]), result["cancelled"]
    assert result["cancelled"][3]["error"]["code"] == "not_found"
    assert result["ended"] == ["cancelled"] * 3
    assert result["retried"][0]["id"] == ids[0] and "queued again" in result["retried"][0]["message"]
    assert result["none"] == []
    assert result["twice"][:3] == ["Invalid", "invalid", 400], result["twice"]
    tq.run("cancel", str(ids[0]))


def test_errors_are_raised_as_their_classes(tq):
    tq.start_daemon()
    result = run_python(tq, """
        q = trainq.Client()
        out({"mem": caught(q.submit, ["true"], mem="lots"),
             "unknown_key": caught(q.submit, ["true"], colour="blue"),
             "get": caught(q.get, 999999),
             "cancel": caught(q.cancel, 999999),
             "retry": caught(q.retry, 999999),
             "bad_id": caught(q.get, "1; rm"),
             "bad_url": caught(trainq.Client, server="ftp://gpu1:7070"),
             "nobody": caught(trainq.Client(server="unix:/nonexistent/trainq.sock").list),
             "ids": [j["id"] for j in q.list(all=True)]})
    """)
    kind, code, status, message = result["mem"]
    assert (kind, code, status) == ("Invalid", "invalid", 400) and "mem" in message, message
    assert result["unknown_key"][:3] == ["Invalid", "invalid", 400]
    assert "colour" in result["unknown_key"][3], result["unknown_key"]
    for call in ("get", "cancel", "retry"):
        assert result[call][:3] == ["NotFound", "not_found", 404], result[call]
    assert result["bad_id"][:2] == ["Invalid", "invalid"]
    assert result["bad_url"][:3] == ["Invalid", "invalid", None]
    assert "server" in result["bad_url"][3]
    assert result["nobody"][:3] == ["Unavailable", "unavailable", None], result["nobody"]
    assert result["ids"] == [], "a refused submit stored a job"


def test_a_lost_submit_answer_is_sent_again_with_the_same_key(tq):
    replies = {("POST", "/v1/jobs"): [(201, None), (200, {"ids": [7], "repeated": True})],
               ("GET", "/v1/jobs/7"): (200, None)}
    with FakeDaemon(tq.socket_path, replies) as fake:
        result = run_python(tq, """
            q = trainq.Client()
            out({"id": q.submit(["true"]), "get": caught(q.get, 7)})
        """)
    assert result["id"] == 7
    keys = [h.get("Idempotency-Key") for h in fake.headers[:2]]
    assert fake.count("POST", "/v1/jobs") == 2 and keys[0] and keys[0] == keys[1], keys
    # A request other than a submit is never sent again: it may have been carried out.
    assert result["get"][:2] == ["Unavailable", "io"], result["get"]
    assert fake.count("GET", "/v1/jobs/7") == 1


def test_a_state_dir_too_long_for_a_socket_path(make_trainq):
    tq = make_trainq(state_subdir="/".join(["a-rather-long-directory-name"] * 5))
    tq.run("daemon", "start")
    pid = json.loads(tq.run("daemon", "status", "--json").stdout)["pid"]
    result = run_python(tq, """
        out(trainq.Client().status()["pid"])
    """)
    assert result == pid


def test_pip_installs_the_package_offline(tq):
    with tempfile.TemporaryDirectory(prefix="tq-pip-", dir="/tmp") as tmp:
        # pip builds in the source tree: build a copy, never the checkout.
        source, target = os.path.join(tmp, "src"), os.path.join(tmp, "site")
        shutil.copytree(PACKAGE_SOURCE, source,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        proc = subprocess.run(
            [PYTHON, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
             "--disable-pip-version-check", "--target", target, source],
            capture_output=True, text=True, timeout=180, cwd=tmp)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        result = run_python(tq, """
            q = trainq.Client()
            job = q.wait(q.submit(["echo", "installed"], gpus=0), timeout=60)
            out({"file": trainq.__file__, "state": job["state"], "log": q.logs(job["id"]).decode()})
        """, pythonpath=target)
    assert result["file"] == os.path.join(target, "trainq", "__init__.py")
    assert (result["state"], result["log"]) == ("succeeded", "installed\n")


def test_https_with_a_token_and_the_tests_ca(make_trainq, cert, tmp_path):
    port = free_port()
    tq = make_trainq(listen=[f"127.0.0.1:{port}"], tls_cert=cert[0], tls_key=cert[1])
    tq.start_daemon()
    token_file = tmp_path / "config" / "trainq" / "token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(tq.run("token", "create", "py", "--role", "submit").stdout)
    token_file.chmod(0o600)
    env = dict(tq.env, TRAINQ_SERVER=f"https://127.0.0.1:{port}", TRAINQ_CA=cert[0],
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    env.pop("TRAINQ_TOKEN", None)
    result = run_python(tq, """
        q = trainq.Client()
        job = q.wait(q.submit(["echo", "over tls"], gpus=0), timeout=60)
        bad_token = caught(trainq.Client(token="tq_" + "0" * 64).list)
        os.chmod(sys.argv[1], 0o644)
        open_token_file = caught(trainq.Client)
        del os.environ["TRAINQ_CA"]
        untrusted = caught(trainq.Client(token="x").list)
        out({"describe": q.describe(), "state": job["state"], "log": q.logs(job["id"]).decode(),
             "bad_token": bad_token, "open_token_file": open_token_file,
             "untrusted": untrusted})
    """, token_file, env=env)
    assert result["describe"] == f"the trainq daemon at https://127.0.0.1:{port} (TRAINQ_SERVER)"
    assert (result["state"], result["log"]) == ("succeeded", "over tls\n")
    assert result["bad_token"][:3] == ["NotAllowed", "unauthenticated", 401], result["bad_token"]
    assert result["open_token_file"][:3] == ["NotAllowed", "permission", None]
    assert "chmod 600" in result["open_token_file"][3]
    assert result["untrusted"][:3] == ["NotAllowed", "permission", None], result["untrusted"]
    assert "does not verify" in result["untrusted"][3]
