"""The Python client (python/trainq) on every Python it supports (docs/python.md: 3.8 to 3.12):
each interpreter found runs a whole client session in a subprocess against a real daemon with
simulated GPUs. One not installed here is skipped; Debian's own always runs."""
import glob
import os
import shutil
import subprocess

import pytest

from test_python_client import PYTHON, run_python

VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12")
PYENV_VERSIONS = os.path.join(os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv"),
                              "versions")

# Uses every module of the package: the daemon started on demand, submit (a list, a string, a
# path, env, cwd), wait, logs, list, cancel, cancel_many, gpus, status, the errors, an https
# client's TLS context, and the gate.
SESSION = """
import pathlib

q = trainq.Client()
good = q.submit(["sh", "-c", "echo hello from $WHO; pwd"], env={"WHO": "python"},
                name="good", mem="1GiB", cwd=pathlib.Path.cwd())
bad = q.submit("sh -c 'echo oops; exit 3'", gpus=0, retries=0)
path_arg = q.submit([pathlib.Path("/bin/echo"), "path"], gpus=0)
long = q.submit(["sleep", "30"], gpus=0)
timed_out = caught(q.wait, long, timeout=0.2, poll=0.05)
q.cancel(long)
results = {"good": q.wait(good, timeout=60, poll=0.05), "bad": q.wait(bad, timeout=60),
           "path_arg": q.logs(q.wait(path_arg, timeout=60)["id"]).decode(),
           "long": q.wait(long, timeout=60)["state"],
           "log": q.logs(good).decode(), "bad_log": q.logs(bad, attempt=1).decode(),
           "listed": [j["id"] for j in q.list(all=True)],
           "running": q.list(state=["queued", "running"]),
           "unknown": q.cancel_many([999999])[0]["error"]["code"],
           "gpus": [g["uuid"] for g in q.gpus()["gpus"]], "pid": q.status()["pid"],
           "timed_out": timed_out, "mem": caught(q.submit, ["true"], mem="lots"),
           "not_found": caught(q.get, 999999), "bad_url": caught(trainq.Client, server="ftp://x:1"),
           "https": caught(trainq.Client(server="https://127.0.0.1:1", token="t").list),
           "version": "%d.%d" % sys.version_info[:2]}
os.environ.pop("CUDA_VISIBLE_DEVICES", None)
with trainq.gpu(gpus=1, quiet=True) as g:
    results["gate_inside"] = os.environ.get("CUDA_VISIBLE_DEVICES")
results["gate_after"] = os.environ.get("CUDA_VISIBLE_DEVICES")
results["gate_job"] = q.get(g.job_id)["state"]
out(results)
"""


def version_of(python):
    """"3.X" as `python` reports it, or None when it does not run (a pyenv shim of a version
    that is not installed fails)."""
    try:
        proc = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def where_to_look(version):
    return os.path.join(PYENV_VERSIONS, version + ".*", "bin", "python" + version)


def find_python(version):
    """An interpreter of `version`: pyenv's builds first, then pythonX.Y on PATH; None when
    none of them runs as that version."""
    candidates = sorted(glob.glob(where_to_look(version)), reverse=True)
    on_path = shutil.which("python" + version)
    for python in candidates + ([on_path] if on_path else []):
        if version_of(python) == version:
            return python
    return None


def check_session(tq, python, version):
    result = run_python(tq, SESSION, python=python)
    assert result["version"] == version
    assert tq.daemon_pid() == result["pid"], "the client did not start the personal daemon"
    good, bad = result["good"], result["bad"]
    assert good["state"] == "succeeded" and good["name"] == "good", good
    assert good["cwd"] == tq.work and good["mem_bytes"] == 1 << 30, good
    assert result["log"] == f"hello from python\n{tq.work}\n"
    assert bad["state"] == "failed" and bad["attempts"][-1]["exit_code"] == 3, bad
    assert result["bad_log"] == "oops\n"
    assert result["path_arg"] == "path\n"
    assert result["long"] == "cancelled"
    assert len(result["listed"]) == 4 and result["running"] == []
    assert result["unknown"] == "not_found"
    assert result["gpus"] == ["GPU-sim-0"]
    assert result["timed_out"][:3] == ["Timeout", "timeout", None], result["timed_out"]
    assert result["mem"][:3] == ["Invalid", "invalid", 400] and "mem" in result["mem"][3]
    assert result["not_found"][:3] == ["NotFound", "not_found", 404], result["not_found"]
    assert result["bad_url"][:3] == ["Invalid", "invalid", None], result["bad_url"]
    assert result["https"][:3] == ["Unavailable", "unavailable", None], result["https"]
    assert result["gate_inside"] == "0" and result["gate_after"] is None, result
    assert result["gate_job"] == "succeeded"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_client_session_on_each_supported_python(tq, version):
    python = find_python(version)
    if python is None:
        pytest.skip(f"Python {version} not found: looked for {where_to_look(version)} and "
                    f"python{version} on PATH")
    check_session(tq, python, version)


def test_a_client_session_on_debians_python(tq):
    version = version_of(PYTHON)
    assert version, f"{PYTHON} does not run"
    check_session(tq, PYTHON, version)
