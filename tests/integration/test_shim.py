"""The job's process and environment: what the shim gives the command, how
cancel stops a whole tree, and the job's output through `trainq logs`."""
import os
import subprocess
import sys

from conftest import gpu, process_gone, read_json, read_lines, trainq_binary, wait_for


def test_job_environment(make_trainq):
    # GPU 0 is full, so the job lands on GPU 1: CUDA_VISIBLE_DEVICES must say 1, not 0.
    tq = make_trainq([gpu(0, others="79GiB"), gpu(1)])
    tq.env["SUBMITTER_MARK"] = "from the submitter's shell"
    tq.env["OVERRIDDEN"] = "old"
    env_out = tq.path("env.json")
    job_id = tq.submit("--mem", "10GiB", "--env", "EXTRA=a=b c", "--env", "OVERRIDDEN=new",
                       "--env", "CUDA_VISIBLE_DEVICES=7", cmd=tq.fake_job("--env-out", env_out))
    tq.wait_state(job_id, "succeeded")
    env = read_json(env_out)
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["TRAINQ_JOB_ID"] == str(job_id)
    assert env["TRAINQ_ATTEMPT"] == "1"
    assert env["TRAINQ_GPUS"] == "GPU-sim-1"
    assert env["SUBMITTER_MARK"] == "from the submitter's shell"
    assert env["EXTRA"] == "a=b c"
    assert env["OVERRIDDEN"] == "new"
    assert env["PATH"] == tq.env["PATH"]
    assert "TRAINQ_SHIM_LOCK_FD" not in env


def test_cpu_job_sees_no_gpu(tq):
    env_out = tq.path("env.json")
    job_id = tq.submit("--gpus", "0", cmd=tq.fake_job("--env-out", env_out))
    job = tq.wait_state(job_id, "succeeded")
    assert job["attempts"][0]["gpu_indices"] == []
    env = read_json(env_out)
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["TRAINQ_JOB_ID"] == str(job_id)


def test_argv_is_not_interpreted_by_a_shell(tq):
    out = tq.path("argv.json")
    args = ["$HOME", "*", ";", "a b", "`id`", "$(echo x)", "'q'", "", "\\n"]
    code = f"import json, sys; json.dump(sys.argv[1:], open({out!r}, 'w'))"
    job_id = tq.submit("--gpus", "0", cmd=[sys.executable, "-c", code, *args])
    tq.wait_state(job_id, "succeeded")
    assert read_json(out) == args
    assert tq.show(job_id)["command"][3:] == args


def test_cancel_stops_the_whole_tree(tq):
    pid_file = tq.path("grandchild.pid")
    # The grandchild leaves the job's session and process group, as torchrun's workers do.
    script = (f"setsid sh -c 'echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; "
              f"exec sleep 300' & wait")
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    tq.wait_state(job_id, "running")
    grandchild = int(wait_for(lambda: read_lines(pid_file), what="the grandchild's pid")[0])
    assert not process_gone(grandchild)
    shim = tq.show(job_id)["attempts"][0]["pid"]
    assert os.getsid(grandchild) != os.getsid(shim)

    out = tq.run("cancel", str(job_id)).stdout
    assert f"job {job_id}" in out
    job = tq.wait_state(job_id, "cancelled", timeout=30)
    assert process_gone(grandchild), "the grandchild survived the cancel"
    assert process_gone(shim)
    assert job["attempts"][0]["state"] == "cancelled"
    assert tq.ls() == []


def test_leftovers_of_a_finished_job_are_stopped(tq):
    pid_file = tq.path("leftover.pid")
    script = f"setsid sleep 300 & echo $! > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}"
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    tq.wait_state(job_id, "succeeded", timeout=30)
    leftover = int(read_lines(pid_file)[0])
    wait_for(lambda: process_gone(leftover), timeout=10, what="the leftover to be stopped")


def test_cancel_of_a_waiting_job_removes_it(make_trainq):
    tq = make_trainq([gpu(0, others="80GiB")])
    marker = tq.path("marker")
    job_id = tq.submit("--mem", "1GiB", cmd=tq.fake_job("--marker", marker))
    assert tq.state(job_id) == "queued"
    out = tq.run("cancel", str(job_id)).stdout
    assert "cancelled" in out
    job = tq.show(job_id)
    assert job["state"] == "cancelled"
    assert job["attempts"] == []
    assert tq.ls() == []
    assert [j["id"] for j in tq.ls("--all")] == [job_id]
    tq.set_gpus([gpu(0)])  # room now: a cancelled job must still never start
    wait_for(lambda: tq.gpus()["gpus"][0]["memory_used"] == 0, what="the new sample")
    other = tq.submit("--mem", "1GiB", cmd=tq.fake_job())
    tq.wait_state(other, "succeeded")
    assert tq.state(job_id) == "cancelled"
    assert read_lines(marker) == []
    r = tq.run("cancel", str(job_id), check=False)
    assert r.returncode == 1 and "already ended" in r.stderr


def test_no_fd_leaks_into_the_job(tq):
    job_id = tq.submit("--gpus", "0", cmd=["ls", "/proc/self/fd"])
    tq.wait_state(job_id, "succeeded")
    # ls's own directory fd is the 3.
    assert tq.run("logs", str(job_id)).stdout.split() == ["0", "1", "2", "3"]


def test_logs_have_stdout_and_stderr(tq):
    script = "echo out-1; echo err-1 >&2; echo out-2; echo err-2 >&2; exit 4"
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    tq.wait_state(job_id, "failed")
    assert tq.run("logs", str(job_id)).stdout == "out-1\nerr-1\nout-2\nerr-2\n"


def test_logs_follow_until_the_end(tq):
    go = tq.path("go")
    script = (f"echo first; while [ ! -e {go} ]; do sleep 0.02; done; "
              "for i in 1 2 3; do echo line-$i; echo err-$i >&2; done; echo last")
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    tq.wait_state(job_id, "running")
    follower = subprocess.Popen([trainq_binary(), "logs", "-f", str(job_id)], env=tq.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follower.stdout.readline() == "first\n"
        assert follower.poll() is None, "logs -f ended while the job runs"
        open(go, "w").close()
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert out == "line-1\nerr-1\nline-2\nerr-2\nline-3\nerr-3\nlast\n"
    assert tq.state(job_id) == "succeeded"


def test_logs_follow_of_a_waiting_job_starts_when_it_starts(make_trainq):
    tq = make_trainq([gpu(0, others="80GiB")])
    job_id = tq.submit("--mem", "1GiB", cmd=["sh", "-c", "echo hello; echo bye"])
    follower = subprocess.Popen([trainq_binary(), "logs", "-f", str(job_id)], env=tq.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tq.set_gpus([gpu(0)])
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert out == "hello\nbye\n"


def test_logs_follow_of_a_job_cancelled_before_it_started(make_trainq):
    tq = make_trainq([gpu(0, others="80GiB")])
    job_id = tq.submit("--mem", "1GiB", cmd=["true"])
    follower = subprocess.Popen([trainq_binary(), "logs", "-f", str(job_id)], env=tq.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tq.run("cancel", str(job_id))
        out, err = follower.communicate(timeout=15)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert out == ""
    assert follower.returncode != 0 and err.count("\n") == 1 and "cancelled" in err, err


def test_command_that_cannot_start(tq):
    job_id = tq.submit("--gpus", "0", cmd=["no-such-program-here", "arg"])
    job = tq.wait_state(job_id, "failed")
    reason = job["attempts"][0]["end_reason"]
    assert "no-such-program-here" in reason and "No such file" in reason, reason
    assert "no-such-program-here" in tq.run("logs", str(job_id)).stdout
    assert len(job["attempts"]) == 1


def test_cwd_removed_before_the_job_starts(make_trainq):
    tq = make_trainq([gpu(0, others="80GiB")])
    cwd = tq.path("gone")
    os.makedirs(cwd)
    job_id = tq.submit("--mem", "1GiB", "--cwd", cwd, cmd=["pwd"])
    os.rmdir(cwd)
    tq.set_gpus([gpu(0)])
    job = tq.wait_state(job_id, "failed")
    assert cwd in job["attempts"][0]["end_reason"], job["attempts"][0]


def test_job_killed_by_a_signal(tq):
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", "kill -9 $$"])
    job = tq.wait_state(job_id, "failed")
    attempt = job["attempts"][0]
    assert attempt["signal"] == 9 and attempt["exit_code"] is None, attempt
    assert "SIGKILL" in attempt["end_reason"] and not attempt["oom"]


def test_job_runs_in_its_cwd(tq):
    sub = tq.path("sub dir")
    os.makedirs(sub)
    r = tq.run("submit", "--gpus", "0", "--", "pwd", cwd=sub)
    job_id = int(r.stdout)
    tq.wait_state(job_id, "succeeded")
    assert tq.run("logs", str(job_id)).stdout == sub + "\n"
    other = tq.submit("--gpus", "0", "--cwd", "sub dir", cmd=["pwd"])
    tq.wait_state(other, "succeeded")
    assert tq.run("logs", str(other)).stdout == sub + "\n"
