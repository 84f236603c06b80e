"""The traps a new user fell into in their first hour (README, "First steps"): a mistyped command, a
daemon that cannot start, a script given to --from, a memory size without a unit, a client
and daemon of different versions. Each answer is one line that says what to do."""
import json
import subprocess
import time

from conftest import check_no_sanitizer_report, gpu, trainq_binary, wait_for
from fake_daemon import FakeDaemon


def test_a_mistyped_command_names_the_one_meant(tq):
    for args, said in [
        (["submt", "--", "true"], "unknown command 'submt'; did you mean 'submit'?"),
        (["cancle", "3"], "unknown command 'cancle'; did you mean 'cancel'?"),
        (["config", "sett", "x", "y"], "unknown command 'config sett'; did you mean 'config set'?"),
        (["daemon", "statsu"], "unknown command 'daemon statsu'; did you mean 'daemon status'?"),
        (["frobnicate"], "unknown command 'frobnicate'; the commands are: submit, run, wait"),
        ([], "give a command: submit, run, wait"),
        (["token"], "give a command after 'token': create, ls, revoke"),
    ]:
        r = tq.run(*args, check=False)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("trainq: " + said), (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    # Nothing was started for a command that does not exist.
    assert tq.daemon_pid() is None
    # An unknown option still gets the parser's own words.
    r = tq.run("ls", "--bogus", check=False)
    assert r.returncode == 2 and "--bogus" in r.stderr


def test_versions_of_client_and_daemon(tq):
    version = tq.run("--version").stdout.strip()
    assert version.startswith("trainq ") and len(version.split()) == 2
    tq.start_daemon()
    status = tq.run("daemon", "status")
    assert f"(version {version.split()[1]})" in status.stdout
    assert "warning" not in status.stderr
    assert json.loads(tq.run("daemon", "status", "--json").stdout)["version"] == version.split()[1]


def test_a_daemon_of_another_version_is_named_with_a_warning(tq):
    status = {"pid": 4242, "state_dir": tq.state_dir, "node": "n", "probe": "no GPUs",
              "running_attempts": 0, "version": "0.0.1"}
    with FakeDaemon(tq.socket_path, {("GET", "/v1/status"): (200, status)}):
        r = tq.run("daemon", "status")
    assert "(version 0.0.1)" in r.stdout
    assert "warning: this client is" in r.stderr and "the daemon is 0.0.1" in r.stderr
    assert "restart the daemon" in r.stderr


def test_a_daemon_that_cannot_start_says_why_at_once(tq):
    with open(tq.gpu_file, "w") as f:
        json.dump({"gpus": [{"uuid": 3}]}, f)
    started = time.monotonic()
    r = tq.run("ls", check=False)
    took = time.monotonic() - started
    assert r.returncode != 0
    assert r.stderr.startswith("trainq: the trainq daemon exited as it started: simulated GPU "
                               f"file {tq.gpu_file}: gpus[0].uuid: must be a non-empty string"), \
        r.stderr
    assert "daemon.log" in r.stderr
    # Not the 20 s start timeout: the client saw the daemon go.
    assert took < 15, took


def test_from_refuses_a_script_and_points_to_the_right_command(tq):
    script = tq.path("train.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\npython train.py --lr 1e-3\npython eval.py\n")
    r = tq.run("submit", "--from", script, check=False)
    assert r.returncode == 2
    assert f"--from: {script} is a script (it starts with #!)" in r.stderr
    assert f"trainq submit [options] -- {script}" in r.stderr
    slurm = tq.path("job.txt")
    with open(slurm, "w") as f:
        f.write("python train.py\n#SBATCH --gres=gpu:1\n")
    r = tq.run("submit", "--from", slurm, check=False)
    assert r.returncode == 2
    assert f"{slurm} line 2 is an #SBATCH line" in r.stderr
    assert f"trainq sbatch {slurm}" in r.stderr
    assert tq.ls("--all") == []


def test_from_names_the_line_reads_standard_input_and_numbers_names(tq):
    jobs = tq.path("jobs.txt")
    with open(jobs, "w") as f:
        f.write("# a sweep by hand\necho one\n\n{\"command\": [\"echo\"], \"mem\": \"lots\"}\n")
    r = tq.run("submit", "--from", jobs, check=False)
    assert r.returncode == 2
    assert r.stderr.startswith(f"trainq: --from {jobs} line 4: --mem: 'lots' is not a size"), \
        r.stderr
    assert tq.ls("--all") == []  # nothing half-done
    r = subprocess.run([trainq_binary(), "submit", "--gpus", "0", "--name", "exp", "--from", "-"],
                       input='echo a\necho b\n{"command": ["true"], "name": "own"}\n',
                       env=tq.env, cwd=tq.work, capture_output=True, text=True, timeout=60)
    check_no_sanitizer_report(r.stderr, "submit --from -")
    assert r.returncode == 0, r.stderr
    ids = [int(x) for x in r.stdout.split()]
    names = {j["id"]: j["name"] for j in tq.ls("--all")}
    assert [names[i] for i in ids] == ["exp-1", "exp-2", "own"]


def test_a_memory_size_without_a_unit_is_mib_and_says_so(tq):
    r = tq.run("submit", "--gpus", "1", "--mem", "20", "--", "true")
    assert ("warning: --mem 20 is 20 MiB (a number without a unit is MiB, as in Slurm); for GiB "
            "write --mem 20GiB") in r.stderr
    r = tq.run("submit", "--gpus", "1", "--mem", "0", "--", "true", check=False)
    assert r.returncode == 2 and "warning" not in r.stderr  # refused: one line, no warning
    r = tq.run("submit", "--gpus", "1", "--mem", "2048", "--", "true")
    assert "warning" not in r.stderr
    r = tq.run("submit", "--gpus", "1", "--mem", "20GiB", "--", "true")
    assert "warning" not in r.stderr


def gpu_of(tq, job_id):
    job = tq.wait_state(job_id, "running")
    return job["attempts"][-1]["gpu_indices"]


def test_shares_spread_over_unused_gpus_by_default_and_pack_when_set(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)])
    go = tq.path("go")
    a = tq.submit("--mem", "20GiB", cmd=tq.fake_job("--wait-file", go))
    b = tq.submit("--mem", "20GiB", cmd=tq.fake_job("--wait-file", go))
    assert sorted(gpu_of(tq, a) + gpu_of(tq, b)) == [0, 1], "spread: each on a GPU of its own"
    assert tq.run("config", "get", "placement").stdout.strip() == "spread"
    tq.run("cancel", str(a), str(b))
    tq.run("config", "set", "placement", "pack")
    c = tq.submit("--mem", "20GiB", cmd=tq.fake_job("--wait-file", go))
    d = tq.submit("--mem", "20GiB", cmd=tq.fake_job("--wait-file", go))
    assert gpu_of(tq, c) == gpu_of(tq, d), "pack: the second share joins the first"
    # With one GPU left whole, a job that needs a whole GPU starts at once.
    e = tq.submit("--gpus", "1", cmd=tq.fake_job("--wait-file", go))
    assert gpu_of(tq, e) != gpu_of(tq, c)
    r = tq.run("config", "set", "placement", "tight", check=False)
    assert r.returncode == 2 and "'tight' is not a placement; use \"spread\" or \"pack\"" in r.stderr
    open(go, "w").close()


def test_gpu_jobs_hold_no_cpu_slot_and_cpu_slots_change_at_run_time(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)], cpu_slots=1)
    go = tq.path("go")
    gpu_jobs = [tq.submit("--gpus", "1", "--mem", "10GiB", cmd=tq.fake_job("--wait-file", go))
                for _ in range(2)]
    for job_id in gpu_jobs:
        tq.wait_state(job_id, "running")  # a one-slot machine still runs both GPUs
    assert "no CPU slot" in tq.run("show", str(gpu_jobs[0])).stdout
    cpu_a = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    cpu_b = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    tq.wait_state(cpu_a, "running")
    reason = wait_for(lambda: tq.show(cpu_b)["reason"], what="a reason")
    assert reason == ("needs 1 CPU slot; 0 of 1 free "
                      "(raise cpu_slots: trainq config set cpu-slots N)"), reason
    tq.run("config", "set", "cpu-slots", "2")
    tq.wait_state(cpu_b, "running")
    assert tq.gpus()["cpu_slots"] == 2
    # A GPU job that asks for slots holds them.
    held = tq.submit("--gpus", "1", "--mem", "1GiB", "--cpus", "1", cmd=["true"])
    assert "needs 1 CPU slot" in wait_for(lambda: tq.show(held)["reason"], what="a reason")
    open(go, "w").close()
    tq.wait_state(held, "succeeded")


def test_an_empty_device_list_is_refused_not_read_as_every_gpu(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)])
    tq.run("config", "set", "devices", "1")
    r = tq.run("config", "set", "devices", "", check=False)
    assert r.returncode == 2
    assert "the GPU list is empty; name GPU indices like 0,1,3, or all" in r.stderr, r.stderr
    assert tq.run("config", "get", "devices").stdout.strip() == "1", "unchanged"
