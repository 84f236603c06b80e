"""A job's processes never outlive their supervisor unnoticed: a shim
killed -9 or a run dir removed while the daemon is down leaves processes that still hold GPUs;
the daemon stops them before it records the attempt's end, frees its GPUs or starts it again."""
import os
import re
import shutil
import signal
import time

from conftest import gpu, process_gone, read_lines, wait_for


def job_pid(marker, job_id, attempt):
    """The pid fake_train wrote in its marker line for this attempt, None before it did."""
    for line in read_lines(marker):
        if line.startswith(f"job {job_id} attempt {attempt} pid "):
            return int(line.rsplit(" ", 1)[1])
    return None


def test_a_killed_shim_has_its_job_stopped_before_its_gpu_is_freed(make_trainq):
    tq = make_trainq([gpu(0, total="80GiB")], grace_period="1s")
    marker = tq.path("marker")
    # The job's process is the shell's child, so only the daemon can find it once the shim is
    # gone; it ignores SIGTERM (SIGKILL after the grace) and allocates 60 GiB only after 2 s.
    train = " ".join(tq.fake_job("--marker", marker, "--mem-gib", "60", "--alloc-after", "2",
                                 "--duration", "300"))
    first = tq.submit("--mem", "60GiB", cmd=["sh", "-c", f"trap '' TERM; {train} & wait"])
    shim = tq.wait_state(first, "running")["attempts"][0]["pid"]
    pid = wait_for(lambda: job_pid(marker, first, 1), what="the job to start")

    os.kill(shim, signal.SIGKILL)
    second = tq.submit("--mem", "60GiB", cmd=tq.fake_job("--duration", "0"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        states = (tq.state(first), tq.state(second))
        if process_gone(pid):
            break
        # Read while the first job's process lived: its attempt and its GPU memory are held.
        assert states == ("running", "queued"), states
        time.sleep(0.05)
    assert process_gone(pid), "the job's process outlived its shim"
    job = tq.wait_state(first, "failed")
    assert "died without an exit record" in job["reason"], job["reason"]
    # The python process, and the shell if its parent-death signal had not landed yet.
    assert re.search(r"its \d+ process(es)? (was|were) stopped$", job["reason"]), job["reason"]
    tq.wait_state(second, "succeeded")


def test_a_run_dir_removed_while_the_daemon_is_down_never_runs_two_attempts(tq):
    marker = tq.path("marker")
    job_id = tq.submit("--gpus", "0", cmd=tq.fake_job("--marker", marker,
                                                      "--wait-file", tq.path("go")))
    shim = tq.wait_state(job_id, "running")["attempts"][0]["pid"]
    first = wait_for(lambda: job_pid(marker, job_id, 1), what="attempt 1 to start")
    daemon = tq.daemon_pid()
    tq.run("daemon", "stop")
    wait_for(lambda: process_gone(daemon), what="the daemon to exit")
    assert not process_gone(first) and not process_gone(shim)
    shutil.rmtree(tq.run_dir(job_id, 1))

    tq.run("daemon")
    second = wait_for(lambda: job_pid(marker, job_id, 2), what="attempt 2 to start")
    assert process_gone(first), "attempt 2 started beside attempt 1"
    assert process_gone(shim)
    assert second != first
    open(tq.path("go"), "w").close()
    job = tq.wait_state(job_id, "succeeded")
    assert len(job["attempts"]) == 2, job["attempts"]
    reason = job["attempts"][0]["end_reason"]
    assert "was missing" in reason and "processes were stopped" in reason, reason
