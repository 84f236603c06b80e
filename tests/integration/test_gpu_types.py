"""GPU types and node features as a user types them (docs/scheduling.md, "GPU types and node
features"): `--gpu-type` and `--constraint` on submit, sweeps, update and sbatch's
`--gres=gpu:TYPE:N` and `-C`, on one machine and on a two-node cluster."""
import json

from conftest import gpu, wait_for

A100 = "NVIDIA A100-SXM4-80GB"
T4 = "Tesla T4"


def mixed_gpus():
    return [gpu(0, name=A100), gpu(1, name=A100), gpu(2, total="16GiB", name=T4),
            gpu(3, total="16GiB", name=T4)]


def gpus_of(t, job_id):
    return t.show(job_id)["attempts"][-1]["gpu_indices"]


def test_gpu_type_chooses_gpus_and_the_reason_counts_them(make_trainq):
    t = make_trainq(gpus=mixed_gpus(), node_features=["ib", "nvlink"])
    t.start_daemon()
    first = t.submit("--gpu-type", "a100", cmd=["sleep", "300"])
    second = t.submit("--gpu-type", "A100", "-C", "ib&nvlink", cmd=["sleep", "300"])
    for job in (first, second):
        t.wait_state(job, "running", timeout=30)
    assert sorted(gpus_of(t, first) + gpus_of(t, second)) == [0, 1]
    # Two T4s are free, but this job asks for an A100: it waits, and says why in numbers.
    third = t.submit("--gpu-type", "a100", cmd=["true"])
    want = f"A100s: 2, all taken by jobs {first} and {second}"
    wait_for(lambda: want in t.show(third)["reason"], timeout=20,
             what=f"the reason to say {want!r}")
    shown = t.run("show", str(third)).stdout
    assert "gpu type" in shown and "a100" in shown, shown
    # update moves it to the T4s, where it starts at once.
    t.run("update", str(third), "--gpu-type", "t4")
    t.wait_state(third, "succeeded", timeout=30)
    assert gpus_of(t, third)[0] in (2, 3)
    # A sweep takes the same options for every job it makes.
    out = json.loads(t.run("submit", "--gpu-type", "t4", "--sweep", "x=1,2", "--json",
                           "--", "echo", "{x}").stdout)
    for job in out["ids"]:
        t.wait_state(job, "succeeded", timeout=30)
        assert gpus_of(t, job)[0] in (2, 3)
    for job in (first, second):
        t.run("cancel", str(job))


def test_what_no_gpu_or_node_has_is_refused_at_submit(tq):
    tq.start_daemon()
    cases = [
        (["--gpu-type", "h100"], "--gpu-type: no GPU is of type h100"),
        (["--gpu-type", "a100", "--gpus", "2"], "--gpus: asks for 2 A100s on one node"),
        (["-C", "ib"], "--constraint: no node has ib"),
        (["-C", "ib&a|b"], "mixes & and |"),
        (["--gpu-type", "a/b"], "gpu_type: 'a/b' is not a GPU model"),
        (["--gpu-type", "a100", "--gpus", "0"], "--gpu-type: a CPU job (--gpus 0) uses no GPU"),
    ]
    for opts, says in cases:
        p = tq.run("submit", *opts, "--", "true", check=False)
        assert p.returncode == 2 and says in p.stderr, (opts, p.returncode, p.stderr)
    assert tq.ls("-a") == [], "a refused submit stored nothing"


SCRIPT = """#!/bin/bash
#SBATCH --gres=gpu:TYPE:1
#SBATCH -C ib
echo "GPUS=$CUDA_VISIBLE_DEVICES"
"""


def test_sbatch_gres_type_and_constraint_select(make_trainq):
    t = make_trainq(gpus=mixed_gpus(), node_features=["ib"])
    t.start_daemon()
    with open(t.path("t4.sbatch"), "w") as f:
        f.write(SCRIPT.replace("TYPE", "t4"))
    job = int(t.run("sbatch", "--parsable", "t4.sbatch").stdout)
    assert t.wait_state(job, ("succeeded", "failed"), timeout=30)["state"] == "succeeded"
    assert gpus_of(t, job)[0] in (2, 3)
    p = t.run("sbatch", "t4.sbatch", check=False)
    assert "not honoured" not in p.stderr and "GPU type" not in p.stderr, p.stderr
    # What no GPU here is, refused against the line that asked for it.
    with open(t.path("h100.sbatch"), "w") as f:
        f.write(SCRIPT.replace("TYPE", "h100"))
    p = t.run("sbatch", "h100.sbatch", check=False)
    assert p.returncode == 2, p.stderr
    assert "#SBATCH line 2: --gres=gpu:h100:1" in p.stderr and "is of type h100" in p.stderr


def test_constraint_picks_the_node_with_the_feature_in_a_cluster(make_cluster):
    cluster = make_cluster(2, gpus=[gpu(0, name=A100)],
                           node_config={"node1": {"node_features": ["ib"], "gpu_type": "big"}})
    a = cluster.node("node0")
    wait_for(lambda: len(cluster.listing(a)["nodes"]) == 2, timeout=20, what="two nodes")
    listing = {n["name"]: n for n in cluster.listing(a)["nodes"]}
    assert listing["node1"]["features"] == ["ib"] and listing["node0"]["features"] == []
    out = a.run("nodes").stdout
    assert "FEATURES" in out and " ib " in out, out
    jobs = [a.submit("-C", "ib", cmd=["true"]), a.submit("--gpu-type", "big", cmd=["true"])]
    for job in jobs:
        done = a.wait_state(job, ("succeeded", "failed"), timeout=30)
        assert done["state"] == "succeeded", cluster.logs()
        assert cluster.node_of(done) == "node1"
    # A gang needs both nodes; only one has ib: refused, naming how many have it.
    p = a.run("submit", "-N", "2", "-C", "ib", "--", "true", check=False)
    assert p.returncode == 2 and "--nodes: asks for 2 nodes but only 1 has ib" in p.stderr, p.stderr
