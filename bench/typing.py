"""Typing latency of an interactive session: the time from a key pressed in the user's
terminal to its echo there, median, 90th percentile and worst of KEYS keys, in one run on one
machine. The program is `cat` on a cooked terminal, so the echo comes from the remote
terminal's line discipline, as a shell's prompt line does:

  - a local terminal: `cat` on the user's own pseudo-terminal, the floor;
  - script(1): `cat` on a second pseudo-terminal that script relays to the first (util-linux),
    the same two-terminal relay as ssh, tmux or `trainq shell`, without a network or a queue;
  - `trainq shell -- cat` on a personal daemon (the key goes client -> shim's socket ->
    terminal -> shim -> client);
  - `trainq shell --node gpu2 -- cat` on gpu1 of a two-node cluster on this machine (a real
    redis-server, the cluster key, each node's TLS listener trusting the other's certificate
    through tls_ca): the key goes client -> gpu1's daemon -> TLS -> gpu2's daemon -> shim's
    socket, and the echo back the same way.

Real trainq, trainqd and redis-server, simulated GPUs. Usage: typing.py BUILD/trainq [KEYS]"""
import fcntl
import json
import os
import pty
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

KEYS = 100


class Term:
    def __init__(self, argv, env):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

        def leader():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     preexec_fn=leader)
        os.close(slave)
        self.seen = b""

    def read_until(self, needle, timeout=60):
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            if not select.select([self.master], [], [], max(deadline - time.monotonic(), 0))[0]:
                raise SystemExit(f"no {needle!r} in {timeout}s: {self.seen[-300:]!r}")
            self.seen += os.read(self.master, 65536)
        self.seen = self.seen[self.seen.index(needle) + len(needle):]

    def key_to_echo(self, key):
        start = time.perf_counter()
        os.write(self.master, key)
        self.read_until(key)
        return (time.perf_counter() - start) * 1000

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)


def measure(term, keys):
    # A few keys first: the program's first read, the daemon's first sample, are not typing.
    for _ in range(5):
        term.key_to_echo(b"w")
    times = []
    for i in range(keys):
        times.append(term.key_to_echo(bytes([ord("a") + i % 26])))
        time.sleep(0.01)  # as a fast typist's keys arrive, not one burst
    return times


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(trainq, root, gpus):
    """Two nodes, gpu1 and gpu2, as docs/cluster.md sets them up, addresses on loopback; the
    environment of a user of gpu1, and the processes to stop."""
    redis_port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    cert, key = os.path.join(root, "node.pem"), os.path.join(root, "node.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=gpu",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    trainqd = os.path.join(os.path.dirname(trainq), "trainqd")
    key_file = os.path.join(root, "cluster.key")
    subprocess.run([trainqd, "--new-cluster-key", key_file], check=True, capture_output=True)
    envs = {}
    for name in ("gpu1", "gpu2"):
        state = os.path.join(root, name)
        os.makedirs(state)
        with open(os.path.join(state, "config.toml"), "w") as f:
            f.write(f'store = "redis://127.0.0.1:{redis_port}/0"\nnode_name = "{name}"\n'
                    f'node_address = "127.0.0.1"\nlisten = ["127.0.0.1:{free_port()}"]\n'
                    f'tls_cert = "{cert}"\ntls_key = "{key}"\ntls_ca = "{cert}"\n'
                    f'cluster_key_file = "{key_file}"\nheartbeat_interval = "200ms"\n')
        envs[name] = dict(os.environ, TRAINQ_STATE_DIR=state, TRAINQ_FAKE_GPUS=gpus,
                          TERM="xterm")
        envs[name].pop("XDG_STATE_HOME", None)
        subprocess.run([trainq, "daemon"], env=envs[name], check=True, capture_output=True)
    # Both nodes up before the session asks for gpu2.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        nodes = subprocess.run([trainq, "nodes", "--json"], env=envs["gpu1"],
                               capture_output=True, text=True).stdout
        if nodes and sum(n["state"] == "up" for n in json.loads(nodes)["nodes"]) == 2:
            break
        time.sleep(0.2)
    return envs, redis


def main():
    trainq = os.path.abspath(sys.argv[1])
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else KEYS
    root = tempfile.mkdtemp(prefix="tq-typing-", dir="/tmp")
    state = os.path.join(root, "state")
    os.makedirs(state)
    gpus = os.path.join(root, "gpus.json")
    with open(gpus, "w") as f:
        json.dump({"gpus": [{"uuid": "GPU-sim-0", "name": "Simulated", "memory_total": "80GiB",
                             "memory_used_by_others": 0, "utilization": 0}]}, f)
    env = dict(os.environ, TRAINQ_STATE_DIR=state, TRAINQ_FAKE_GPUS=gpus, TERM="xterm")
    env.pop("XDG_STATE_HOME", None)
    rows = []
    envs, redis = {}, None
    try:
        subprocess.run([trainq, "daemon"], env=env, check=True, capture_output=True)
        envs, redis = start_cluster(trainq, root, gpus)
        ways = [("a local terminal", ["cat"], env),
                ("script(1) relaying a second terminal", ["script", "-qfc", "cat", "/dev/null"],
                 env),
                ("`trainq shell -- cat`", [trainq, "shell", "--gpus", "1", "--", "cat"], env),
                ("`trainq shell --node gpu2 -- cat` from gpu1 (two daemons, TLS between them)",
                 [trainq, "shell", "--node", "gpu2", "--", "cat"], envs["gpu1"])]
        for label, argv, argv_env in ways:
            term = Term(argv, argv_env)
            try:
                if argv[0] == trainq:
                    term.read_until(b"GPU 0\r\n")
                times = measure(term, keys)
            finally:
                term.close()
            times.sort()
            rows.append((label, statistics.median(times), times[int(len(times) * 0.9) - 1],
                         times[-1]))
    finally:
        for e in [env, *envs.values()]:
            subprocess.run([trainq, "daemon", "stop"], env=e, capture_output=True)
        if redis:
            redis.kill()
            redis.wait()
        shutil.rmtree(root, ignore_errors=True)
    print(f"{keys} keys each, 10 ms apart; machine: {os.cpu_count()} cores; trainq: {trainq}")
    print("| the program `cat` on | key to echo, median ms | p90 ms | worst ms |")
    print("| --- | --- | --- | --- |")
    for label, med, p90, worst in rows:
        print(f"| {label} | {med:.2f} | {p90:.2f} | {worst:.2f} |")


if __name__ == "__main__":
    main()
