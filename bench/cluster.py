"""What a cluster user pays beside a personal daemon: submit cost and submit -> start latency
on SQLite, on one node on Redis (AOF fsync every second, then on every write) and on three
nodes on Redis with the submits sent to a follower. Real redis-server, real trainqd nodes on
this machine, simulated GPUs. Usage: cluster.py BUILD/trainq [SUBMITS] [API_SUBMITS] [STARTS]

- submit (CLI): SUBMITS sequential `trainq submit --gpus 1 --mem 1GiB -- true`, whole
  processes, on nodes whose GPUs are all used by others, so every job waits and no start
  disturbs the submits; per-submit median and p95.
- submit (API): API_SUBMITS `POST /v1/jobs` of the same job on the Unix socket in a tight loop,
  one connection each, sequential: the daemon's own rate, without the CLI's process start.
- submit -> start: on idle nodes (one free GPU each), one `--gpus 1 --mem 1GiB` job at a time
  writes its start time; the CLI submit is in the figure, as the user waits for it.
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SUBMITS, API_SUBMITS, STARTS = 300, 500, 30
POLL = 0.002
JOB = ["--gpus", "1", "--mem", "1GiB"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout=30, what="a condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster bench: timed out waiting for {what}")
        time.sleep(POLL)


def sim_gpu(used_by_others):
    return {"uuid": f"GPU-bench-{used_by_others}", "name": "Simulated A100 80GB",
            "memory_total": "80GiB", "memory_used_by_others": used_by_others}


class Redis:
    """A real redis-server on a free local port, AOF on, fsync as `appendfsync` says."""

    def __init__(self, appendfsync):
        if shutil.which("redis-server") is None:
            sys.exit("cluster bench: redis-server is not installed (scripts/deps.sh test)")
        self.dir = tempfile.mkdtemp(prefix=f"tqb-redis-{appendfsync}-", dir="/tmp")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", appendfsync, "--dir", self.dir,
             "--daemonize", "no", "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.answers, what=f"redis-server on port {self.port}")
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Node:
    """One trainqd: its state dir, config and simulated GPU file, the CLI and raw HTTP."""

    def __init__(self, binary, config, used_by_others, env=None):
        self.binary = binary
        self.root = tempfile.mkdtemp(prefix="tqb-cluster-", dir="/tmp")
        self.state = os.path.join(self.root, "state")
        os.makedirs(self.state)
        self.socket = os.path.join(self.state, "trainq.sock")
        with open(os.path.join(self.state, "config.toml"), "w") as f:
            f.write("".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items()))
        gpu_file = os.path.join(self.root, "gpus.json")
        with open(gpu_file, "w") as f:
            json.dump({"gpus": [sim_gpu(used_by_others)]}, f)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINQ_")}
        self.env.update(TRAINQ_STATE_DIR=self.state, TRAINQ_FAKE_GPUS=gpu_file, **(env or {}))
        self.cli("daemon")

    def cli(self, *args):
        return subprocess.run([self.binary, *args], env=self.env, cwd=self.root, check=True,
                              capture_output=True, text=True).stdout

    def api(self, method, target, body=None):
        """One request, Connection: close; (status, body bytes)."""
        data = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {target} HTTP/1.1\r\nHost: trainq\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(self.socket)
            s.sendall(head.encode() + data)
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        raw = b"".join(chunks)
        return int(raw.split(b" ", 2)[1]), raw.partition(b"\r\n\r\n")[2]

    def stop(self):
        subprocess.run([self.binary, "daemon", "stop"], env=self.env, capture_output=True)
        # Jobs outlive the daemon by design; ours are `true` or a timestamp, so they are
        # over, but anything still carrying this state dir is ours: end it by pid.
        mark = f"TRAINQ_STATE_DIR={self.state}".encode()
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0") and int(entry) != os.getpid():
                        os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


class Setup:
    """(label, Redis appendfsync or None for SQLite, node count)."""

    def __init__(self, label, fsync, count):
        self.label, self.fsync, self.count = label, fsync, count

    def start(self, binary, redis, used_by_others):
        """The nodes, and the one a user submits to: a follower when there are several."""
        if self.fsync is None:
            node = Node(binary, {}, used_by_others)
            return [node], node
        prefix = f"tqb{os.getpid()}x{time.monotonic_ns() % 10**9}:"
        # One cluster key for every node, as docs/cluster.md makes it.
        key = os.path.join(tempfile.mkdtemp(prefix="tqb-key-", dir="/tmp"), "cluster.key")
        subprocess.run([os.path.join(os.path.dirname(binary), "trainqd"), "--new-cluster-key",
                        key], check=True, capture_output=True)
        nodes = []
        for i in range(self.count):
            # Defaults otherwise, as a cluster is run: heartbeats, lease and sampling included.
            nodes.append(Node(binary, {"store": redis.url, "redis_prefix": prefix,
                                       "node_name": f"node{i}", "node_address": "127.0.0.1",
                                       "listen": [f"127.0.0.1:{free_port()}"],
                                       "cluster_key_file": key},
                              used_by_others))

        def listing():
            doc = json.loads(nodes[0].cli("nodes", "--json"))
            return doc if doc["leader"] and len(doc["nodes"]) == self.count else None

        leader = wait_until(listing, what="a leader and every node")["leader"]
        follower = [n for i, n in enumerate(nodes) if f"node{i}" != leader]
        return nodes, (follower[0] if follower else nodes[0])


SETUPS = [Setup("(a) personal daemon, SQLite", None, 1),
          Setup("(b) 1 node, Redis everysec", "everysec", 1),
          Setup("(c) 1 node, Redis always", "always", 1),
          Setup("(d) 3 nodes, Redis everysec, via a follower", "everysec", 3),
          Setup("(e) 3 nodes, Redis always, via a follower", "always", 3)]


def measure_submits(node, submits, api_submits):
    cli = []
    for _ in range(submits):
        t0 = time.perf_counter()
        node.cli("submit", *JOB, "--", "true")
        cli.append(time.perf_counter() - t0)
    body = {"command": ["true"], "gpus": 1, "mem": "1GiB", "cwd": node.root}
    t0 = time.perf_counter()
    for _ in range(api_submits):
        status, answer = node.api("POST", "/v1/jobs", body)
        if status != 201:
            raise RuntimeError(f"cluster bench: POST /v1/jobs answered {status}: {answer!r}")
    return cli, api_submits / (time.perf_counter() - t0)


def measure_starts(node, starts):
    samples = []
    for i in range(starts):
        path = os.path.join(node.root, f"start.{i}")
        t0 = time.time()
        stamp = f"date +%s.%N > {path}.tmp && mv {path}.tmp {path}"
        node.cli("submit", *JOB, "--", "sh", "-c", stamp)
        wait_until(lambda: os.path.exists(path), what=f"job {i} to start")
        with open(path) as f:
            samples.append(float(f.read()) - t0)
        # The next one on an idle cluster: this one has ended (nothing waiting or running).
        wait_until(lambda: json.loads(node.api("GET", "/v1/jobs")[1])["jobs"] == [],
                   what=f"job {i} to end")
    return samples


def measure(binary, submits=SUBMITS, api_submits=API_SUBMITS, starts=STARTS, log=None):
    """{label: {"cli": [s], "api_rate": submits/s, "start": [s]}} for every setup."""
    redis = {}
    results = {}
    try:
        for setup in SETUPS:
            if setup.fsync and setup.fsync not in redis:
                redis[setup.fsync] = Redis(setup.fsync)
            r = redis.get(setup.fsync)
            if log:
                log(f"  {setup.label}")
            nodes, target = setup.start(binary, r, "80GiB")  # every GPU taken: jobs wait
            try:
                cli, api_rate = measure_submits(target, submits, api_submits)
            finally:
                for n in nodes:
                    n.stop()
            nodes, target = setup.start(binary, r, 0)  # idle
            try:
                start = measure_starts(target, starts)
            finally:
                for n in nodes:
                    n.stop()
            results[setup.label] = {"cli": cli, "api_rate": api_rate, "start": start}
    finally:
        for r in redis.values():
            r.stop()
    return results


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def render(results, machine, submits=SUBMITS, api_submits=API_SUBMITS, starts=STARTS):
    """The table as Markdown lines."""
    out = [f"- machine: {machine}; Redis {redis_version()} on loopback, AOF on this disk",
           f"- submit (CLI): {submits} sequential `trainq submit --gpus 1 --mem 1GiB -- true`, "
           "whole processes, every GPU busy so each job waits; submit (API): "
           f"{api_submits} `POST /v1/jobs` on the Unix socket, sequential, one connection each",
           f"- submit → start: {starts} jobs on idle nodes, one at a time, from before the CLI "
           "submit to the job's own first timestamp\n",
           "| setup | submit p50 ms (CLI) | p95 ms | submits/s (CLI) | submits/s (API) "
           "| submit → start p50 ms | p95 ms |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for label, r in results.items():
        out.append(f"| {label} | {statistics.median(r['cli']) * 1000:.2f} | "
                   f"{pct(r['cli'], 0.95) * 1000:.2f} | {len(r['cli']) / sum(r['cli']):.0f} | "
                   f"{r['api_rate']:.0f} | {statistics.median(r['start']) * 1000:.1f} | "
                   f"{pct(r['start'], 0.95) * 1000:.1f} |")
    return out


def redis_version():
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return next((w[2:] for w in out.split() if w.startswith("v=")), "?")


def main():
    from bench import machine  # bench.py imports this module; only its main needs bench's
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release/trainq")
    args = [int(a) for a in sys.argv[2:5]]
    log = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    results = measure(binary, *args, log=log)
    print("\n".join(render(results, machine(), *args)))
    log(f"took {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
