"""Slurm's output contract across a cluster's nodes (docs/workflow.md, "srun and scontrol"):
srun forwards every task's stdout and stderr to its own, whichever node the task runs on, so
a batch script's `-o`/`-e` files hold every rank's lines (labelled with `-l`) and a traceback
on the second node is in the `.err` file. On the cluster as the docs set it up (shared TLS
nodes, the cluster key, the docs' ACL), the job submitted by an ordinary user."""
import json
import os
import re

from conftest import wait_for
from doc_cluster import doc_cluster  # noqa: F401 (the fixture)

# Two tasks a node; every task prints numbered lines to stdout, the second node's tasks a
# traceback's first line to stderr, and stdout once more after it (order within a stream).
SCRIPT = """#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:1
#SBATCH -o out-%j.txt
#SBATCH -e err-%j.txt
srun -l bash -c '
for i in 1 2 3; do echo "rank $SLURM_PROCID line $i on $SLURMD_NODENAME"; done
if [ "$SLURM_NODEID" = 1 ]; then
  echo "Traceback (most recent call last): rank $SLURM_PROCID" >&2
  exit 3
fi
echo "rank $SLURM_PROCID done"'
echo "srun rc=$?"
"""

# One task on the second node prints more than the first node's daemon holds of a step
# (1 MiB): every line must still arrive, in order, unlabelled without -l.
BIG_LINES = 200_000
BIG = f"""#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:1
#SBATCH -o big-%j.txt
#SBATCH -e big-%j.err
srun bash -c 'if [ "$SLURM_NODEID" = 1 ]; then seq 1 {BIG_LINES}; else echo first node; fi'
echo "srun rc=$?"
"""


def show(node, job_id):
    return json.loads(node.trainq_as("ada", "show", "--json", str(job_id), check=0).stdout)


def run_script(cluster, name, text, timeout=120):
    """Submits `text` as ada on the first node; the ended job and its submit folder."""
    c = cluster
    first = c.nodes["gpu1"]
    path = os.path.join(first.work, name)
    with open(path, "w") as f:
        f.write(text)
    job_id = int(first.trainq_as("ada", "sbatch", "--parsable", path, check=0).stdout)
    job = wait_for(lambda: (lambda j: j if j["state"] in ("succeeded", "failed") else None)(
        show(first, job_id)), timeout=timeout, what=f"job {job_id} to end")
    return job_id, job, first


def read(folder, name):
    path = os.path.join(folder, name)
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def test_the_output_files_hold_every_ranks_output_as_slurms_do(doc_cluster):
    c = doc_cluster()
    c.start()
    job_id, job, first = run_script(c, "ranks.sbatch", SCRIPT)
    out, err = read(first.work, f"out-{job_id}.txt"), read(first.work, f"err-{job_id}.txt")
    nodes = job["attempts"][0]["nodes"]
    where = f"out:\n{out}\nerr:\n{err}\n{job['attempts']}\n{c.logs()}"
    assert sorted(nodes) == ["gpu1", "gpu2"], where
    # Ranks 0-1 on the first node, 2-3 on the second (Slurm's block layout), each line of
    # every rank labelled in the -o file, in the order the task wrote them.
    for rank in range(4):
        node = nodes[rank // 2]
        mine = [line for line in out.splitlines() if line.startswith(f"{rank}: ")]
        want = [f"{rank}: rank {rank} line {i} on {node}" for i in (1, 2, 3)]
        if rank < 2:
            want.append(f"{rank}: rank {rank} done")
        assert mine == want, where
    # The second node's traceback is in the -e file, labelled, and stderr only.
    for rank in (2, 3):
        assert f"{rank}: Traceback (most recent call last): rank {rank}\n" in err, where
        assert "Traceback" not in out, where
    assert "line 1" not in err, where
    # The failed tasks are told as before, and the step's exit code is theirs.
    for rank in (2, 3):
        assert f"srun: error: {nodes[1]}: task {rank}: Exited with exit code 3" in err, where
    assert "srun rc=3" in out, where
    # The second node's part of the job's log keeps its own tasks' lines.
    part = first.trainq_as("ada", "logs", "--node", "1", str(job_id), check=0).stdout
    assert f"2: rank 2 line 1 on {nodes[1]}" in part, part
    assert "2: Traceback (most recent call last): rank 2" in part, part


def test_output_larger_than_the_daemons_window_arrives_whole_and_in_order(doc_cluster):
    c = doc_cluster()
    c.start()
    job_id, job, first = run_script(c, "big.sbatch", BIG, timeout=240)
    out = read(first.work, f"big-{job_id}.txt")
    where = f"{out[:2000]}...\n{read(first.work, f'big-{job_id}.err')}\n{c.logs()}"
    assert job["state"] == "succeeded", where
    lines = out.splitlines()
    assert "first node" in lines and "srun rc=0" in lines, where
    numbers = [line for line in lines if re.fullmatch(r"\d+", line)]
    assert numbers == [str(i) for i in range(1, BIG_LINES + 1)], where


# Slurm's node range: as many of 1 to 2 nodes as are free when it starts, two tasks on each.
RANGE = """#!/bin/bash
#SBATCH -N 1-2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:1
#SBATCH -o range-%j.txt
echo "nodes $SLURM_NNODES tasks $SLURM_NTASKS per node $SLURM_TASKS_PER_NODE"
srun -l bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME"'
"""


def test_a_node_range_starts_on_the_nodes_free_then_as_slurm_allocates_it(doc_cluster):
    c = doc_cluster()
    c.start()
    job_id, job, first = run_script(c, "range.sbatch", RANGE)
    out = read(first.work, f"range-{job_id}.txt")
    where = f"{out}\n{job['attempts']}\n{c.logs()}"
    assert job["state"] == "succeeded", where
    assert sorted(job["attempts"][0]["nodes"]) == ["gpu1", "gpu2"], where
    assert "nodes 2 tasks 4 per node 2(x2)" in out, where
    assert sorted(l.split(": ", 1)[1].split(" on ")[0] for l in out.splitlines()
                  if " of " in l) == [f"rank {r} of 4" for r in range(4)], where
    # gpu2 busy: it starts on gpu1 alone, with that node's layout, and stays there.
    go = os.path.join(first.work, "go")
    busy = int(first.trainq_as("ada", "submit", "--gpus", "1", "--node", "gpu2", "--", "sh", "-c",
                               f"until [ -e {go} ]; do sleep 0.1; done", check=0).stdout)
    wait_for(lambda: show(first, busy)["state"] == "running", timeout=30, what="gpu2 busy")
    job_id, job, first = run_script(c, "range.sbatch", RANGE)
    out = read(first.work, f"range-{job_id}.txt")
    open(go, "w").close()
    assert job["state"] == "succeeded", (out, job["attempts"])
    assert job["attempts"][0]["nodes"] == ["gpu1"], job["attempts"]
    assert "nodes 1 tasks 2 per node 2" in out, out
