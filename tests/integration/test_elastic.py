"""Elastic jobs as docs/workflow.md shows them ("Elastic jobs"): a real torchrun job of
examples/elastic_train.py (gloo, Debian's torch) submitted with --gpus 1:2 runs on both GPUs,
shrinks to one for a job that arrives, grows back when that job ended, and its steps join up
across the three attempts with the same global batch at each size. On the documented
cluster, a resize the leader decides reaches the node that runs the job. The CLI's range and its
refusals."""
import json
import os
import shutil

from conftest import gpu, wait_for
from doc_cluster import doc_cluster  # noqa: F401 (the fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "elastic_train.py"))


def docs_command():
    """The command of docs/workflow.md's elastic example, as words after `--`."""
    text = open(os.path.join(HERE, "..", "..", "docs", "workflow.md")).read()
    section = text[text.index("## Elastic jobs"):]
    start = section.index("```sh\n") + 6
    line = section[start:section.index("\n```", start)]
    assert line.startswith("trainq submit --gpus 1:4 -- torchrun "), line
    return line.split(" -- ", 1)[1].split()


def progress(tq):
    path = tq.path("progress.jsonl")
    return [json.loads(line) for line in open(path).read().splitlines()] if os.path.exists(
        path) else []


def test_an_elastic_torchrun_job_shrinks_for_another_and_grows_back(make_trainq):
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun is missing: scripts/deps.sh test installs python3-torch"
    tq = make_trainq(gpus=[gpu(0), gpu(1)], min_runtime="4s")
    words = docs_command()
    assert words[:3] == ["torchrun", "examples/elastic_train.py", "--steps"], words
    # The docs' command with the --redirects/--tee workaround for Debian's torch 1.13 on
    # Python 3.11 (see test_cluster.py), the example's path from here and a shorter run.
    cmd = [torchrun, "--redirects", "9:1", "--tee", "9:1", TRAIN, "--steps", "150",
           "--step-time", "0.1"]
    job_id = tq.submit("--gpus", "1:2", cmd=cmd)
    show = tq.run("show", str(job_id)).stdout
    assert "asks:        1:2xwhole" in show, show

    def attempt_training(n):
        def reached():
            job = tq.show(job_id)
            if len(job["attempts"]) < n or job["attempts"][n - 1]["state"] != "running":
                return None
            path = job["attempts"][n - 1]["log_path"]
            return os.path.exists(path) and "processes, accumulation" in open(path).read()
        try:
            wait_for(reached, timeout=90, what=f"attempt {n} of job {job_id} to train")
        except AssertionError as e:
            job = tq.show(job_id)
            raise AssertionError(f"{e}\nreason: {job['reason']}\nattempts: "
                                 f"{[(a['n'], a['state'], a['end_reason']) for a in job['attempts']]}"
                                 f"\nlog:\n{tq.run('logs', str(job_id)).stdout[-3000:]}"
                                 f"\ndaemon log:\n{tq.daemon_log()[-4000:]}") from None

    attempt_training(1)
    assert tq.show(job_id)["attempts"][0]["gpu_indices"] == [0, 1]
    # Another job wants a GPU: past min_runtime (4s), the elastic job gives one up. The other
    # job runs until the test has seen the elastic job train on one GPU.
    go = tq.path("go")
    other = tq.submit("--gpus", "1", cmd=["sh", "-c", f"until [ -e {go} ]; do sleep 0.1; done"])
    attempt_training(2)
    job = tq.show(job_id)
    assert job["attempts"][0]["end_reason"].startswith(
        f"resized: shrinks from 2 to 1 GPU for job {other}"), job["attempts"][0]
    assert job["attempts"][1]["gpu_indices"] == [0]
    open(go, "w").close()
    tq.wait_state(other, "succeeded", timeout=60)
    # The other job ended: the idle GPU goes back to the elastic job.
    attempt_training(3)
    job = tq.wait_state(job_id, ("succeeded", "failed", "cancelled"), timeout=120)
    logs = tq.run("logs", str(job_id)).stdout
    assert job["state"] == "succeeded", (job["reason"], logs)
    # The log goes on across the resizes, as across a requeue: every size's lines are in it.
    assert logs.count("processes, accumulation") == 3, logs
    # explain lists the resizes.
    explained = tq.run("explain", str(job_id)).stdout
    assert f"attempt 1, " in explained and f"shrinks from 2 to 1 GPU for job {other}" in explained
    assert "grows from 1 to 2 GPUs (GPU 1 idle)" in explained, explained
    assert [a["gpu_indices"] for a in job["attempts"]] == [[0, 1], [0], [0, 1]]
    assert job["attempts"][1]["end_reason"].startswith(
        "resized: grows from 1 to 2 GPUs (GPU 1 idle)"), job["attempts"][1]
    runs = progress(tq)
    assert [(r["world"], r["accumulation"], r["restarts"]) for r in runs] == [
        (2, 2, "0"), (1, 4, "1"), (2, 2, "2")], runs
    assert runs[0]["first"] == 0 and runs[-1]["last"] == 150, runs
    for before, after in zip(runs, runs[1:]):
        assert after["first"] == before["last"] and before["ended"] == "stopped", runs


def test_the_range_is_shown_and_bad_ranges_exit_2_naming_gpus(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)])
    for bad, says in [("2:1", "2:1 is not an elastic range"),
                      ("1:x", "'1:x' is not valid; expected a count"),
                      ("1:8", "use at most 1:2"),
                      (":2", "expected a count")]:
        out = tq.run("submit", "--gpus", bad, "--", "true", check=False)
        assert out.returncode == 2, (bad, out.stdout, out.stderr)
        assert "--gpus" in out.stderr and says in out.stderr, (bad, out.stderr)
    assert tq.ls() == []
    job_id = tq.submit("--gpus", "1:2", "--mem", "10GiB", cmd=["sleep", "30"])
    job = tq.show(job_id)
    assert (job["gpus"], job["max_gpus"]) == (1, 2)
    assert "1:2x10.0 GiB" in tq.run("show", str(job_id)).stdout
    tq.run("cancel", str(job_id))


def test_on_the_documented_cluster_a_job_on_another_node_shrinks(doc_cluster):
    """The cluster as docs/cluster.md sets it up (shared TLS nodes, the cluster key, the docs'
    ACL), as the ordinary user ada on gpu1: her elastic job runs on gpu2, and the leader's
    resize reaches it through the store's stop request."""
    c = doc_cluster(config={"min_runtime": "2s"})
    for node in c.nodes.values():
        with open(node.gpu_file, "w") as f:
            json.dump({"gpus": [gpu(0), gpu(1)], "usage_dir": node.usage_dir}, f)
    c.start()
    gpu1 = c.nodes["gpu1"]
    job_id = gpu1.submit_as("ada", "--gpus", "1:2", "--node", "gpu2", cmd=["sleep", "600"])

    def running(n):
        def reached():
            j = gpu1.show(job_id)
            return j if len(j["attempts"]) == n and j["state"] == "running" else None
        return wait_for(reached, timeout=60, what=f"attempt {n} of job {job_id} to run")

    job = running(1)
    assert job["attempts"][0]["node"] == "gpu2" and job["attempts"][0]["gpu_indices"] == [0, 1]
    other = gpu1.submit_as("ada", "--gpus", "1", "--node", "gpu2", cmd=["sleep", "600"])
    job = running(2)
    assert job["attempts"][0]["end_reason"].startswith(
        f"resized: shrinks from 2 to 1 GPU for job {other}"), (job["attempts"][0], c.logs())
    assert job["attempts"][1]["node"] == "gpu2" and job["attempts"][1]["gpu_indices"] == [0]
    wait_for(lambda: gpu1.show(other)["state"] == "running", timeout=30, what="the other job")
    assert gpu1.show(other)["attempts"][0]["gpu_indices"] == [1]
    gpu1.trainq_as("ada", "cancel", str(job_id), str(other), check=0)


def test_an_elastic_gang_grows_by_a_node_that_joins_its_torchrun_rendezvous(doc_cluster):
    """The issue's two-node test on the documented cluster (shared TLS nodes, the cluster key,
    the docs' ACL), as the ordinary user ada: a `--nodes 1:2` torchrun job (gloo, Debian's
    torch) of examples/elastic_train.py starts on the one node that is free, and when the other
    frees up the leader adds a part there that joins the running rendezvous: torchrun restarts
    the workers at world size 2, the steps go on from the checkpoint, and it is still attempt 1.
    A job that needs the second node then has the gang shrink (a restart on the first node,
    attempt 2), and once that job ended the gang grows again within attempt 2."""
    import subprocess
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun is missing: scripts/deps.sh test installs python3-torch"
    c = doc_cluster(config={"min_runtime": "2s"})
    for node in c.nodes.values():
        with open(node.gpu_file, "w") as f:
            json.dump({"gpus": [gpu(0)], "usage_dir": node.usage_dir}, f)
    c.start()
    gpu1 = c.nodes["gpu1"]
    ada = gpu1.people["ada"]
    work = os.path.join(gpu1.work, "elastic")  # where both nodes' parts run and checkpoint
    os.mkdir(work)
    subprocess.run(["chown", f"{ada.pw_uid}:{ada.pw_gid}", work], check=True)
    # gpu2 is busy at first: the gang starts on gpu1 alone.
    go = os.path.join(work, "go")
    busy = gpu1.submit_as("ada", "--gpus", "1", "--node", "gpu2", "--cwd", work,
                          cmd=["sh", "-c", f"until [ -e {go} ]; do sleep 0.1; done"])
    wait_for(lambda: gpu1.show(busy)["state"] == "running", timeout=30, what="gpu2 to be busy")
    steps = 900
    cmd = [torchrun, "--redirects", "9:1", "--tee", "9:1", TRAIN, "--steps", str(steps),
           "--step-time", "0.1"]
    job_id = gpu1.submit_as("ada", "--nodes", "1:2", "--gpus", "1", "--cwd", work, cmd=cmd)
    shown = gpu1.trainq_as("ada", "show", str(job_id), check=0).stdout
    assert "1 to 2 nodes (elastic)" in shown, shown

    def logs(attempt=None):
        more = ("--attempt", str(attempt)) if attempt else ()
        return gpu1.trainq_as("ada", "logs", str(job_id), *more, check=None).stdout

    def training(world, attempt):
        try:
            wait_for(lambda: f"{world} processes, accumulation" in logs(attempt), timeout=120,
                     what=f"attempt {attempt} of job {job_id} to train on {world} processes")
        except AssertionError as e:
            raise AssertionError(f"{e}\njob: {gpu1.show(job_id)}\nlogs:\n{logs()[-3000:]}\n"
                                 f"{c.logs()}") from None

    def nodes_of(attempt):
        return [p["node"] for p in gpu1.show(job_id)["attempts"][attempt - 1]["parts"]]

    training(1, 1)
    assert nodes_of(1) == ["gpu1"]
    # gpu2 frees up: past min_runtime (2s) the leader adds a part there, torchrun's agents
    # meet it in a new rendezvous round and restart their workers on 2 processes.
    open(go, "w").close()
    training(2, 1)
    assert nodes_of(1) == ["gpu1", "gpu2"]
    # A job that needs gpu2: the gang gives it up, restarting on gpu1 (attempt 2).
    go2 = os.path.join(work, "go2")
    other = gpu1.submit_as("ada", "--gpus", "1", "--node", "gpu2", "--cwd", work,
                           cmd=["sh", "-c", f"until [ -e {go2} ]; do sleep 0.1; done"])
    training(1, 2)
    job = gpu1.show(job_id)
    assert job["attempts"][0]["end_reason"].startswith(
        f"resized: shrinks from 2 to 1 node for job {other} (it gives up gpu2)"), job["attempts"]
    assert nodes_of(2) == ["gpu1"]
    wait_for(lambda: gpu1.show(other)["state"] == "running", timeout=30, what="the other job")
    # It ends: the gang grows again, within attempt 2.
    open(go2, "w").close()
    training(2, 2)
    job = wait_for(lambda: (lambda j: j if j["state"] in ("succeeded", "failed") else None)(
        gpu1.show(job_id)), timeout=240, what=f"job {job_id} to end")
    assert job["state"] == "succeeded", (job, logs()[-3000:], c.logs())
    assert len(job["attempts"]) == 2, job["attempts"]
    parts = job["attempts"][1]["parts"]
    assert [p["node"] for p in parts] == ["gpu1", "gpu2"], parts
    assert parts[0]["added_at"] is None and parts[1]["added_at"], parts
    explained = gpu1.trainq_as("ada", "explain", str(job_id), check=0).stdout
    lines = [l.split(": ", 1)[1] for l in explained.splitlines() if l.startswith("  attempt ")]
    assert lines == ["grew by part 1 on gpu2, which joined its rendezvous",
                     f"shrinks from 2 to 1 node for job {other} (it gives up gpu2)",
                     "grew by part 1 on gpu2, which joined its rendezvous"], explained
    runs = [json.loads(line) for line in open(os.path.join(work, "progress.jsonl"))]
    assert [(r["world"], r["accumulation"], r["restarts"]) for r in runs] == [
        (1, 4, "0"), (2, 2, "0"), (1, 4, "1"), (2, 2, "1")], runs
    assert runs[0]["first"] == 0 and runs[-1]["last"] == steps, runs
    for before, after in zip(runs, runs[1:]):
        assert after["first"] == before["last"] and before["ended"] == "stopped", runs


def test_a_gang_range_is_shown_and_bad_ranges_exit_2_naming_nodes(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    for bad, says in [("2:1", "2:1 is not an elastic range"),
                      ("1:x", "'1:x' is not valid; expected a node count"),
                      ("1:2", "this is one machine")]:
        out = tq.run("submit", "--nodes", bad, "--gpus", "1", "--", "true", check=False)
        assert out.returncode == 2, (bad, out.stdout, out.stderr)
        assert "--nodes" in out.stderr and says in out.stderr, (bad, out.stderr)
    out = tq.run("submit", "--nodes", "1:2", "--gpus", "1:2", "--", "true", check=False)
    assert out.returncode == 2 and "not both" in out.stderr, out.stderr
    assert tq.ls() == []
