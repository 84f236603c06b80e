"""Slurm scripts unchanged under `trainq sbatch`: srun steps on one node and across a cluster's
nodes, scontrol's node lists, and the environment compared key by key with what a real
Slurm 22.05 gave the same scripts (data/slurm_reference_env.md, data/slurm_reference_srun.md;
docs/workflow.md, "srun and scontrol")."""
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys

from conftest import gpu, trainq_binary, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
SRUN_REFERENCE = os.path.join(HERE, "data", "slurm_reference_srun.md")
ME = pwd.getpwuid(os.getuid())

# What the reference has that trainq does not give, and why (docs/workflow.md says the same).
NOT_GIVEN = {
    "SLURM_CLUSTER_NAME": "trainq has one queue, not named clusters",
    "SLURM_JOB_PARTITION": "trainq has no partitions",
    "SLURM_WORKING_CLUSTER": "the address of a slurmctld",
    "SLURM_CONF": "the submitter's environment in the reference, not Slurm's",
    "CUDA_HOME": "the submitter's environment in the reference, not Slurm's",
    "SLURM_SRUN_COMM_PORT": "srun's own listening port: trainq's srun listens on none",
    "SLURM_STEP_LAUNCHER_PORT": "srun's own listening port: trainq's srun listens on none",
}


# --- the reference, read from its file ---

def reference_blocks():
    """The fenced blocks of the srun reference, each with the text between it and the block
    before (its heading and notes)."""
    blocks, before, body, inside = [], [], [], False
    for line in open(SRUN_REFERENCE).read().splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append(("\n".join(before), "".join(l + "\n" for l in body)))
                before, body = [], []
            inside = not inside
        elif inside:
            body.append(line)
        else:
            before.append(line)
    return blocks


def block_after(title_part):
    for title, body in reference_blocks():
        if title_part in title:
            return body
    raise AssertionError(f"no block after a line with {title_part!r} in {SRUN_REFERENCE}")


def env_lines(body):
    """The variables of an env dump in the reference (it greps for these prefixes)."""
    return dict(line.split("=", 1) for line in body.splitlines()
                if re.match(r"^(SLURM|SBATCH|CUDA|GPU|ROCR|ZE_)[A-Z0-9_]*=", line))


def apply_diff(base, body):
    """The reference writes some environments as differences: '~ K: a → b', '- K=V', '+ K=V'."""
    env = dict(base)
    for line in body.splitlines():
        if line.startswith("~ "):
            key, change = line[2:].split(": ", 1)
            env[key] = change.split(" → ", 1)[1]
        elif line.startswith("- "):
            env.pop(line[2:].split("=", 1)[0], None)
        elif line.startswith("+ "):
            key, value = line[2:].split("=", 1)
            env[key] = value
    return env


def reference_envs():
    mn_batch = env_lines(block_after("batch env, in full"))
    mn_task0 = env_lines(block_after("task 0, on node1"))
    mn_task1 = apply_diff(mn_task0, block_after("task 1, on node2"))
    g2_batch = apply_diff(mn_batch, block_after("`g2-2.out`"))
    g2_task0 = apply_diff(g2_batch, block_after("`g2step-2-0.env`"))
    g2_task1 = apply_diff(g2_task0, block_after("`g2step-2-1.env`"))
    return {"mn": (mn_batch, [mn_task0, mn_task1]), "g2": (g2_batch, [g2_task0, g2_task1])}


def compare(reference, ours, job_id, nodes, submit_dir, what):
    """Every variable of the reference is ours, with the value this job's facts give it."""
    node_map = {"node1": nodes[0], "node2": nodes[-1]}
    compressed = run_scontrol("show", "hostlist", ",".join(nodes)).strip()
    problems = []
    for key, ref in sorted(reference.items()):
        if key in NOT_GIVEN:
            continue
        if key not in ours:
            problems.append(f"{key} missing (reference: {ref})")
            continue
        got = ours[key]
        if key in ("SLURM_JOB_ID", "SLURM_JOBID"):
            want = str(job_id)
        elif key in ("SLURM_TASK_PID",):
            if not got.isdigit():
                problems.append(f"{key}={got} is not a pid")
            continue
        elif key == "SLURM_UMASK":
            if not re.fullmatch(r"0[0-7]{3}", got):
                problems.append(f"{key}={got} is not a umask")
            continue
        elif key == "SLURM_JOB_USER":
            want = ME.pw_name
        elif key == "SLURM_JOB_UID":
            want = str(ME.pw_uid)
        elif key == "SLURM_JOB_GID":
            want = str(ME.pw_gid)
        elif key == "SLURM_SUBMIT_HOST":
            want = socket.gethostname()
        elif key == "SLURM_SUBMIT_DIR":
            want = submit_dir
        elif ref == "node[1-2]":
            want = compressed
        elif ref in node_map:
            want = node_map[ref]
        else:
            want = ref
        if got != want:
            problems.append(f"{key}={got}, the reference gives {want}")
    assert not problems, f"{what}:\n  " + "\n  ".join(problems)


def run_scontrol(*args, env=None):
    slurm = os.path.join(os.path.dirname(trainq_binary()), "slurm", "scontrol")
    return subprocess.run([slurm, *args], capture_output=True, text=True, env=env,
                          check=True).stdout


def read_env(path):
    return dict(line.split("=", 1) for line in open(path).read().splitlines() if "=" in line)


def gang_logs(cluster, job_id):
    """Every node's part of the job's log and its daemon's, for a failure's message."""
    text = ""
    for name, node in cluster.nodes.items():
        runs = os.path.join(node.state_dir, "runs", str(job_id))
        for attempt in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
            log = os.path.join(runs, attempt, "output.log")
            if os.path.exists(log):
                text += f"--- {name} attempt {attempt}:\n{open(log).read()[-3000:]}\n"
        text += f"--- {name} daemon:\n{node.daemon_log()[-2000:]}\n"
    return text


# --- scontrol ---

def scontrol_cases():
    """(args, stdout) of each `scontrol show host...` the reference ran outside a job."""
    cases, current = [], None
    for line in block_after("the login env has no").splitlines():
        command = re.match(r"^\$ scontrol (show host\S+) (.+?)\s+\[rc=(\d+)\]$", line)
        if line.startswith("$ ") or line.startswith("====="):
            current = None
        if command:
            current = [command.group(1).split() + command.group(2).split(),
                       int(command.group(3)), []]
            cases.append(current)
        elif current is not None:
            current[2].append(line)
    return [(args, "".join(l + "\n" for l in out)) for args, rc, out in cases
            if rc == 0 and not any(l.startswith("stderr|") for l in out) and out]


def test_scontrol_expands_and_compresses_node_lists_as_the_reference():
    """The reference's `scontrol show hostname(s)` and `show hostlist(sorted)`, run again."""
    # Where Slurm prints a mangled name for an unclosed bracket, trainq refuses the list.
    refused = {"bad[1-", "bad[1-2"}
    cases = scontrol_cases()
    assert len(cases) >= 12, f"only {len(cases)} scontrol cases found in the reference"
    for args, out in cases:
        if args[-1] in refused:
            continue
        assert run_scontrol(*args) == out, (args, out)
    assert {args[-1] for args, _ in cases} >= refused
    env = {"SLURM_NODELIST": "gpu[01-02]", "PATH": os.environ["PATH"]}
    assert run_scontrol("show", "hostnames", env=env) == "gpu01\ngpu02\n"
    slurm = os.path.join(os.path.dirname(trainq_binary()), "slurm", "scontrol")
    bad = subprocess.run([slurm, "show", "hostname", "bad[1-"], capture_output=True, text=True)
    assert bad.returncode == 1 and "node list: 'bad[1-'" in bad.stderr
    other = subprocess.run([slurm, "update", "JobId=12", "TimeLimit=5"], capture_output=True,
                           text=True)
    assert other.returncode == 1 and "trainq update ID" in other.stderr, other.stderr
    scancel = os.path.join(os.path.dirname(slurm), "scancel")
    plain = subprocess.run([scancel, "12"], capture_output=True, text=True)
    assert plain.returncode == 1 and "use trainq cancel ID" in plain.stderr, plain.stderr


def test_scontrol_holds_and_releases_as_trainq_hold_and_release(tq):
    """`scontrol hold|uhold|release ID` are trainq hold and release (docs/workflow.md)."""
    slurm = os.path.join(os.path.dirname(trainq_binary()), "slurm", "scontrol")

    def scontrol(*args):
        return subprocess.run([slurm, *args], capture_output=True, text=True, env=tq.env,
                              cwd=tq.work, timeout=30)

    first = tq.submit(cmd=["sleep", "60"])
    second = tq.submit("--after", str(first), cmd=["true"])
    p = scontrol("hold", str(second))
    assert p.returncode == 0, p.stderr
    assert tq.show(second)["held"] is True
    p = scontrol("release", str(second))
    assert p.returncode == 0, p.stderr
    assert tq.show(second)["held"] is False
    assert scontrol("uhold", str(second)).returncode == 0
    assert tq.show(second)["held"] is True
    missing = scontrol("hold")
    assert missing.returncode == 1 and "needs a job id" in missing.stderr, missing.stderr
    tq.run("cancel", str(first), str(second))


def test_a_held_submit_waits_until_released_and_then_runs(tq):
    """`sbatch --hold` and `trainq submit --hold` store the job held, as `trainq hold` leaves
    one: no pass starts it, even with the GPUs free, until `scontrol release` or `trainq
    release`."""
    with open(tq.path("held.sbatch"), "w") as f:
        f.write("#!/bin/bash\n#SBATCH --hold\necho ran > held.out\n")
    p = tq.run("sbatch", "--parsable", "held.sbatch")
    assert "not honoured" not in p.stderr, p.stderr
    batch = int(p.stdout)
    plain = tq.submit("--hold", cmd=["sh", "-c", "echo ran > plain.out"])
    other = tq.submit(cmd=["true"])
    tq.wait_state(other, "succeeded")  # a pass ran, and started what it could
    for job_id in (batch, plain):
        job = tq.show(job_id)
        assert job["state"] == "queued" and job["held"] is True, job
        assert job["submitted_held"] is True
        assert job["reason"].startswith("held by "), job["reason"]
        assert f"trainq release {job_id}" in job["reason"], job["reason"]
        assert "held at submit: yes (--hold); trainq release starts it" in \
            tq.run("show", str(job_id)).stdout
    assert not os.path.exists(tq.path("held.out"))
    slurm = os.path.join(os.path.dirname(trainq_binary()), "slurm", "scontrol")
    r = subprocess.run([slurm, "release", str(batch)], capture_output=True, text=True,
                       env=tq.env, cwd=tq.work, timeout=30)
    assert r.returncode == 0, r.stderr
    tq.run("release", str(plain))
    for job_id in (batch, plain):
        assert tq.wait_state(job_id, "succeeded")["submitted_held"] is True
    assert open(tq.path("held.out")).read() == "ran\n"
    assert open(tq.path("plain.out")).read() == "ran\n"
    assert "held at submit: yes (--hold), since released" in tq.run("show", str(plain)).stdout


# --- srun on one node ---

G2 = """#!/bin/bash
#SBATCH --job-name=g2
#SBATCH --ntasks=2
#SBATCH --gpus-per-task=1
env | sort > batch.env
srun -n 2 bash -c 'env | sort > step-$SLURM_PROCID.env'
echo "srun rc=$?"
srun -l bash -c 'echo out$SLURM_PROCID; echo err$SLURM_PROCID >&2'
srun -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 3; fi; sleep 1; echo survived $SLURM_PROCID'
echo "failing rc=$?"
srun -n 5 true
echo "too many rc=$?"
srun --mpi=pmix -n 1 bash -c 'echo step $SLURM_STEP_ID'
"""


def test_srun_runs_a_steps_tasks_on_one_node_as_slurm_does(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)])
    with open(tq.path("g2.sh"), "w") as f:
        f.write(G2)
    job_id = int(tq.run("sbatch", "--parsable", "g2.sh").stdout)
    tq.wait_state(job_id, ("succeeded", "failed"), timeout=60)
    out = open(tq.path(f"slurm-{job_id}.out")).read()
    assert tq.state(job_id) == "succeeded", out
    ref_batch, ref_tasks = reference_envs()["g2"]
    node = tq.show(job_id)["attempts"][0]["node"]
    batch = read_env(tq.path("batch.env"))
    compare(ref_batch, batch, job_id, [node], tq.work, "the batch script's environment")
    for rank, ref in enumerate(ref_tasks):
        compare(ref, read_env(tq.path(f"step-{rank}.env")), job_id, [node], tq.work,
                f"task {rank}'s environment")
    assert "srun rc=0" in out
    # -l: every line of each task, stdout and stderr, after its rank.
    for line in ("0: out0", "0: err0", "1: out1", "1: err1"):
        assert line in out, out
    # A failed task fails the step with its code; the other runs on, as in Slurm.
    assert "srun: error: " + node + ": task 1: Exited with exit code 3" in out
    assert "survived 0" in out and "failing rc=3" in out
    assert "More processors requested than permitted" in out and "too many rc=1" in out
    # An option srun cannot honour is said, then the step runs; steps count from 0.
    assert "srun: warning: --mpi=pmix is not honoured" in out
    assert "step 3" in out, out  # steps 0, 1, 2; the refused one took no number


def test_sbatch_names_array_tasks_and_refuses_an_output_folder_that_is_missing(tq):
    with open(tq.path("arr.sh"), "w") as f:
        f.write("#!/bin/bash\n#SBATCH -J sweep\n#SBATCH --array=0-1\n"
                "echo \"$SLURM_JOB_NAME\"\n")
    group = int(tq.run("sbatch", "--parsable", "arr.sh", "x").stdout)
    assert tq.run("wait", "--group", str(group), timeout=60).returncode == 0
    jobs = tq.ls("--group", str(group))
    assert [j["name"] for j in jobs] == ["sweep[0]", "sweep[1]"]
    # Slurm's name is the array's: scripts and %x see it.
    assert open(tq.path(f"slurm-{group}_0.out")).read() == "sweep\n"
    shown = tq.run("show", str(jobs[0]["id"])).stdout
    assert f"command:     sbatch {tq.path('arr.sh')} x\n" in shown, shown
    with open(tq.path("lost.sh"), "w") as f:
        f.write("#!/bin/bash\n#SBATCH -J lost\n#SBATCH -o logs/%j.out\necho hi\n")
    before = tq.ls("--all")
    p = tq.run("sbatch", "lost.sh", check=False)
    assert p.returncode == 2, p
    assert "#SBATCH line 3: --output=logs/%j.out: the folder" in p.stderr, p.stderr
    assert "mkdir -p logs" in p.stderr
    assert tq.ls("--all") == before  # nothing stored
    # Options the cluster cannot hold are told against the line that asked.
    with open(tq.path("cpus.sh"), "w") as f:
        f.write("#!/bin/bash\n#SBATCH --cpus-per-task=64\ntrue\n")
    p = tq.run("sbatch", "cpus.sh", check=False)
    assert p.returncode == 2 and "#SBATCH line 2: --cpus-per-task=64 cannot be met: --cpus:" \
        in p.stderr, p.stderr


def test_a_node_range_on_one_machine_runs_there_and_one_without_gpus_takes_its_min(tq):
    """#SBATCH --nodes=MIN-MAX as Slurm allocates it: the nodes free when it starts, here the
    one machine, laid out then; a range without GPUs on each node is no gang (a warning)."""
    with open(tq.path("range.sh"), "w") as f:
        f.write("#!/bin/bash\n#SBATCH -N 1-4 --ntasks-per-node=2 --gres=gpu:1\n"
                "echo \"nodes $SLURM_NNODES tasks $SLURM_NTASKS per node $SLURM_TASKS_PER_NODE\"\n")
    p = tq.run("sbatch", "--parsable", "range.sh")
    assert "warning" not in p.stderr, p.stderr
    job_id = int(p.stdout.strip().split(";")[0])
    assert tq.run("wait", str(job_id), timeout=60).returncode == 0
    assert open(tq.path(f"slurm-{job_id}.out")).read() == "nodes 1 tasks 2 per node 2\n"
    assert (tq.show(job_id)["num_nodes"], tq.show(job_id)["max_nodes"]) == (1, 4)
    with open(tq.path("cpu.sh"), "w") as f:
        f.write("#!/bin/bash\n#SBATCH -N 1-2\ntrue\n")
    p = tq.run("sbatch", "--parsable", "cpu.sh")
    assert "--nodes=1-2: a range needs GPUs on each node" in p.stderr, p.stderr
    assert tq.show(int(p.stdout.strip().split(";")[0]))["max_nodes"] == 0


def test_srun_outside_an_sbatch_job_says_so(tq):
    srun = os.path.join(os.path.dirname(trainq_binary()), "slurm", "srun")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = subprocess.run([srun, "-n", "2", "true"], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "SLURM_JOB_ID is not set" in p.stderr
    p = subprocess.run([srun, "--bogus", "true"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "--bogus is not an srun option" in p.stderr


# --- across nodes ---

# The script, byte for byte but for the path of train.py and its argument.
MULTI_NODE = """#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-task=4 --cpus-per-task=8
export MST_ADDR=$(scontrol show hostname ${SLURM_NODELIST} | head -n 1)
srun torchrun --nnodes=${SLURM_NNODES} --nproc_per_node=${SLURM_GPUS_PER_TASK} \
--rdzv_id=${SLURM_JOB_ID} --rdzv_backend=c10d --rdzv_endpoint=$MST_ADDR:23445 \
TRAIN_PY OUT_DIR
"""

TRAIN = """import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
x = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(x)
with open(os.path.join(sys.argv[1], "rank%d" % dist.get_rank()), "w") as f:
    f.write("%s %s %s %s" % (x.item(), os.environ["SLURM_PROCID"], os.environ["SLURMD_NODENAME"],
                             os.environ["CUDA_VISIBLE_DEVICES"]))
dist.destroy_process_group()
"""

# The reference's multi-node probe (mn.sh), its paths made this test's.
MN = """#!/bin/bash
#SBATCH --job-name=mn
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-task=4
#SBATCH --cpus-per-task=8
env | sort > DIR/batch.env
export MST_ADDR=$(scontrol show hostname ${SLURM_NODELIST} | head -n 1)
echo "MST_ADDR=$MST_ADDR"
srun bash -c 'env | sort > DIR/step-$SLURM_PROCID.env'
echo "srun rc=$?"
srun bash -c 'echo task $SLURM_PROCID on $SLURMD_NODENAME'
srun bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 5; fi'
echo "remote failure rc=$?"
"""

# Node names that resolve, as a cluster's host names do: torchrun's rendezvous dials the first.
NAMES = ["127.0.0.1", "127.0.0.2"]


def test_a_multi_node_script_runs_unchanged_with_torchrun_across_two_nodes(make_cluster):
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun is missing: scripts/deps.sh test installs python3-torch"
    cluster = make_cluster(2, gpus=[gpu(i) for i in range(4)], names=NAMES)
    t = cluster.any()
    out_dir = t.path("ranks")
    os.makedirs(out_dir)
    with open(t.path("train.py"), "w") as f:
        f.write(TRAIN)
    script = MULTI_NODE.replace("TRAIN_PY", t.path("train.py")).replace("OUT_DIR", out_dir)
    with open(t.path("multi.sbatch"), "w") as f:
        f.write(script)
    env = dict(t.env)
    # Debian's torch 1.13 on Python 3.11 fails torchrun's default --redirects/--tee of "0"
    # (docs/cluster.md); its PET_* variables set them from the environment, leaving the script
    # as it is.
    env.update({"PET_REDIRECTS": "9:1", "PET_TEE": "9:1",
                "PATH": os.path.dirname(torchrun) + ":" + env["PATH"]})
    job_id = int(t.run("sbatch", "--parsable", "multi.sbatch", env=env).stdout)
    job = t.wait_state(job_id, ("succeeded", "failed"), timeout=240)
    out = open(t.path(f"slurm-{job_id}.out")).read()
    assert job["state"] == "succeeded", f"{out}\n{job['attempts']}\n{gang_logs(cluster, job_id)}"
    attempt = job["attempts"][0]
    assert sorted(attempt["nodes"]) == NAMES
    results = {}
    for name in os.listdir(out_dir):
        total, procid, node, gpus = open(os.path.join(out_dir, name)).read().split()
        results[name] = (float(total), procid, node, gpus)
    # 2 nodes x 4 workers, one all-reduce of 1..8.
    assert len(results) == 8, results
    assert all(r[0] == 36.0 for r in results.values()), results
    assert {(r[1], r[2]) for r in results.values()} == {("0", attempt["nodes"][0]),
                                                        ("1", attempt["nodes"][1])}
    assert all(r[3] == "0,1,2,3" for r in results.values())


def test_the_multi_node_environment_matches_the_reference(make_cluster):
    cluster = make_cluster(2, gpus=[gpu(i) for i in range(4)], names=NAMES)
    t = cluster.any()
    with open(t.path("mn.sh"), "w") as f:
        f.write(MN.replace("DIR", t.work))
    job_id = int(t.run("sbatch", "--parsable", "mn.sh").stdout)
    job = t.wait_state(job_id, ("succeeded", "failed"), timeout=60)
    out = open(t.path(f"slurm-{job_id}.out")).read()
    assert job["state"] == "succeeded", f"{out}\n{job['attempts']}\n{gang_logs(cluster, job_id)}"
    nodes = job["attempts"][0]["nodes"]
    assert f"MST_ADDR={nodes[0]}" in out and "srun rc=0" in out
    # A task that fails on the other node fails the step with its code, said on this one.
    assert f"srun: error: {nodes[1]}: task 1: Exited with exit code 5" in out, out
    assert "remote failure rc=5" in out, out
    ref_batch, ref_tasks = reference_envs()["mn"]
    compare(ref_batch, read_env(t.path("batch.env")), job_id, nodes, t.work,
            "the batch environment")
    for rank, ref in enumerate(ref_tasks):
        compare(ref, read_env(t.path(f"step-{rank}.env")), job_id, nodes, t.work,
                f"task {rank}'s environment")
    # Every node's output, each line after its rank and node; one part with --node.
    logs = t.run("logs", str(job_id)).stdout
    assert f"[0 {nodes[0]}] task 0 on {nodes[0]}" in logs, logs
    assert f"[1 {nodes[1]}] task 1 on {nodes[1]}" in logs, logs
    for which in ("1", nodes[1]):
        part = t.run("logs", "--node", which, str(job_id)).stdout
        assert part == (f"task 1 on {nodes[1]}\n"
                        f"srun: error: {nodes[1]}: task 1: Exited with exit code 5\n"), part
    bad = t.run("logs", "--node", "7", str(job_id), check=False)
    assert bad.returncode == 2 and "its parts are 0 (" in bad.stderr, bad.stderr
    parts = json.loads(t.run("logs", "--json", str(job_id)).stdout)["parts"]
    assert [p["node"] for p in parts] == nodes and "task 1" in parts[1]["text"]
    shown = t.run("show", str(job_id)).stdout
    assert f"part 1: node {nodes[1]}  GPUs [0,1,2,3]" in shown, shown
    assert "command:     sbatch " + t.path("mn.sh") in shown, shown
    table = t.run("ls", "--all").stdout
    assert "NODE" in table.splitlines()[0] and ",".join(nodes) in table, table
