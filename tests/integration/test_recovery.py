"""A crash-proof daemon: kill -9 (or stop) the daemon at several moments of a
job's life; after a restart every job ends as it should, and no attempt ever runs twice."""
import json
import os
import signal
import threading
import time

import pytest

from conftest import gpu, process_gone, read_lines, wait_for


def assert_ran_once(tq, job_id, marker, state, exit_code=0):
    job = tq.wait_state(job_id, state, timeout=30)
    assert len(job["attempts"]) == 1, job["attempts"]
    attempt = job["attempts"][0]
    assert attempt["state"] == state
    assert attempt["exit_code"] == exit_code
    lines = [line for line in read_lines(marker) if line.startswith(f"job {job_id} ")]
    assert len(lines) == 1, f"job {job_id} started {len(lines)} times: {read_lines(marker)}"
    assert lines[0].startswith(f"job {job_id} attempt 1 ")
    return job


def running_job(tq, marker, exit_code=0):
    job_id = tq.submit("--gpus", "0", cmd=tq.fake_job("--marker", marker, "--exit", str(exit_code),
                                                      "--wait-file", tq.path("go")))
    job = tq.wait_state(job_id, "running")
    wait_for(lambda: read_lines(marker), what="the job to start")
    return job_id, job["attempts"][0]["pid"]


@pytest.mark.parametrize("moment", ["right_after_submit", "queued_when_killed", "while_running",
                                    "exit_while_dead", "failure_while_dead", "daemon_stop",
                                    "sigterm"])
def test_daemon_death_never_loses_or_repeats_a_job(make_trainq, moment):
    full = moment == "queued_when_killed"  # the job cannot start before the kill
    tq = make_trainq([gpu(0, others="80GiB" if full else 0)])
    marker = tq.path("marker")
    go = tq.path("go")
    exit_code = 5 if moment == "failure_while_dead" else 0
    if moment in ("right_after_submit", "queued_when_killed"):
        tq.start_daemon()
        job_id = tq.submit("--mem", "1GiB",
                           cmd=tq.fake_job("--marker", marker, "--wait-file", go))
        tq.kill_daemon()
        if full:
            assert read_lines(marker) == [] and not os.path.isdir(tq.run_dir(job_id))
        tq.set_gpus([gpu(0)])
    else:
        job_id, shim = running_job(tq, marker, exit_code)
        if moment == "daemon_stop":
            tq.run("daemon", "stop")
        elif moment == "sigterm":
            pid = tq.daemon_pid()
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: process_gone(pid), what="the daemon to stop on SIGTERM")
        else:
            tq.kill_daemon()
        assert not process_gone(shim), "the job must outlive the daemon"
        if moment in ("exit_while_dead", "failure_while_dead"):
            open(go, "w").close()
            # The shim records the exit on its own while no daemon runs.
            wait_for(lambda: process_gone(shim), what="the job to end while the daemon is dead")
            assert os.path.exists(os.path.join(tq.run_dir(job_id), "exit.json"))

    job = tq.show(job_id)  # restarts the daemon
    if moment in ("while_running", "daemon_stop", "sigterm"):
        assert job["state"] == "running"
        assert job["attempts"][0]["pid"] == shim, "re-adopted, not restarted"
    open(go, "w").close()
    state = "failed" if exit_code else "succeeded"
    job = assert_ran_once(tq, job_id, marker, state, exit_code)
    assert job["attempts"][0]["ended_at"] is not None

    # The restarted daemon schedules as usual.
    nxt = tq.submit("--gpus", "0", cmd=["true"])
    tq.wait_state(nxt, "succeeded")


def test_repeated_kills_at_random_moments(make_trainq):
    """Jobs start and end while the daemon is killed over and over; two CPU slots make the
    jobs start one after another, so kills land while attempts are being started too."""
    tq = make_trainq(cpu_slots=2)
    marker = tq.path("marker")
    ids = [tq.submit("--gpus", "0", cmd=tq.fake_job("--marker", marker, "--duration", "0.1"))
           for i in range(10)]
    for delay in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5):
        tq.kill_daemon()
        tq.run("daemon")
        time.sleep(delay)  # let the restarted daemon get to a different point each time
    for job_id in ids:
        job = tq.wait_state(job_id, "succeeded", timeout=30)
        started = [a for a in job["attempts"] if a["exit_code"] is not None]
        # An attempt recorded but never started (killed in between) is ended and replaced;
        # one that started is never started again.
        assert len(started) == 1, job["attempts"]
        for a in job["attempts"][:-1]:
            assert a["end_reason"] == "the daemon stopped before this attempt started", a
        lines = [line for line in read_lines(marker) if line.startswith(f"job {job_id} ")]
        assert len(lines) == 1, (job_id, read_lines(marker))


def test_stopped_daemon_leaves_running_jobs_running(tq):
    marker = tq.path("marker")
    job_id, shim = running_job(tq, marker)
    pid = tq.daemon_pid()
    out = tq.run("daemon", "stop").stdout
    assert "1 running job(s) keep running" in out
    wait_for(lambda: process_gone(pid), what="the daemon to exit")
    time.sleep(0.3)  # the job must keep running without a daemon
    assert not process_gone(shim)
    assert tq.daemon_pid() is None
    tq.run("daemon")
    assert tq.state(job_id) == "running"
    open(tq.path("go"), "w").close()
    assert_ran_once(tq, job_id, marker, "succeeded")
    assert "re-adopted" in tq.daemon_log()


def test_cancel_completes_across_a_daemon_kill(tq):
    marker = tq.path("marker")
    pid_file = tq.path("worker.pid")
    script = (f"echo started >> {marker}; setsid sh -c 'echo $$ > {pid_file}.tmp; "
              f"mv {pid_file}.tmp {pid_file}; exec sleep 300' & wait")
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    tq.wait_state(job_id, "running")
    worker = int(wait_for(lambda: read_lines(pid_file), what="the worker's pid")[0])
    tq.run("cancel", str(job_id))
    tq.kill_daemon()  # before the daemon saw the job end
    wait_for(lambda: process_gone(worker), what="the cancelled job's tree to stop")
    job = tq.wait_state(job_id, "cancelled")
    assert len(job["attempts"]) == 1 and job["attempts"][0]["state"] == "cancelled"
    assert read_lines(marker) == ["started"]


def test_cancel_of_a_readopted_job(tq):
    marker = tq.path("marker")
    job_id, shim = running_job(tq, marker)
    tq.kill_daemon()
    assert tq.state(job_id) == "running"
    tq.run("cancel", str(job_id))
    job = tq.wait_state(job_id, "cancelled")
    assert process_gone(shim)
    assert len(job["attempts"]) == 1


def test_every_acknowledged_submit_of_eight_clients_survives_kills(make_trainq):
    """Eight clients submit at once, one process per job, while the daemon is killed -9 again
    and again (the next command starts it anew): every id a client was given is in the queue
    afterwards, each once. A submit that got no id may or may not have been stored; none is
    stored twice (its retries carry one idempotency key)."""
    tq = make_trainq(cpu_slots=2)
    tq.start_daemon()
    acked, attempts, errors = [], [0], []
    lock = threading.Lock()
    stop = threading.Event()

    def client(n):
        while not stop.is_set():
            proc = tq.run("submit", "--gpus", "0", "--name", f"c{n}", "--", "true", check=False)
            with lock:
                attempts[0] += 1
                if proc.returncode == 0:
                    acked.append(int(proc.stdout.strip()))
                else:
                    errors.append(proc.stderr.strip())

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    try:
        kills = 0
        # Kills go on until 40 ids were given too: on a loaded machine five kills can come
        # before the clients had that many answers, and the check is of many, not of speed.
        deadline = time.monotonic() + 120
        while (kills < 5 or len(acked) < 40) and time.monotonic() < deadline:
            time.sleep(0.4)
            if tq.daemon_pid():
                try:
                    tq.kill_daemon()
                    kills += 1
                except AssertionError:
                    pass  # it died or was replaced between the status call and the kill
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert kills >= 5, f"only {kills} kills landed"
    assert len(acked) >= 40, (len(acked), errors[-5:])
    assert len(set(acked)) == len(acked), "one id acknowledged twice"
    stored = {job["id"] for job in json.loads(tq.run("ls", "--all", "--json").stdout)}
    lost = sorted(set(acked) - stored)
    assert not lost, f"acknowledged but lost after kill -9: {lost}"
    assert len(stored) <= attempts[0], (len(stored), attempts[0])


def test_a_daemon_that_holds_its_lock_but_does_not_answer_is_waited_for_not_replaced(tq):
    """A daemon busy for longer than a client waits (a million-job batch being stored, a big
    queue loading; here: stopped with SIGSTOP) is running: `daemon status` says so, and a
    command waits for it and then says so too. No second daemon is started beside it, and no
    other daemon's refusal is shown as the answer."""
    pid = tq.start_daemon()
    log_size = os.path.getsize(os.path.join(tq.state_dir, "daemon.log"))
    os.kill(pid, signal.SIGSTOP)
    try:
        status = tq.run("daemon", "status", check=False)
        assert status.returncode == 1, status.stdout + status.stderr
        assert "runs (it holds daemon.lock) but does not answer" in status.stdout, status.stdout
        assert json.loads(tq.run("daemon", "status", "--json", check=False).stdout) == {
            "running": True, "answering": False, "state_dir": tq.state_dir}
        started = time.monotonic()
        start = tq.run("daemon", "start", check=False, timeout=60)
        assert start.returncode != 0
        assert "runs (it holds daemon.lock) but has not answered for 20 s" in start.stderr, \
            start.stderr
        assert "Nothing was restarted" in start.stderr
        assert time.monotonic() - started < 40
        with open(os.path.join(tq.state_dir, "daemon.log")) as f:
            f.seek(log_size)
            assert "already runs" not in f.read(), "a second daemon was started"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert tq.daemon_pid() == pid
