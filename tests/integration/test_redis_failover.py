"""docs/cluster.md's "Redis with failover" on one machine, its files as written: a master
redis-server and its replica with the documented ACL, three redis-sentinel processes, two
trainqd nodes on a redis+sentinel:// store. Submits run in a loop while the master is killed
with SIGKILL and brought back (the sentinels make it a replica): every submit that printed an
id is kept and runs once, the jobs running at the kill run on to a single successful attempt,
and submits are refused only during the failover, saying why, never hanging.

bench/redis_failover.py measures what a failover costs with the same pieces."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import free_port, trainqd_binary, wait_for
from test_cluster_docs import NODE_PASSWORD, block_after, doc_text, documented_acl

PASSWORDS = [  # the longer names first: one holds another
    ("NODE-SENTINEL-PASSWORD", "node-sentinel-pw"),
    ("REPLICA-PASSWORD", "replica-pw"),
    ("SENTINEL-PASSWORD", "sentinel-pw"),
]
MASTER = "trainq"
# Faster than the doc's, so a test fails over in about two seconds.
SENTINEL_TIMES = {"down-after-milliseconds": 1000, "failover-timeout": 2000}
# Only the test asks the sentinels how far they are; trainq's users cannot.
TEST_ADMIN = ("test-admin", "test-admin-pw")
SUBMIT_TIMEOUT = 15  # a submit that takes longer hangs


def filled(line):
    for name, value in PASSWORDS:
        line = line.replace(name, value)
    return line


class RespError(Exception):
    pass


class Resp:
    """A small RESP2 client: enough for ROLE, WAIT, SENTINEL and HGETALL."""

    def __init__(self, port, user=None, password=None, timeout=2):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")
        if password:
            self.call("AUTH", user, password)

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind in (b"$", b"*") and int(rest) < 0:
            return None
        if kind == b"$":
            return self.file.read(int(rest) + 2)[:-2].decode(errors="replace")
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RespError(f"unexpected reply {line!r}")

    def close(self):
        self.file.close()
        self.sock.close()


def ask(port, *args, user="trainq-node", password=NODE_PASSWORD):
    """One command on a fresh connection; None when the server is down or refuses."""
    try:
        r = Resp(port, user, password)
        try:
            return r.call(*args)
        finally:
            r.close()
    except (OSError, RespError):
        return None


class Failover:
    """The doc's Redis servers and sentinels on loopback, each on a free port in `root`."""

    def __init__(self, root, replicas=1):
        if shutil.which("redis-sentinel") is None:
            pytest.fail("redis-sentinel is not installed (scripts/deps.sh test installs it)")
        self.root = root
        self.ports = [free_port() for _ in range(1 + replicas)]
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.procs = {}
        self.acl = os.path.join(root, "users.acl")
        extra = [filled(l) for l in block_after("1. **Both Redis servers**")
                 if l.startswith("user ")]
        assert [l.split()[1] for l in extra] == ["trainq-replica", "trainq-sentinel"], extra
        with open(self.acl, "w") as f:
            f.write("\n".join(documented_acl() + extra) + "\n")
        assert "`redis2`'s also `replicaof 10.0.0.10 6379`" in doc_text()
        for i in range(len(self.ports)):
            self.write_server_conf(i)
            self.start_server(i)
        for i in range(len(self.sentinel_ports)):
            self.start_sentinel(i)
        try:
            wait_for(self.settled, timeout=20, what="the sentinels to find the master, its "
                     "replicas and each other")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    # --- the servers ---

    def conf(self, i):
        return os.path.join(self.root, f"redis{i}", "redis.conf")

    def write_server_conf(self, i):
        d = os.path.dirname(self.conf(i))
        os.makedirs(d)
        base = [l.replace("10.0.0.10", "127.0.0.1").replace("/etc/redis/users.acl", self.acl)
                for l in block_after("1. **Redis**")]
        failover = [filled(l) for l in block_after("Both `redis.conf` files get these")]
        assert failover[0].startswith("masteruser "), failover
        lines = base + failover + [f"port {self.ports[i]}", f"dir {d}", 'save ""',
                                   "daemonize no", f"logfile {d}/redis.log"]
        if i > 0:
            lines.append(f"replicaof 127.0.0.1 {self.ports[0]}")
        with open(self.conf(i), "w") as f:
            f.write("\n".join(lines) + "\n")

    def start_server(self, i):
        self.procs[("redis", i)] = subprocess.Popen(
            ["redis-server", self.conf(i)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: ask(self.ports[i], "PING") == "PONG", timeout=10,
                 what=f"redis-server {i} to answer")

    def role(self, port):
        answer = ask(port, "ROLE")
        return answer[0] if answer else None

    def master_index(self):
        """The server a majority of the sentinels names, if it answers as the master."""
        named = [self.named(i) for i in range(3)]
        for port in set(named):
            if port and named.count(port) >= 2 and self.role(port) == "master":
                return self.ports.index(port)
        return None

    def replicas_online(self):
        """How many replicas the master counts as in sync (INFO's "slaveN:...,state=online")."""
        i = self.master_index()
        info = None if i is None else ask(self.ports[i], "INFO", "replication")
        return None if info is None else info.count("state=online")

    def kill_master(self):
        """SIGKILL of the master; returns its index and when the kill was sent."""
        i = self.master_index()
        assert i is not None, "no master to kill"
        proc = self.procs[("redis", i)]
        at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return i, at

    def wait_promoted(self, old, timeout=20):
        return wait_for(lambda: (i := self.master_index()) is not None and i != old,
                        timeout=timeout, what="the sentinels to promote a replica")

    # --- the sentinels ---

    def sentinel_conf(self, i):
        return os.path.join(self.root, f"sentinel{i}", "sentinel.conf")

    def start_sentinel(self, i):
        d = os.path.dirname(self.sentinel_conf(i))
        os.makedirs(d, exist_ok=True)
        lines = []
        for l in block_after("2. **Three sentinels**"):
            l = filled(l.replace("10.0.0.10 6379", f"127.0.0.1 {self.ports[0]}"))
            for option, ms in SENTINEL_TIMES.items():
                l = re.sub(rf"^sentinel {option} {MASTER} \d+$", f"sentinel {option} {MASTER} {ms}",
                           l)
            lines.append(l)
        assert f"sentinel monitor {MASTER} 127.0.0.1 {self.ports[0]} 2" in lines, lines
        for option, ms in SENTINEL_TIMES.items():
            assert f"sentinel {option} {MASTER} {ms}" in lines, (option, lines)
        lines += [f"port {self.sentinel_ports[i]}", "bind 127.0.0.1", f"dir {d}",
                  f"logfile {d}/sentinel.log",
                  f"user {TEST_ADMIN[0]} on >{TEST_ADMIN[1]} allchannels +@all"]
        with open(self.sentinel_conf(i), "w") as f:
            f.write("\n".join(lines) + "\n")
        self.procs[("sentinel", i)] = subprocess.Popen(
            ["redis-sentinel", self.sentinel_conf(i)], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    def named(self, i):
        """The master's port as sentinel i names it to the nodes' user."""
        answer = ask(self.sentinel_ports[i], "SENTINEL", "get-master-addr-by-name", MASTER,
                     user="trainq-node", password=filled("NODE-SENTINEL-PASSWORD"))
        return int(answer[1]) if answer else None

    def sentinel_view(self, i):
        flat = ask(self.sentinel_ports[i], "SENTINEL", "master", MASTER, user=TEST_ADMIN[0],
                   password=TEST_ADMIN[1])
        return dict(zip(flat[::2], flat[1::2])) if flat else {}

    def settled(self):
        """Every sentinel knows the other two and the master's replicas, no failover runs,
        and the replicas are in sync: a kill now fails over."""
        want = str(len(self.ports) - 1)
        for i in range(3):
            v = self.sentinel_view(i)
            if (v.get("num-other-sentinels") != "2" or v.get("num-slaves") != want
                    or v.get("flags") != "master"):
                return False
        return self.replicas_online() == len(self.ports) - 1

    def describe(self):
        """What the sentinels and servers say now, for failure messages."""
        keys = ("flags", "port", "num-slaves", "num-other-sentinels", "failover-state")
        views = [{k: self.sentinel_view(i).get(k) for k in keys} for i in range(3)]
        roles = {p: ask(p, "ROLE") for p in self.ports}
        return f"sentinels {views}; servers {roles}"

    # --- what the nodes get ---

    def node_config(self, root):
        """docs' step 3 as config options, with this machine's sentinels and password files."""
        files = {"/etc/trainq/redis-password": NODE_PASSWORD,
                 "/etc/trainq/sentinel-password": filled("NODE-SENTINEL-PASSWORD")}
        text = "\n".join(block_after("3. **Each node's config**", "toml"))
        docs_hosts = "10.0.0.10:26379,10.0.0.11:26379,10.0.0.1:26379"
        assert docs_hosts in text, text
        text = text.replace(docs_hosts, ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports))
        for path, password in files.items():
            assert path in text, (path, text)
            local = os.path.join(root, os.path.basename(path))
            with open(os.open(local, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(password + "\n")
            text = text.replace(path, local)
        config = {}
        for line in text.splitlines():
            key, value = line.split(" = ", 1)
            config[key] = json.loads(value)
        return config

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class SentinelStore:
    """What a Cluster takes as its `redis`: here only its URL, the doc's sentinel URL."""

    def __init__(self, url):
        self.url = url


def restart_when_replaced(failover, old, done, times):
    """As systemd's Restart= would, once the sentinels have replaced it: the old master
    comes back and the sentinels make it a replica of the new one."""
    try:
        failover.wait_promoted(old)
        times["promoted"] = time.monotonic()
        failover.start_server(old)
    finally:
        done.set()


def submit(node, cmd, submits):
    """One `trainq submit`, recorded as (started, ended, exit code, stdout, stderr)."""
    start = time.monotonic()
    try:
        p = node.run("submit", "--gpus", "0", "--", *cmd, check=False, timeout=SUBMIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"trainq submit hung for {SUBMIT_TIMEOUT}s")
    submits.append((start, time.monotonic(), p.returncode, p.stdout.strip(), p.stderr.strip()))
    return submits[-1]


def submit_through_a_failover(nodes, failover, cmd, total, kill_after, deadline_s=120):
    """Submits in turn to `nodes` until `total` printed an id, killing the master after
    `kill_after` did. Returns the submits, when the kill was sent, and when the sentinels had
    promoted a replica ("promoted")."""
    submits, killed_at, accepted, times = [], None, 0, {}
    restarted = threading.Event()
    deadline = time.monotonic() + deadline_s
    while accepted < total:
        assert time.monotonic() < deadline, f"only {accepted} submits accepted"
        _, _, rc, _, _ = submit(nodes[len(submits) % len(nodes)], cmd, submits)
        accepted += rc == 0
        if killed_at is None and accepted == kill_after:
            old, killed_at = failover.kill_master()
            threading.Thread(target=restart_when_replaced,
                             args=(failover, old, restarted, times), daemon=True).start()
    assert restarted.wait(30), "the killed master was not restarted"
    return submits, killed_at, times


def refusals(submits, killed_at):
    """The refused submits, and when the first submit after the kill was accepted."""
    refused = [s for s in submits if s[2] != 0]
    recovered = min(s[0] for s in submits if s[2] == 0 and s[0] > killed_at)
    return refused, recovered


def store_jobs(failover):
    """Every job in the store with its attempts, read from the master as the nodes' user."""
    r = Resp(failover.ports[failover.master_index()], "trainq-node", NODE_PASSWORD)
    try:
        jobs = {}
        for job_id in range(1, int(r.call("GET", "trainq:next_id")) + 1):
            flat = r.call("HGETALL", f"trainq:job:{job_id}")
            job = dict(zip(flat[::2], flat[1::2]))
            attempts = []
            for n in range(1, int(job.get("attempt", "0")) + 1):
                flat = r.call("HGETALL", f"trainq:att:{job_id}:{n}")
                attempts.append(dict(zip(flat[::2], flat[1::2])))
            jobs[job_id] = (job, attempts)
        return jobs
    finally:
        r.close()


def overlapping(attempts):
    spans = sorted((int(a["started_at"]), int(a.get("ended_at") or 2**62)) for a in attempts)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


@pytest.fixture
def failover():
    root = tempfile.mkdtemp(prefix="tq-failover-", dir="/tmp")
    made = []

    def make(replicas=1):
        made.append(Failover(root, replicas))
        return made[-1]

    yield make
    for f in made:
        f.stop()
    shutil.rmtree(root, ignore_errors=True)


def test_submits_survive_a_killed_master(make_cluster, make_trainq, failover):
    f = failover()
    # The node's timeout is far above the failover's few seconds: this test is about the
    # store's failover, not the nodes' judgement of an outage (docs/cluster.md, "When the
    # store is away").
    cfg = f.node_config(f.root)
    cluster = make_cluster(count=2, redis=SentinelStore(cfg.pop("store")), redis_prefix="trainq:",
                           node_timeout="20s", **cfg)
    nodes = list(cluster.nodes.values())
    cluster.leader()
    ran = os.path.join(nodes[0].root, "ran.log")
    job = ["sh", "-c", f'echo "$TRAINQ_JOB_ID $TRAINQ_ATTEMPT" >> {ran}']

    long_jobs = [nodes[i].submit("--gpus", "0", cmd=["sleep", "8"]) for i in range(2)]
    for j in long_jobs:
        nodes[0].wait_state(j, "running")
    submits, killed_at, _ = submit_through_a_failover(nodes, f, job, total=500, kill_after=200)

    # Refused only from the kill to the first submit accepted after it, saying why.
    refused, recovered = refusals(submits, killed_at)
    assert refused, "no submit was refused: the kill did not land mid-loop"
    for start, end, rc, out, err in refused:
        assert killed_at <= start < recovered, (start - killed_at, recovered - killed_at, err)
        assert rc != 0 and out == "", (rc, out)
        assert "store unreachable" in err or "store: the write reached" in err, err
    assert any("store unreachable" in s[4] for s in refused), [s[4] for s in refused]
    assert recovered - killed_at < 45, recovered - killed_at

    # Every submit that printed an id is kept, and each job ran once.
    printed = [int(s[3]) for s in submits if s[2] == 0]
    assert len(printed) == 500 and len(set(printed)) == 500
    wanted = set(printed) | set(long_jobs)

    seen = {}

    def all_done():
        seen.update(store_jobs(f))
        return all(seen.get(j, ({}, []))[0].get("state") == "succeeded" for j in wanted)

    try:
        wait_for(all_done, timeout=60, what="every accepted job to succeed")
    except AssertionError as e:
        late = {j: (seen[j][0].get("state"), seen[j][0].get("reason"), seen[j][1])
                for j in sorted(wanted) if seen.get(j, ({}, []))[0].get("state") != "succeeded"}
        said = [f"{n}: {line}" for n, t in cluster.nodes.items()
                for line in t.daemon_log().splitlines()
                if any(f"job {j} " in line for j in list(late)[:3])]
        raise AssertionError(f"{e}\n{len(late)} not succeeded, e.g. {list(late.items())[:3]}\n"
                             + "\n".join(said)) from None
    jobs = seen
    runs = {}
    with open(ran) as fh:
        for line in fh:
            job_id, attempt = map(int, line.split())
            runs[job_id] = runs.get(job_id, 0) + 1
    for job_id, (job, attempts) in jobs.items():
        assert not overlapping(attempts), (job_id, attempts)
        assert runs.get(job_id, 0) <= max(len(attempts), 1), (job_id, runs.get(job_id), attempts)
    for job_id in printed:
        assert runs.get(job_id) == 1, (job_id, jobs[job_id])
    # The jobs running at the kill ran on: one attempt, its end recorded.
    for j in long_jobs:
        job, attempts = jobs[j]
        assert len(attempts) == 1 and attempts[0]["state"] == "succeeded", (j, attempts)


def test_check_config_reads_the_sentinel_options(make_trainq):
    """--check-config reads store_sentinel_password_file and judges the replica count, as the
    daemon does at start; it reaches no server."""
    t = make_trainq()
    subprocess.run([trainqd_binary(), "--new-cluster-key", os.path.join(t.state_dir, "cluster.key")],
                   check=True, capture_output=True)
    pw = os.path.join(t.root, "sentinel-password")
    store = {"store": "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/trainq/0",
             "store_sentinel_password_file": pw}

    def check(**config):
        t.write_config(config)
        return subprocess.run([trainqd_binary(), "--check-config", "--state-dir", t.state_dir],
                              capture_output=True, text=True, timeout=30)

    missing = check(**store)
    assert missing.returncode == 2, missing
    assert "store_sentinel_password_file:" in missing.stderr, missing.stderr
    with open(os.open(pw, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("secret\n")
    valid = check(**store)
    assert valid.returncode == 0, valid
    for bad, what in [({"store_min_replicas_acked": -1}, "store_min_replicas_acked: expected"),
                      ({"store": "redis://127.0.0.1/0"},
                       "store_sentinel_password_file: set, but store is not"),
                      ({"store": "redis+sentinel://127.0.0.1/"}, "master name")]:
        refused = check(**dict(store, **bad))
        assert refused.returncode == 2 and what in refused.stderr, (bad, refused)
        assert "secret" not in refused.stderr
