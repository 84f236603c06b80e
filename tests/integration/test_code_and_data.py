"""Code and data go to the node (docs/cluster.md, "Code and data"): a job submitted with
--snapshot or --stage runs on a node that sees none of the submitting node's files."""
import hashlib
import os
import re
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


def test_a_snapshot_and_a_staged_dataset_run_on_a_node_without_them(make_cluster):
    cluster = make_cluster(2)
    a, b = cluster.node("node0"), cluster.node("node1")
    repo = a.path("proj")
    os.makedirs(os.path.join(repo, "data"))
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("import hashlib, os\n"
                "print('data', hashlib.sha256(open('data/d.bin', 'rb').read()).hexdigest())\n"
                "print('staged', hashlib.sha256(open('input.bin', 'rb').read()).hexdigest())\n"
                "os.makedirs('checkpoints', exist_ok=True)\n"
                "open('checkpoints/ckpt.txt', 'w').write('step 10')\n")
    with open(os.path.join(repo, ".gitignore"), "w") as f:
        f.write("data/\ncheckpoints/\n")
    data_sha = write_random(os.path.join(repo, "data", "d.bin"), 2 * MiB, "data")
    dataset = a.path("dataset.bin")
    staged_sha = write_random(dataset, 8 * MiB, "dataset")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    # node1 sees neither node0's files (its state dir, where snapshots are kept) nor the project.
    hide_from(b, os.path.dirname(a.state_dir))
    wait_for(lambda: {n["name"]: n for n in cluster.listing(a)["nodes"]}["node1"]["state"] == "up",
             what="node1 back")

    def run_there(*opts):
        out = a.run("submit", "--snapshot", "--node", "node1", "--stage",
                    f"{dataset}:input.bin", *opts, "--", "python3", "train.py", cwd=repo)
        job_id = int(out.stdout.strip())
        job = a.wait_state(job_id, ("succeeded", "failed"), timeout=60)
        log = a.run("logs", str(job_id)).stdout
        assert job["state"] == "succeeded", (job, log, cluster.logs())
        assert job["attempts"][-1]["node"] == "node1"
        return job, log

    job, log = run_there()
    assert f"data {data_sha}" in log and f"staged {staged_sha}" in log, log
    first = fetched_mib(log)
    assert first >= 10, log  # the code, data/ and the dataset went over
    # The same again: everything is in node1's cache.
    _, log = run_there()
    assert fetched_mib(log) < 0.1, log
    # 1 MiB changed in the middle of the dataset: about that much is sent.
    with open(dataset, "r+b") as f:
        f.seek(4 * MiB)
        f.write(hashlib.shake_256(b"changed").digest(MiB))
    with open(dataset, "rb") as f:
        changed_sha = hashlib.sha256(f.read()).hexdigest()
    _, log = run_there()
    assert f"staged {changed_sha}" in log, log
    assert 0.9 <= fetched_mib(log) <= 3, log
