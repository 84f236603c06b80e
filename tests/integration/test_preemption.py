"""Warned stops and requeues (docs/scheduling.md, "Preemption and requeue"): real PyTorch
training loops that save on their warning and resume under the same id, Slurm scripts whose
trap runs `scontrol requeue`, and the signals and ends that say what happened."""
import json
import os
import sys

from conftest import gpu, trainq_binary, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "resumable_train.py"))


def progress(tq):
    path = tq.path("progress.jsonl")
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path).read().splitlines()]


def log_text(tq, job_id):
    return tq.run("logs", str(job_id)).stdout


def wait_until_training(tq, job_id):
    """Until the running attempt's log says its loop started (PyTorch takes seconds to load)."""
    def reached():
        path = tq.show(job_id)["attempts"][-1]["log_path"]
        return os.path.exists(path) and "starting at step" in open(path).read()
    wait_for(reached, timeout=60, what=f"job {job_id} to start training")


def resumable(tq, *opts, on, steps=40):
    # The job runs `trainq requeue`, as a user's would find it on their PATH.
    tq.env["PATH"] = os.path.dirname(trainq_binary()) + ":" + tq.env["PATH"]
    return tq.submit("--gpus", "0", *opts, cmd=[sys.executable, TRAIN, "--steps", str(steps),
                                                "--step-time", "0.1", "--on", on])


def check_resumed(tq, job_id, steps, attempts=2):
    """The attempts' steps join up to `steps` exactly: each resumed where the last saved."""
    job = tq.wait_state(job_id, ("succeeded", "failed", "cancelled"), timeout=120)
    assert job["state"] == "succeeded", (job["reason"], job["attempts"], log_text(tq, job_id))
    assert len(job["attempts"]) == attempts, job["attempts"]
    runs = progress(tq)
    assert [r["attempt"] for r in runs] == [str(n) for n in range(1, attempts + 1)], runs
    assert [r["restarts"] for r in runs] == [str(n) for n in range(attempts)], runs
    assert runs[0]["first"] == 0 and 0 < runs[0]["last"] < steps, runs
    for before, after in zip(runs, runs[1:]):
        assert after["first"] == before["last"], runs  # no step lost, none run twice
    assert runs[-1]["last"] == steps and runs[-1]["ended"] == "finished", runs
    return job


# PyTorch Lightning's way: SIGUSR1 (here sent by `trainq cancel --signal`, scancel's), a
# checkpoint, `trainq requeue` from inside; the next attempt resumes, and the log goes on.
def test_a_job_that_saves_on_sigusr1_and_requeues_itself_resumes_under_its_id(tq):
    job_id = resumable(tq, "--checkpoint", "ckpt/*.pt", on="usr1")
    wait_until_training(tq, job_id)
    wait_for(lambda: tq.show(job_id)["state"] == "running", what="running")
    signalled = tq.run("cancel", "--signal", "USR1", str(job_id))
    assert f"job {job_id}: sent SIGUSR1 to its processes" in signalled.stdout
    job = check_resumed(tq, job_id, 40)
    first = job["attempts"][0]
    assert first["state"] == "cancelled" and first["end_reason"] == "requeued by itself", first
    log = log_text(tq, job_id)
    assert "attempt 1 (restart count 0): starting at step 0" in log, log
    assert f"saved a checkpoint at step {progress(tq)[0]['last']}" in log
    assert "trainq: attempt 1 ended: requeued by itself; attempt 2 follows" in log
    assert f"attempt 2 (restart count 1): starting at step {progress(tq)[0]['last']}" in log
    assert "finished at step 40" in log
    assert log.index("starting at step 0") < log.index("attempt 2 (restart count 1)")


# Hugging Face Trainer's way: SIGTERM saves and exits; a requeue from outside (the job's
# owner) stops it with SIGTERM at once, and it is queued again whatever its exit code.
def test_a_job_that_saves_on_sigterm_is_requeued_from_outside_and_resumes(make_trainq):
    # It saves at its next step once SIGTERM comes: the grace is an upper bound, long enough
    # for a loaded machine (1s was not, and SIGKILL then left no exit code).
    tq = make_trainq(grace_period="10s")
    job_id = resumable(tq, on="term")
    wait_until_training(tq, job_id)
    out = tq.run("requeue", str(job_id)).stdout
    assert f"job {job_id}: stopping attempt 1" in out and "queued again as attempt 2" in out
    job = check_resumed(tq, job_id, 40)
    assert job["attempts"][0]["end_reason"] == "requeued by root", job["attempts"][0]
    assert job["attempts"][0]["exit_code"] == 0  # it saved and left: still requeued


def test_the_warning_before_the_time_limit_and_whether_a_checkpoint_followed(tq):
    script = "trap 'echo step-7 > ck-7.pt' USR1; while :; do sleep 0.1; done"
    job_id = tq.submit("--gpus", "0", "--time", "3s", "--signal", "USR1@2", "--checkpoint",
                       "ck-*.pt", cmd=["sh", "-c", script])
    job = tq.wait_state(job_id, "failed", timeout=30)
    assert job["reason"] == ("time limit (3s); SIGUSR1 sent 2s before the end; checkpoint "
                             "ck-7.pt written after it"), job["reason"]
    assert job["signal"] == "USR1@2" and job["checkpoint"] == "ck-*.pt"
    assert "--signal USR1@2 --checkpoint ck-*.pt" in tq.run("show", str(job_id)).stdout
    log = open(job["attempts"][0]["log_path"]).read()
    assert "trainq: the time limit (3s) is 2s away; sent SIGUSR1 to the 1 process of the job " \
        "that handles it" in log, log
    # Nothing handles SIGUSR1: nothing is killed by it, and the end says no checkpoint came.
    job_id = tq.submit("--gpus", "0", "--time", "2s", "--signal", "USR1@1", "--checkpoint",
                       "none-*.pt", cmd=["sleep", "30"])
    job = tq.wait_state(job_id, "failed", timeout=30)
    assert job["attempts"][0]["signal"] == 15, job  # the time limit's SIGTERM, not SIGUSR1
    assert "no file matching --checkpoint none-*.pt was written after it" in job["reason"]


SBATCH_REQUEUE = """#!/bin/bash
#SBATCH --signal=B:USR1@3
#SBATCH --requeue
#SBATCH --time=0:06
#SBATCH -J lightning
echo "attempt with SLURM_RESTART_COUNT=$SLURM_RESTART_COUNT"
if [ "$SLURM_RESTART_COUNT" -ge 1 ]; then echo resumed; exit 0; fi
trap 'echo saving; echo saved > ckpt.txt; scontrol requeue $SLURM_JOB_ID' USR1
sleep 100 & wait
"""


def test_an_sbatch_script_whose_trap_runs_scontrol_requeue_runs_again_and_succeeds(tq):
    with open(tq.path("requeue.sbatch"), "w") as f:
        f.write(SBATCH_REQUEUE)
    job_id = int(tq.run("sbatch", "--parsable", "requeue.sbatch").stdout)
    job = tq.wait_state(job_id, ("succeeded", "failed", "cancelled"), timeout=60)
    assert job["state"] == "succeeded", (job["reason"], job["attempts"], log_text(tq, job_id))
    assert job["signal"] == "B:USR1@3" and job["requeue"] is True
    assert [a["state"] for a in job["attempts"]] == ["cancelled", "succeeded"], job["attempts"]
    assert job["attempts"][0]["end_reason"].startswith("requeued by itself; SIGUSR1 sent "), \
        job["attempts"][0]
    # The output file goes on across attempts, as Slurm appends to a requeued job's.
    out = open(tq.path(f"slurm-{job_id}.out")).read()
    assert out.startswith("attempt with SLURM_RESTART_COUNT=0\nsaving\n"), out
    assert out.endswith("attempt with SLURM_RESTART_COUNT=1\nresumed\n"), out
    assert open(tq.path("ckpt.txt")).read() == "saved\n"


def test_signals_and_requeues_that_cannot_be_are_refused_saying_why(tq):
    for opts, words in [(["--signal", "KILL"], "--signal"), (["--signal", "USR1@1m"], "--signal"),
                        (["--checkpoint", "../x/*.pt"], "--checkpoint")]:
        p = tq.run("submit", *opts, "--", "true", check=False)
        assert p.returncode == 2, (opts, p)
        assert words in p.stderr and "expected" in p.stderr, p.stderr
    assert tq.ls("--all") == []  # nothing stored
    job_id = tq.submit("--gpus", "0", cmd=["sleep", "30"])
    p = tq.run("cancel", "--signal", "USR9", str(job_id), check=False)
    assert p.returncode == 2 and "--signal: 'USR9' is not a signal" in p.stderr, p.stderr
    tq.run("cancel", str(job_id))
    tq.wait_state(job_id, "cancelled")
    p = tq.run("requeue", str(job_id), check=False)
    assert p.returncode != 0 and f"trainq retry {job_id} queues it again" in p.stderr, p.stderr
    env = dict(tq.env)
    env.pop("TRAINQ_JOB_ID", None)
    p = tq.run("requeue", check=False, env=env)
    assert p.returncode == 2 and "give the job ids" in p.stderr, p.stderr


# --- preemption by a waiting job of higher priority ---

def preemptible_trainer(tq, *opts, on, signal, steps=60):
    tq.env["PATH"] = os.path.dirname(trainq_binary()) + ":" + tq.env["PATH"]
    return tq.submit("--gpus", "1", "--preemptible", "--requeue", "--signal", signal,
                     "--checkpoint", "ckpt/*.pt", *opts,
                     cmd=[sys.executable, TRAIN, "--steps", str(steps), "--step-time", "0.1",
                          "--on", on])


def preempt_and_resume(tq, on, signal):
    job_id = preemptible_trainer(tq, on=on, signal=signal)
    wait_until_training(tq, job_id)
    urgent = tq.submit("--gpus", "1", "--priority", "100", cmd=["sh", "-c", "sleep 1"])
    # Until the preempted job stops, the urgent one says what it waits for.
    seen = []
    wait_for(lambda: seen.append(tq.show(urgent)) or seen[-1]["state"] != "queued", timeout=60,
             what="the urgent job to start")
    assert any(s["reason"].startswith(f"will preempt job {job_id} (") for s in seen) or \
        seen[0]["state"] != "queued", [s["reason"] for s in seen]
    tq.wait_state(urgent, "succeeded", timeout=60)
    job = check_resumed(tq, job_id, 60)
    first = job["attempts"][0]
    assert first["end_reason"].startswith(f"preempted by job {urgent} (priority 100); "
                                          f"{'SIGUSR1' if on == 'usr1' else 'SIGTERM'} sent "), first
    assert first["end_reason"].endswith("checkpoint ckpt/last.pt written after it"), first
    # The urgent job ran on the GPU the preempted one had.
    ran = tq.show(urgent)["attempts"][0]
    assert ran["gpu_indices"] == first["gpu_indices"]
    assert ran["started_at"] >= first["ended_at"]
    return job


def test_a_lightning_style_job_is_preempted_saves_requeues_and_resumes(make_trainq):
    tq = make_trainq(gpus=[gpu(0)], min_runtime="1s")
    job = preempt_and_resume(tq, "usr1", "USR1@20")
    log = log_text(tq, job["id"])
    assert "trainq: preempted by job" in log and "stopping in 20s; sent SIGUSR1 to the 1 " \
        "process of the job that handles it" in log, log
    assert "asking to be requeued: trainq requeue" in log


def test_a_hugging_face_style_job_saves_on_sigterm_when_preempted_and_resumes(make_trainq):
    tq = make_trainq(gpus=[gpu(0)], min_runtime="1s")
    preempt_and_resume(tq, "term", "TERM@20")


def test_a_gang_preempts_preemptible_jobs_on_both_nodes(make_cluster):
    cluster = make_cluster(2, min_runtime="1s")
    a = cluster.node("node0")
    script = "trap 'echo saving > saved-$TRAINQ_JOB_ID; exit 0' USR1; while :; do sleep 0.1; done"
    victims = [a.submit("--gpus", "1", "--preemptible", "--requeue", "--signal", "USR1@5",
                        "--checkpoint", "saved-*", cmd=["sh", "-c", script]) for _ in range(2)]
    for v in victims:
        a.wait_state(v, "running", timeout=30)
    assert {cluster.node_of(a.show(v)) for v in victims} == {"node0", "node1"}
    gang = a.submit("--nodes", "2", "--gpus", "1", "--priority", "100", cmd=["sleep", "1"])
    job = a.wait_state(gang, "succeeded", timeout=60)
    assert {p["node"] for p in job["attempts"][0]["parts"]} == {"node0", "node1"}
    for v in victims:
        first = a.show(v)["attempts"][0]
        assert first["end_reason"].startswith(f"preempted by job {gang} (priority 100); SIGUSR1"), \
            (first, cluster.logs())
        assert f"checkpoint saved-{v} written after it" in first["end_reason"], first
        assert a.show(v)["state"] in ("queued", "starting", "running"), a.show(v)
    # Back on their GPUs once the gang is done.
    for v in victims:
        a.wait_state(v, "running", timeout=60)
        a.run("cancel", str(v))
