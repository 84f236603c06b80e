"""The in-script GPU gate, `with trainq.gpu(...)` (python/trainq/gate.py, docs/python.md),
with Debian's own interpreter against a real daemon with simulated GPUs."""
import os
import subprocess
import textwrap
import time

from conftest import wait_for
from test_python_client import PACKAGE_SOURCE, PRELUDE, PYTHON, run_python


def start_python(tq, script):
    env = dict(tq.env, PYTHONPATH=PACKAGE_SOURCE, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen([PYTHON, "-c", PRELUDE + textwrap.dedent(script)], env=env,
                            cwd=tq.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_the_gate_sets_the_gpus_and_holds_them_until_the_block_ends(make_trainq):
    tq = make_trainq(gpus=[{"uuid": f"GPU-sim-{i}", "name": "Simulated", "memory_total": "80GiB",
                            "memory_used_by_others": 0, "utilization": 0} for i in range(2)])
    go = tq.path("go")
    holder = start_python(tq, f"""
        import time
        with trainq.gpu(mem="60GiB", gpus=2, name="holder") as g:
            print("inside", os.environ["CUDA_VISIBLE_DEVICES"], g.job_id, flush=True)
            while not os.path.exists({go!r}):
                time.sleep(0.05)
        print("left", flush=True)
        time.sleep(0.5)
    """)
    line = holder.stdout.readline().split()
    assert line[0] == "inside" and line[1] == "0,1", line
    job = int(line[2])
    shown = tq.show(job)
    assert shown["state"] == "running" and shown["gate_pid"] == holder.pid
    assert shown["attempts"][0]["pid"] == holder.pid
    # An ordinary job that needs one of the GPUs waits behind the held reservation.
    other = tq.submit("--gpus", "1", "--mem", "30GiB", cmd=["true"])
    time.sleep(1.0)
    assert tq.state(other) == "queued"
    open(go, "w").close()
    assert holder.stdout.readline().strip() == "left"
    assert tq.wait_state(job, "succeeded")["attempts"][0]["exit_code"] == 0
    tq.wait_state(other, "succeeded")
    holder.wait(timeout=30)


def test_a_gate_waits_in_line_like_any_job(tq):
    go = tq.path("go")
    hog = tq.submit("--gpus", "1", cmd=tq.fake_job("--wait-file", go))
    tq.wait_state(hog, "running")
    waiter = start_python(tq, """
        with trainq.gpu(gpus=1) as g:
            print("got", os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    """)
    gate = wait_for(lambda: [j for j in tq.ls() if j["id"] != hog], what="the gate's job")[0]
    assert gate["state"] == "queued"
    time.sleep(0.5)
    assert waiter.poll() is None
    open(go, "w").close()
    out, err = waiter.communicate(timeout=60)
    assert out == "got 0\n", err
    assert "queued" in err  # its place and reason while it waited
    assert tq.wait_state(gate["id"], "succeeded")


def test_a_process_that_dies_inside_the_block_frees_its_gpus(tq):
    p = start_python(tq, """
        with trainq.gpu(gpus=1) as g:
            print(g.job_id, flush=True)
            os.kill(os.getpid(), 9)
    """)
    job = int(p.stdout.readline())
    p.wait(timeout=30)
    ended = tq.wait_state(job, "failed")
    assert f"pid {p.pid}" in ended["reason"] and "without leaving" in ended["reason"]
    assert tq.run("run", "--gpus", "1", "--", "true").returncode == 0  # the GPU is free


def test_out_of_memory_in_the_block_requeues_the_gate(tq):
    result = run_python(tq, """
        tries = []
        while True:
            try:
                with trainq.gpu(gpus=1, retries=1, quiet=True) as g:
                    tries.append(g.attempt)
                    if len(tries) == 1:
                        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
                break
            except trainq.OutOfMemory as e:
                job = e.job_id
        out({"tries": tries, "job": g.job_id, "oom_job": job})
    """)
    assert result["tries"] == [1, 2]
    assert result["job"] == result["oom_job"]
    job = tq.show(result["job"])
    assert job["state"] == "succeeded"
    assert job["attempts"][0]["oom"] is True
    assert "out of memory" in tq.run("logs", str(result["job"]), "--attempt", "1").stdout


def test_a_gate_field_of_another_type_is_refused_naming_it(tq):
    result = run_python(tq, """
        q = trainq.Client()
        out(caught(q._call, "POST", "/v1/jobs", {"command": ["x"], "gate": "yes"}))
    """)
    assert result[0] == "Invalid" and "gate" in result[3]


def test_the_gate_restores_the_environment_it_changed(tq):
    result = run_python(tq, """
        names = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TRAINQ_JOB_ID", "SET_INSIDE")

        def seen():
            return {name: os.environ.get(name) for name in names}

        # One the gate sets had a value, one was empty, one was unset.
        os.environ["CUDA_VISIBLE_DEVICES"] = "7"
        os.environ["CUDA_DEVICE_ORDER"] = ""
        os.environ.pop("TRAINQ_JOB_ID", None)
        os.environ.pop("SET_INSIDE", None)
        before = seen()
        with trainq.gpu(gpus=1, quiet=True) as g:
            inside = seen()
            os.environ["SET_INSIDE"] = "by the block"
        ended, ok_job = seen(), g.job_id
        del os.environ["SET_INSIDE"]
        try:
            with trainq.gpu(gpus=1, quiet=True) as g:
                os.environ["CUDA_VISIBLE_DEVICES"] = "changed by the block"
                raise ValueError("boom")
        except ValueError:
            pass
        raised, failed_job = seen(), g.job_id
        after_oom = None
        while True:
            try:
                with trainq.gpu(gpus=1, retries=1, quiet=True) as g:
                    if after_oom is None:
                        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
                break
            except trainq.OutOfMemory:
                after_oom = seen()
        out({"before": before, "inside": inside, "ended": ended, "raised": raised,
             "after_oom": after_oom, "requeued_ended": seen(),
             "jobs": [ok_job, failed_job, g.job_id]})
    """)
    before = result["before"]
    assert before == {"CUDA_VISIBLE_DEVICES": "7", "CUDA_DEVICE_ORDER": "",
                      "TRAINQ_JOB_ID": None, "SET_INSIDE": None}
    ok_job, failed_job, oom_job = result["jobs"]
    assert result["inside"] == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                "TRAINQ_JOB_ID": str(ok_job), "SET_INSIDE": None}
    # Only what the gate set goes back: a variable the block set itself stays.
    assert result["ended"] == dict(before, SET_INSIDE="by the block")
    assert result["raised"] == before
    assert result["after_oom"] == before
    assert result["requeued_ended"] == before
    assert tq.show(ok_job)["state"] == "succeeded"
    assert tq.show(failed_job)["state"] == "failed"
    assert tq.show(oom_job)["state"] == "succeeded"
