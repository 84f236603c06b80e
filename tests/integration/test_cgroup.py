"""Each attempt runs in a cgroup of its own (docs/architecture.md, "Control groups"): its host
memory (--mem-limit) and tasks (--max-procs) are bounded there, and the group names every process
it started, however it left the shim's session or environment. Real processes, real cgroups:
skipped where this host gives the daemon none."""
import os
import signal
import time

import pytest

from conftest import cgroup_name, process_gone, wait_for

ROOT = "/sys/fs/cgroup"


def cgroup_version():
    if os.path.exists(f"{ROOT}/cgroup.controllers"):
        return "v2"
    if os.path.exists(f"{ROOT}/memory/cgroup.procs") and os.path.exists(f"{ROOT}/pids/cgroup.procs"):
        return "v1"
    return None


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or cgroup_version() is None,
                                reason="needs root and cgroups")


def cgroup_dirs(run_dir):
    name = cgroup_name(run_dir)
    if cgroup_version() == "v2":
        return [f"{ROOT}/trainq.slice/{name}"]
    return [f"{ROOT}/memory/trainq/{name}", f"{ROOT}/pids/trainq/{name}"]


def cgroup_procs(run_dir):
    pids = set()
    for d in cgroup_dirs(run_dir):
        try:
            pids |= {int(p) for p in open(f"{d}/cgroup.procs").read().split()}
        except FileNotFoundError:
            pass
    return pids


def read_pid(tq, name):
    path = tq.path(name)
    wait_for(lambda: os.path.exists(path) and open(path).read().strip(), what=name)
    return int(open(path).read())


def running_attempt(tq, job_id):
    return tq.wait_state(job_id, "running")["attempts"][0]


def test_daemon_says_it_uses_cgroups(tq):
    tq.wait_state(tq.submit("--gpus", "0", cmd=["true"]), "succeeded")
    assert f"cgroup {cgroup_version()} at {ROOT}" in tq.daemon_log()


def test_job_past_its_memory_limit_is_killed_while_another_runs_on(tq):
    other = tq.submit("--gpus", "0", cmd=["sh", "-c", "sleep 3; echo done"])
    hog = tq.submit("--gpus", "0", "--mem-limit", "64MiB", "--retries", "3",
                    cmd=["python3", "-c", "b = bytearray(512 << 20); print('allocated')"])
    job = tq.wait_state(hog, "failed", timeout=30)
    assert job["reason"] == ("host memory limit 64.0 MiB reached (--mem-limit); "
                             "killed by SIGKILL"), job["reason"]
    assert job["mem_limit_bytes"] == 64 << 20
    attempt = job["attempts"][0]
    assert len(job["attempts"]) == 1 and attempt["oom"] is False  # never a GPU OOM retry
    log = open(attempt["log_path"]).read()
    assert "allocated" not in log
    assert "host memory limit 64.0 MiB reached (--mem-limit)" in log
    assert tq.state(other) == "running"
    tq.wait_state(other, "succeeded", timeout=30)
    for d in cgroup_dirs(attempt["run_dir"]):
        assert not os.path.exists(d), d
    assert "host mem limit:" in tq.run("show", str(hog)).stdout


def test_fork_bomb_stops_at_max_procs(tq):
    bomb = ("import os, time\n"
            "n = 0\n"
            "for i in range(200):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        continue\n"
            "    if pid == 0:\n"
            "        time.sleep(60)\n"
            "        os._exit(0)\n"
            "    n += 1\n"
            "open('forked.tmp', 'w').write(str(n))\n"
            "os.rename('forked.tmp', 'forked')\n"
            "time.sleep(60)\n")
    job_id = tq.submit("--gpus", "0", "--max-procs", "20",
                       cmd=["python3", "-c", bomb])
    attempt = running_attempt(tq, job_id)
    forked = read_pid(tq, "forked")
    procs = cgroup_procs(attempt["run_dir"])
    print(f"forks that succeeded: {forked}; processes in the cgroup: {len(procs)}")
    assert forked == 19, forked  # the main process and 19 children: 20 tasks
    assert len(procs) == 20, procs
    assert tq.show(job_id)["max_procs"] == 20
    tq.run("cancel", str(job_id))
    tq.wait_state(job_id, "cancelled", timeout=30)
    assert all(process_gone(p) for p in procs)
    assert "181 forks refused at the task limit 20 (--max-procs)" in open(attempt["log_path"]).read()
    for d in cgroup_dirs(attempt["run_dir"]):
        assert not os.path.exists(d), d


# A process that leaves the shim's session (setsid after a double fork) with an empty
# environment: no TRAINQ_RUN_DIR and no session tie, so only the cgroup still names it.
ESCAPE = ("env -i setsid -f sh -c 'echo $$ > escaped.pid; exec sleep 300'; "
          "echo $$ > main.pid; sleep 300")


def test_escaped_process_is_stopped_at_the_end_of_its_job(tq):
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", ESCAPE])
    attempt = running_attempt(tq, job_id)
    escaped = read_pid(tq, "escaped.pid")
    assert escaped in cgroup_procs(attempt["run_dir"])
    os.kill(read_pid(tq, "main.pid"), signal.SIGKILL)
    tq.wait_state(job_id, "failed", timeout=30)
    wait_for(lambda: process_gone(escaped), what="the escaped process to be stopped")
    for d in cgroup_dirs(attempt["run_dir"]):
        assert not os.path.exists(d), d


def test_escaped_process_of_a_killed_shim_is_found_by_the_cgroup(tq):
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", ESCAPE])
    attempt = running_attempt(tq, job_id)
    escaped = read_pid(tq, "escaped.pid")
    environ = open(f"/proc/{escaped}/environ", "rb").read()
    assert b"TRAINQ_RUN_DIR" not in environ
    assert os.getsid(escaped) == escaped  # its own session, not the shim's
    os.kill(attempt["pid"], signal.SIGKILL)
    job = tq.wait_state(job_id, "failed", timeout=30)
    assert "died without an exit record" in job["reason"], job["reason"]
    assert process_gone(escaped), "the escaped process outlived its shim"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(d)
                                              for d in cgroup_dirs(attempt["run_dir"])):
        time.sleep(0.05)
    for d in cgroup_dirs(attempt["run_dir"]):
        assert not os.path.exists(d), d


def test_limits_are_checked_at_submit(tq):
    before = len(tq.ls("--all"))
    for args, field in [(["--mem-limit", "lots"], "--mem-limit"),
                        (["--mem-limit", "64PiB"], "--mem-limit"),
                        (["--max-procs", "0"], "--max-procs"),
                        (["--max-procs", "100000"], "--max-procs")]:
        r = tq.run("submit", "--gpus", "0", *args, "--", "true", check=False)
        assert r.returncode == 2, (args, r.stderr)
        assert field in r.stderr, (args, r.stderr)
    assert len(tq.ls("--all")) == before
