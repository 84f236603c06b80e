"""What shipping code and data to another node costs a cluster user (docs/cluster.md, "Code
and data"), beside rsync of the same tree in the same run. Real trainqd nodes on one real
redis-server on this machine, talking TLS (a self-signed certificate, as docs/cluster.md
sets up) with requests signed by the cluster key; simulated GPUs. Usage: stage.py
BUILD/trainq [MIB]

The dataset is shaped like a training set's shards: 3/4 of the bytes in files of 32-64 MiB,
the rest in 2,000 small files (labels, index, configs); MIB in all (default 1024).

- first copy: `trainq submit --stage DATA:data --node nodeK -- true`, from the submit to the
  job's start on nodeK (the manifest made at submit, the fetch, the copy built), against rsync
  of the same tree into an empty directory over loopback (an rsync daemon, rsync://: rsync's
  network transfer, unencrypted) and on the same disk (`rsync -a DATA/ COPY/`); COPY_ROUNDS
  of each, taken in turn, each trainq round to a node that holds nothing yet; the medians of
  the time and of the CPU time every process involved used (both ends, the client);
- 1 % changed: 1 % of the bytes rewritten in the middle of one shard, then the same submit:
  the bytes node1 fetched (from the job's log), against rsync's literal data for the same change
  (`rsync -a --no-whole-file --stats`, the delta algorithm rsync uses over a network);
- cached start: submit -> start of a job whose data node1 already holds, against the same job
  with no --stage (both on node1): the median difference over the rounds is what staging adds.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Node, Redis, free_port, wait_until  # noqa: E402

ROUNDS = 9
COPY_ROUNDS = 3
MiB = 1 << 20


def make_dataset(root, total):
    os.makedirs(root)
    small_bytes = total // 4
    for i in range(2000):
        with open(os.path.join(root, f"label{i:04}.json"), "wb") as f:
            f.write(os.urandom(max(1, small_bytes // 2000)))
    left, i = total - small_bytes, 0
    while left > 0:
        size = min(left, (32 + (i * 7) % 33) * MiB)
        with open(os.path.join(root, f"shard{i:03}.bin"), "wb") as f:
            for _ in range(size // MiB):
                f.write(os.urandom(MiB))
            f.write(os.urandom(size % MiB))
        left -= size
        i += 1


def start_cluster(binary, redis, count):
    keys = tempfile.mkdtemp(prefix="tqb-key-", dir="/tmp")
    key, cert, pem = (os.path.join(keys, n) for n in ("cluster.key", "cert.pem", "key.pem"))
    subprocess.run([os.path.join(os.path.dirname(binary), "trainqd"), "--new-cluster-key", key],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", pem, "-out", cert], check=True, capture_output=True)
    prefix = f"tqb{os.getpid()}:"
    nodes = [Node(binary, {"store": redis.url, "redis_prefix": prefix, "node_name": f"node{i}",
                           "node_address": "127.0.0.1", "listen": [f"127.0.0.1:{free_port()}"],
                           "tls_cert": cert, "tls_key": pem, "cluster_key_file": key}, "0GiB",
                  env={"TRAINQ_CA": cert}) for i in range(count)]
    wait_until(lambda: len(json.loads(nodes[0].cli("nodes", "--json"))["nodes"]) == count,
               what="all nodes")
    return nodes


def run_job(node, *opts, to="node1"):
    """Submit on `node` (node0) a job for `to`; (seconds from submit to start, its log)."""
    stamp = os.path.join(node.root, f"start.{time.monotonic_ns()}")
    t0 = time.time()
    job = node.cli("submit", "--node", to, "--gpus", "0", *opts, "--", "sh", "-c",
                   f"date +%s.%N > {stamp}.tmp && mv {stamp}.tmp {stamp}").strip()
    wait_until(lambda: os.path.exists(stamp), timeout=600, what=f"job {job} to start")
    with open(stamp) as f:
        started = float(f.read())
    wait_until(lambda: json.loads(node.cli("show", job, "--json"))["state"] == "succeeded",
               timeout=60, what=f"job {job} to end")
    return started - t0, node.cli("logs", job)


def fetched(log):
    m = re.search(r"fetched ([\d.]+) (B|KiB|MiB|GiB)", log)
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]
    return float(m.group(1)) * scale


def cpu_seconds(pids):
    """User and system CPU time of `pids` and of their children they waited for."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def children_cpu():
    t = os.times()
    return t.children_user + t.children_system


class Rsyncd:
    """An rsync daemon on a free loopback port, its module `w` the directory `root`."""

    def __init__(self, root):
        self.port = free_port()
        conf = os.path.join(root, "rsyncd.conf")
        with open(conf, "w") as f:
            f.write(f"use chroot = no\nuid = root\ngid = root\n[w]\npath = {root}\n"
                    "read only = no\n")
        self.proc = subprocess.Popen(["rsync", "--daemon", "--no-detach", f"--config={conf}",
                                      f"--port={self.port}", "--address=127.0.0.1"])
        wait_until(lambda: subprocess.run(["rsync", f"rsync://127.0.0.1:{self.port}/"],
                                          capture_output=True).returncode == 0,
                   what="the rsync daemon")

    def copy(self, src, name):
        subprocess.run(["rsync", "-a", f"{src}/", f"rsync://127.0.0.1:{self.port}/w/{name}/"],
                       check=True)
        # The daemon's side is a child it forks; its CPU time counts once it is reaped.
        wait_until(lambda: subprocess.run(["pgrep", "-P", str(self.proc.pid)],
                                          capture_output=True).returncode != 0,
                   what="the rsync daemon's child to end")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def timed(fn, pids=()):
    """(seconds, CPU seconds of this process's children and of `pids`) that fn() took."""
    subprocess.run(["sync"], check=True)  # no dirty pages left from the round before
    cpu0, t0 = children_cpu() + cpu_seconds(pids), time.perf_counter()
    out = fn()
    took = time.perf_counter() - t0
    return took, children_cpu() + cpu_seconds(pids) - cpu0, out


def rsync_literal(src, dst):
    out = subprocess.run(["rsync", "-a", "--no-whole-file", "--stats", f"{src}/", f"{dst}/"],
                         check=True, capture_output=True, text=True).stdout
    return int(re.search(r"Literal data: ([\d,]+)", out).group(1).replace(",", ""))


def human(n):
    return f"{n / MiB:.1f} MiB" if n < (1 << 30) else f"{n / (1 << 30):.2f} GiB"


def main():
    binary = os.path.abspath(sys.argv[1])
    total = int(sys.argv[2]) * MiB if len(sys.argv) > 2 else 1024 * MiB
    if shutil.which("rsync") is None:
        sys.exit("stage bench: rsync is not installed (scripts/deps.sh test)")
    work = tempfile.mkdtemp(prefix="tqb-stage-", dir="/tmp")
    redis = Redis("everysec")
    nodes = []
    try:
        data = os.path.join(work, "data")
        make_dataset(data, total)
        nodes = start_cluster(binary, redis, 1 + COPY_ROUNDS)
        submit_node = nodes[0]
        subprocess.run(["sync"], check=True)
        daemons = [int(subprocess.check_output(["pgrep", "-f", "--", f"--state-dir {n.state}"]).split()[0])
                   for n in nodes]
        rsyncd = Rsyncd(work)
        runs = {"trainq": [], "rsyncd": [], "local": []}
        for k in range(1, COPY_ROUNDS + 1):
            _, cpu, (took, log) = timed(
                lambda: run_job(submit_node, "--stage", f"{data}:data", to=f"node{k}"), daemons)
            runs["trainq"].append((took, cpu))  # submit to start; CPU until the job ended
            if k == 1:
                first_log = log
            took, cpu, _ = timed(lambda: rsyncd.copy(data, f"net{k}"), [rsyncd.proc.pid])
            runs["rsyncd"].append((took, cpu))
            took, cpu, _ = timed(lambda: subprocess.run(
                ["rsync", "-a", f"{data}/", os.path.join(work, f"copy{k}") + "/"], check=True))
            runs["local"].append((took, cpu))
        rsyncd.stop()
        first = {what: (statistics.median(t for t, _ in r), statistics.median(c for _, c in r))
                 for what, r in runs.items()}
        log = first_log
        first_bytes = fetched(log)
        # 1 % of the bytes, rewritten in the middle of the first shard.
        shard = os.path.join(data, "shard000.bin")
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            f.write(os.urandom(total // 100))
        _, log = run_job(submit_node, "--stage", f"{data}:data")
        changed_bytes = fetched(log)
        rsync_changed = rsync_literal(data, os.path.join(work, "copy1"))
        cached, plain = [], []
        for _ in range(ROUNDS):
            cached.append(run_job(submit_node, "--stage", f"{data}:data")[0])
            plain.append(run_job(submit_node)[0])
        added = statistics.median(cached) - statistics.median(plain)
        cpu = open("/proc/cpuinfo").read().count("processor\t:")
        print(f"stage bench: {human(total)} dataset ({len(os.listdir(data))} files), "
              f"{len(nodes)} nodes on one machine ({cpu} CPUs), TLS on loopback; medians of "
              f"{COPY_ROUNDS} first copies each, {ROUNDS} rounds for the starts")
        print("| what | trainq --stage (TLS) | rsync over loopback (rsync://) | rsync -a on one disk |")
        print("| --- | --- | --- | --- |")

        def copy_cell(what):
            took, cpu = first[what]
            return f"{took:.2f} s ({human(total / took)}/s), {cpu:.1f} CPU-s"

        print(f"| first copy, submit to start | {copy_cell('trainq')}; {human(first_bytes)} "
              f"fetched | {copy_cell('rsyncd')} | {copy_cell('local')} |")
        print(f"| bytes sent for 1 % changed ({human(total // 100)}) | {human(changed_bytes)} "
              f"({100 * changed_bytes / total:.2f} % of the data) | {human(rsync_changed)} "
              f"literal ({100 * rsync_changed / total:.2f} %; rsync's delta transfer) | - |")
        print(f"| start, data already on the node (median) | {1000 * statistics.median(cached):.0f}"
              f" ms, {1000 * added:+.0f} ms beside no --stage "
              f"({1000 * statistics.median(plain):.0f} ms) | - | - |")
    finally:
        for n in nodes:
            n.stop()
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
