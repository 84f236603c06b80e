"""Code and data go to the node (docs/cluster.md, "Code and data"): a job submitted with
--snapshot or --stage runs on a node that sees none of the submitting node's files."""
import hashlib
import json
import os
import re
import signal
import subprocess

from conftest import trainq_binary, wait_for

MiB = 1 << 20


def hide_from(node, *paths):
    """Restarts `node`'s daemon in a mount namespace of its own where each path is an empty
    tmpfs: that node sees none of the files there, as a machine without them would."""
    node.run("daemon", "stop")
    mounts = " && ".join(f"mount -t tmpfs tmpfs {p}" for p in paths)
    subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                    f'{mounts} && exec "$0" daemon', trainq_binary()],
                   env=node.env, cwd=node.state_dir, check=True, timeout=60)


def write_random(path, size, seed):
    data = hashlib.shake_256(seed.encode()).digest(size)
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def fetched_mib(log):
    """What the job's first log line says its node fetched, in MiB."""
    m = re.search(r"trainq: node \S+ fetched ([\d.]+) (B|KiB|MiB|GiB)", log)
    assert m, log
    scale = {"B": 1 / MiB, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]
    return float(m.group(1)) * scale


def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.email=a@b", "-c", "user.name=a", *args],
                   check=True, capture_output=True)


def project(t):
    """A git work tree on node `t`: train.py prints the digests of data/d.bin (git-ignored,
    linked) and of input.bin (staged), and writes a checkpoint."""
    repo = t.path("proj")
    os.makedirs(os.path.join(repo, "data"))
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("import hashlib, os\n"
                "print('data', hashlib.sha256(open('data/d.bin', 'rb').read()).hexdigest())\n"
                "print('staged', hashlib.sha256(open('input.bin', 'rb').read()).hexdigest())\n"
                "print('staged at', os.path.realpath('input.bin'))\n"
                "os.makedirs('checkpoints', exist_ok=True)\n"
                "open('checkpoints/ckpt.txt', 'w').write('step 10')\n")
    with open(os.path.join(repo, ".gitignore"), "w") as f:
        f.write("data/\ncheckpoints/\n")
    data_sha = write_random(os.path.join(repo, "data", "d.bin"), 2 * MiB, "data")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo, data_sha


def isolated(cluster, *others):
    """node0 is where jobs are submitted; each of `others` sees none of node0's files."""
    a = cluster.node("node0")
    for name in others:
        hide_from(cluster.node(name), os.path.dirname(a.state_dir))
    wait_for(lambda: all(n["state"] == "up" for n in cluster.listing(a)["nodes"]),
             what="every node up again")
    return a


def submit_there(a, repo, dataset, node, *opts, cmd=("python3", "train.py")):
    out = a.run("submit", "--snapshot", "--node", node, "--stage", f"{dataset}:input.bin",
                *opts, "--", *cmd, cwd=repo)
    return int(out.stdout.strip())


def two_nodes(make_cluster, mib, seed):
    """node0 and node1 (which sees none of node0's files), the project on node0 and a staged
    dataset of `mib` MiB there: (cluster, node0, node1, repo, dataset, its digest)."""
    cluster = make_cluster(2)
    a = isolated(cluster, "node1")
    repo, _ = project(a)
    dataset = a.path("dataset.bin")
    return cluster, a, cluster.node("node1"), repo, dataset, write_random(dataset, mib * MiB, seed)


def test_a_snapshot_and_a_staged_dataset_run_on_a_node_without_them(make_cluster):
    cluster = make_cluster(3)
    a = isolated(cluster, "node1", "node2")
    repo, data_sha = project(a)
    dataset = a.path("dataset.bin")
    staged_sha = write_random(dataset, 200 * MiB, "dataset")

    jobs = []

    def run_there():
        job_id = submit_there(a, repo, dataset, "node2")
        jobs.append(job_id)
        job = a.wait_state(job_id, ("succeeded", "failed"), timeout=120)
        log = a.run("logs", str(job_id)).stdout
        assert job["state"] == "succeeded", (job, log, cluster.logs())
        assert job["attempts"][-1]["node"] == "node2"
        return log

    def staged_at(log):
        return re.search(r"^staged at (\S+)$", log, re.M).group(1)

    log = run_there()
    assert f"data {data_sha}" in log and f"staged {staged_sha}" in log, log
    assert fetched_mib(log) >= 202, log  # the code, data/ and the dataset went over
    # The same again: everything is in node2's cache, and the dataset's copy is shared.
    again = run_there()
    assert fetched_mib(again) < 0.1
    shared = staged_at(log)
    assert staged_at(again) == shared and "/staged/shared/" in shared, (log, again)
    node2 = cluster.node("node2")
    assert os.stat(shared).st_mode & 0o777 == 0o444
    # The client knew the dataset and data/ unchanged (their manifests remembered by root);
    # a snapshot's tree is new at each submit.
    store = os.path.join(a.state_dir, "snapshots")
    assert len(os.listdir(os.path.join(store, "tree_memo"))) == 2
    assert all(os.path.isdir(os.path.join(store, "trees", t))
               for t in os.listdir(os.path.join(store, "trees")))
    # Forgetting a job removes its own copies on the node it ran on, not the shared one.
    own = os.path.join(node2.state_dir, "staged", str(jobs[0]))
    assert os.path.isdir(own)
    node2.run("clean", "--state", "succeeded")
    assert not os.path.exists(own) and os.path.exists(shared)
    # 1 MiB changed in the middle of the dataset: about that much is sent.
    with open(dataset, "r+b") as f:
        f.seek(100 * MiB)
        f.write(hashlib.shake_256(b"changed").digest(MiB))
    with open(dataset, "rb") as f:
        changed_sha = hashlib.sha256(f.read()).hexdigest()
    log = run_there()
    assert f"staged {changed_sha}" in log, log
    assert 0.9 <= fetched_mib(log) <= 2, log


def test_a_flipped_byte_in_a_nodes_cache_is_fetched_again(make_cluster):
    cluster, a, b, repo, dataset, staged_sha = two_nodes(make_cluster, 4, "flip")
    first = submit_there(a, repo, dataset, "node1")
    assert a.wait_state(first, ("succeeded", "failed"), timeout=60)["state"] == "succeeded"
    # A bit flips on node1's disk: its size and time stay as they were.
    cached = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(b.state_dir, "cache", "files"))
              for f in fs if os.path.getsize(os.path.join(d, f)) == 4 * MiB]
    assert len(cached) == 1, cached
    st = os.stat(cached[0])
    with open(cached[0], "r+b") as f:
        f.seek(MiB)
        byte = f.read(1)
        f.seek(MiB)
        f.write(bytes([byte[0] ^ 1]))
    os.utime(cached[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    second = submit_there(a, repo, dataset, "node1")
    job = a.wait_state(second, ("succeeded", "failed"), timeout=60)
    log = a.run("logs", str(second)).stdout
    assert job["state"] == "succeeded" and f"staged {staged_sha}" in log, (job, log)
    assert fetched_mib(log) >= 1, log  # the damaged file came again


def test_a_sending_daemon_killed_mid_transfer_the_copy_goes_on_when_it_is_back(make_cluster):
    cluster, a, b, repo, dataset, staged_sha = two_nodes(make_cluster, 200, "killed")
    job_id = submit_there(a, repo, dataset, "node1")

    def reason():
        answer = b.api("GET", f"/v1/jobs/{job_id}")
        return json.loads(answer.data)["reason"] or ""
    wait_for(lambda: reason().startswith("staging") and "/" in reason(), timeout=30, interval=0.01,
             what="node1 to fetch")
    os.kill(a.daemon_pid(), signal.SIGKILL)
    waiting = wait_for(lambda: "waits for node node0" in reason() and reason(), timeout=30,
                       what="node1 to wait for node0")
    assert "does not answer" in waiting, waiting
    a.start_daemon()
    job = b.wait_state(job_id, ("succeeded", "failed"), timeout=120)
    log = b.run("logs", str(job_id)).stdout
    assert job["state"] == "succeeded" and f"staged {staged_sha}" in log, (job, log)
    # What came before the kill was kept: nothing was fetched twice.
    assert fetched_mib(log) <= 205, log


def test_jobs_whose_submitting_node_is_gone_for_good_fail_saying_so(make_cluster):
    cluster, a, b, repo, dataset, _ = two_nodes(make_cluster, 200, "gone")
    job_id = submit_there(a, repo, dataset, "node1")
    os.kill(a.daemon_pid(), signal.SIGKILL)  # before node1 can have it all
    job = b.wait_state(job_id, ("succeeded", "failed"), timeout=60)
    assert job["state"] == "failed", job
    lost = "node node0, where it was submitted and which alone holds what it ships, is lost"
    assert lost in job["reason"] and lost in job["attempts"][-1]["end_reason"], job
    assert job["attempts"][-1]["exit_code"] is None, job  # nothing ran on a partial tree


def test_a_two_node_torchrun_job_whose_code_is_only_where_it_was_submitted(make_cluster):
    import shutil
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun is missing: scripts/deps.sh test installs python3-torch"
    cluster = make_cluster(2)
    a = isolated(cluster, "node1")
    repo = a.path("ddp")
    os.makedirs(repo)
    with open(os.path.join(repo, "allreduce.py"), "w") as f:
        f.write("import os, torch, torch.distributed as dist\n"
                "dist.init_process_group('gloo')\n"
                "x = torch.tensor([float(dist.get_rank() + 1)])\n"
                "dist.all_reduce(x)\n"
                "print('rank', os.environ['RANK'], 'sum', x.item(), flush=True)\n"
                "dist.destroy_process_group()\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "ddp")
    # As test_cluster's torchrun test: "9:1" works around Debian's torch 1.13 on Python 3.11.
    out = a.run("submit", "--snapshot", "--nodes", "2", "--gpus", "1", "--", torchrun,
                "--redirects", "9:1", "--tee", "9:1", "allreduce.py", cwd=repo)
    job_id = int(out.stdout.strip())
    job = a.wait_state(job_id, ("succeeded", "failed"), timeout=120)
    logs = a.run("logs", str(job_id), check=False).stdout
    assert job["state"] == "succeeded", (logs, cluster.logs())
    assert "rank 0 sum 3.0" in logs and "rank 1 sum 3.0" in logs, logs
    assert re.search(r"node node1 fetched [\d.]+ \S+ of the job's", logs), logs


def read_or_none(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def test_collect_brings_outputs_back_whatever_the_end(make_cluster):
    cluster = make_cluster(2)
    a = isolated(cluster, "node1")
    repo, _ = project(a)
    dataset = a.path("dataset.bin")
    write_random(dataset, MiB, "collect")
    os.makedirs(os.path.join(repo, "checkpoints"))
    with open(os.path.join(repo, "checkpoints", "old.txt"), "w") as f:
        f.write("step 5")
    # train.py writes checkpoints/ckpt.txt on node1: it comes back into the project's
    # checkpoints/ (the snapshot's link to it), where the job would have written it here.
    job_id = submit_there(a, repo, dataset, "node1", "--collect", "checkpoints/*")
    assert a.wait_state(job_id, ("succeeded", "failed"), timeout=60)["state"] == "succeeded"
    back = os.path.join(repo, "checkpoints", "ckpt.txt")
    # The copy lands file by file and a file is there before its bytes: wait for them.
    wait_for(lambda: read_or_none(back) == "step 10", timeout=30,
             what="the checkpoint back on node0")
    # A failed job's outputs come back too, into --collect-to.
    results = a.path("results")
    job_id = submit_there(a, repo, dataset, "node1", "--collect", "out*.txt", "--collect-to",
                          results, cmd=("sh", "-c", "echo partial > out1.txt; exit 3"))
    job = a.wait_state(job_id, ("succeeded", "failed"), timeout=60)
    assert job["state"] == "failed" and job["attempts"][-1]["exit_code"] == 3, job
    wait_for(lambda: read_or_none(os.path.join(results, "out1.txt")) == "partial\n", timeout=30,
             what="out1.txt in --collect-to")
    assert "collecting 1 file (" in a.daemon_log(), a.daemon_log()[-2000:]
    # An end the submitting node's daemon missed (it was down): its outputs come back once
    # it is up again.
    b = cluster.node("node1")
    go = b.path("go")
    job_id = submit_there(a, repo, dataset, "node1", "--collect", "late.txt", "--collect-to",
                          results, cmd=("sh", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done; "
                                                    "echo late > late.txt"))
    a.wait_state(job_id, "running", timeout=60)
    a.run("daemon", "stop")
    open(go, "w").close()
    wait_for(lambda: json.loads(b.run("show", str(job_id), "--json").stdout)["state"] ==
             "succeeded", timeout=60, what="the job's end, node0 down")
    a.run("daemon")
    wait_for(lambda: read_or_none(os.path.join(results, "late.txt")) == "late\n", timeout=60,
             what="late.txt in --collect-to after node0's restart")
    pending = os.path.join(a.state_dir, "collect-pending")
    wait_for(lambda: not os.listdir(pending), timeout=30, what="nothing left to collect")


def test_bad_stage_and_collect_arguments_are_refused_naming_them(tq):
    work = tq.path("w")
    os.makedirs(work)
    for args, field in ((["--stage", ""], "--stage"), (["--stage", "a:b:c"], "--stage"),
                        (["--stage", "/nonexistent/data"], "--stage"),
                        (["--collect", "../up"], "--collect"),
                        (["--collect-to", "/tmp/x"], "--collect-to")):
        proc = tq.run("submit", *args, "--", "true", cwd=work, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert field in proc.stderr, (args, proc.stderr)
    assert json.loads(tq.run("ls", "--json").stdout) == []


def test_an_sbatch_script_ships_its_data_with_trainq_lines(make_cluster):
    import shutil
    import tempfile
    cluster = make_cluster(2)
    a = isolated(cluster, "node1")
    dataset = a.path("set.bin")
    sha = write_random(dataset, 3 * MiB, "sbatch")
    script = a.path("job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --nodelist=node1 --gres=gpu:1\n"
                f"#TRAINQ --stage {dataset}:input.bin\n"
                "sha256sum input.bin\n")
    # Without a snapshot the job runs in its --chdir, which node1 must see: one outside
    # node0's hidden files.
    both = tempfile.mkdtemp(prefix="tq-batch-", dir="/tmp")
    try:
        out = a.run("sbatch", "--chdir", both, script)
        job_id = int(re.search(r"(\d+)", out.stdout).group(1))
        job = a.wait_state(job_id, ("succeeded", "failed"), timeout=60)
        output = os.path.join(both, f"slurm-{job_id}.out")
        text = open(output).read() if os.path.exists(output) else "(no output file)"
        assert job["state"] == "succeeded" and sha in text, (job, text)
        assert job["attempts"][-1]["node"] == "node1"
        assert os.readlink(os.path.join(both, "input.bin")).startswith(
            os.path.join(cluster.node("node1").state_dir, "staged"))
    finally:
        shutil.rmtree(both, ignore_errors=True)
