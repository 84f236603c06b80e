"""Black-box harness: the real trainq and trainqd binaries, a real daemon, simulated GPUs.

Each test gets a fresh state dir with its own config and simulated-GPU file, and drives the
CLI exactly as a user would (plus raw HTTP on the daemon's socket where the API is the point).
Nothing here fakes trainq itself. At the end of a test the daemon is stopped, every process
of the instance is killed by pid (found through its environment, which names the state dir),
and the daemon's log is checked for sanitizer reports.
"""
import glob
import json
import os
import random
import pwd
import uuid
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_TRAIN = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "fake_train.py"))
GIB = 1 << 30
MIB = 1 << 20
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ERROR: UndefinedBehaviorSanitizer")


def trainq_binary():
    path = os.environ.get("TRAINQ_BIN")
    if not path:
        pytest.fail("TRAINQ_BIN is not set; run the integration tests through ctest")
    return path


def trainqd_binary():
    path = os.environ.get("TRAINQD_BIN")
    if not path:
        pytest.fail("TRAINQD_BIN is not set; run the integration tests through ctest")
    return path


def wait_for(predicate, timeout=15.0, interval=0.02, what="condition"):
    """Polls predicate until it returns a truthy value; fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def process_gone(pid):
    """True when pid no longer runs: absent from /proc, or a zombie nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


def read_json(path):
    """The JSON a job wrote atomically, or None while it has not."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def check_no_sanitizer_report(text, what):
    for mark in SANITIZER_MARKS:
        assert mark not in text, f"sanitizer report in {what}:\n{text[-4000:]}"


class HttpAnswer:
    def __init__(self, raw):
        self.raw = raw
        self.status = None
        self.body = None
        self.data = b""
        if not raw:
            return
        head, _, body = raw.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                body = body[:int(value)]  # the first answer only
        self.data = body
        try:
            self.body = json.loads(body) if body else None
        except ValueError:  # a log's bytes, not JSON
            self.body = None

    @property
    def error_code(self):
        return self.body["error"]["code"] if isinstance(self.body, dict) else None


class Trainq:
    """One trainq instance: a state dir, its simulated GPUs and the CLI."""

    def __init__(self, root, gpus, config, state_subdir="state"):
        self.root = root
        self.state_dir = os.path.join(root, state_subdir)
        os.makedirs(self.state_dir)
        self.socket_path = os.path.join(self.state_dir, "trainq.sock")
        self.gpu_file = os.path.join(root, "gpus.json")
        self.usage_dir = os.path.join(root, "usage")
        os.makedirs(self.usage_dir)
        self.work = os.path.join(root, "work")
        os.makedirs(self.work)
        self.set_gpus(gpus)
        self.write_config(config)
        self.env = dict(os.environ)
        self.env["TRAINQ_STATE_DIR"] = self.state_dir
        self.env["TRAINQ_FAKE_GPUS"] = self.gpu_file
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        self.env.pop("XDG_STATE_HOME", None)

    def write_config(self, config):
        # JSON strings, numbers and arrays of strings are valid TOML values.
        lines = [f"{k} = {json.dumps(v)}" for k, v in config.items()]
        with open(os.path.join(self.state_dir, "config.toml"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def set_gpus(self, gpus, **extra):
        """Rewrites the simulated GPU file (atomically); the daemon re-reads it every sample."""
        doc = {"gpus": gpus, "usage_dir": self.usage_dir}
        doc.update(extra)
        tmp = self.gpu_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.gpu_file)

    def path(self, name):
        return os.path.join(self.work, name)

    # --- the CLI ---

    def run(self, *args, check=True, timeout=60, **kw):
        proc = subprocess.run([trainq_binary(), *args], env=kw.pop("env", self.env),
                              cwd=kw.pop("cwd", self.work), capture_output=True, text=True,
                              timeout=timeout, **kw)
        check_no_sanitizer_report(proc.stderr, f"stderr of trainq {' '.join(args)}")
        if check and proc.returncode != 0:
            raise AssertionError(f"trainq {' '.join(args)} exited {proc.returncode}\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def submit(self, *opts, cmd):
        out = self.run("submit", *opts, "--", *cmd).stdout.strip()
        return int(out)

    def fake_job(self, *args):
        """argv of the fake training job, told where the simulated usage files go."""
        return [sys.executable, FAKE_TRAIN, "--usage-dir", self.usage_dir, *args]

    def show(self, job_id):
        return json.loads(self.run("show", str(job_id), "--json").stdout)

    def state(self, job_id):
        return self.show(job_id)["state"]

    def wait_state(self, job_id, states, timeout=20.0):
        states = {states} if isinstance(states, str) else set(states)
        seen = []

        def reached():
            job = self.show(job_id)
            seen[:] = [job]
            return job if job["state"] in states else None

        try:
            return wait_for(reached, timeout=timeout, what=f"job {job_id} to reach {states}")
        except AssertionError as e:
            job = seen[0] if seen else {}
            attempts = [(a["n"], a["state"], a["end_reason"]) for a in job.get("attempts", [])]
            raise AssertionError(f"{e}\nlast seen: {job.get('state')} ({job.get('reason')}), "
                                 f"attempts {attempts}\nrun dirs:\n{self.run_dirs_text(job_id)}"
                                 f"\ndaemon log:\n{self.daemon_log()[-3000:]}")

    def ls(self, *opts):
        return json.loads(self.run("ls", "--json", *opts).stdout)

    def gpus(self):
        return json.loads(self.run("gpus", "--json").stdout)

    # --- the daemon ---

    def api(self, method, target, body=None, timeout=10, headers=None):
        """One HTTP request on the daemon's socket (no daemon is started for it)."""
        data = b"" if body is None else (body if isinstance(body, bytes) else
                                         json.dumps(body).encode())
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (f"{method} {target} HTTP/1.1\r\nHost: trainq\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\n{extra}"
                f"Content-Length: {len(data)}\r\n\r\n")
        return self.raw_request(head.encode() + data, timeout=timeout)

    def raw_request(self, data, half_close=True, timeout=10):
        """Sends bytes as they are and reads until the daemon closes the connection."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.socket_path)
            try:
                s.sendall(data)
                if half_close:
                    s.shutdown(socket.SHUT_WR)
            except BrokenPipeError:
                pass  # the daemon answered (413, say) and closed before reading it all
            chunks = []
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        return HttpAnswer(b"".join(chunks))

    def start_daemon(self):
        self.run("daemon")
        return self.daemon_pid()

    def daemon_pid(self):
        """The running daemon's pid from its status route, None when none answers."""
        try:
            answer = self.api("GET", "/v1/status", timeout=5)
        except OSError:
            return None
        return answer.body["pid"] if answer.status == 200 else None

    def kill_daemon(self):
        """kill -9 of the daemon; returns once it is gone."""
        pid = self.daemon_pid()
        assert pid, "no daemon answers"
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: process_gone(pid), timeout=10, what=f"daemon {pid} to die")
        return pid

    def daemon_log(self):
        path = os.path.join(self.state_dir, "daemon.log")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    def run_dir(self, job_id, attempt=1):
        return os.path.join(self.state_dir, "runs", str(job_id), str(attempt))

    def run_dirs_text(self, job_id):
        """The records of every attempt of a job, for failure messages."""
        out = []
        base = os.path.join(self.state_dir, "runs", str(job_id))
        for attempt in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            for name in ("shim.json", "exit.json", "output.log"):
                path = os.path.join(base, attempt, name)
                text = open(path, errors="replace").read()[-1000:] if os.path.exists(path) else "-"
                out.append(f"{attempt}/{name}: {text}")
        return "\n".join(out)

    def processes(self):
        """Pids of every process of this instance (daemon, shims, jobs and their children):
        they all carry TRAINQ_STATE_DIR in their environment."""
        return processes_of_state_dir(self.state_dir)

    def cleanup(self):
        self.run("daemon", "stop", check=False, timeout=30)
        # Jobs outlive the daemon by design: stop whatever this instance left running.
        kill_until_gone(self.processes)
        remove_cgroups(self.state_dir)
        check_no_sanitizer_report(self.daemon_log(), f"{self.state_dir}/daemon.log")


def cgroup_name(run_dir):
    """The attempt's cgroup name (AttemptCgroupName): JOB-N and the FNV-1a hash of the run dir."""
    h = 2166136261
    for b in run_dir.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    job, n = run_dir.rstrip("/").split("/")[-2:]
    return f"{job}-{n}-{h:08x}"


def remove_cgroups(state_dir):
    """A shim killed with its daemon leaves its attempt's (empty) cgroup: removed here."""
    for run_dir in glob.glob(os.path.join(state_dir, "runs", "*", "*")):
        name = cgroup_name(run_dir)
        for d in (f"/sys/fs/cgroup/trainq.slice/{name}", f"/sys/fs/cgroup/memory/trainq/{name}",
                  f"/sys/fs/cgroup/pids/trainq/{name}"):
            try:
                os.rmdir(d)
            except OSError:
                pass


def live_environs():
    """(pid, environment as a list of b"K=V") of every live process but this one."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if not process_gone(int(entry)):
            yield int(entry), environ


def processes_of_state_dir(state_dir):
    """Live pids (this one aside) whose environment names TRAINQ_STATE_DIR=state_dir."""
    mark = f"TRAINQ_STATE_DIR={state_dir}".encode()
    return [pid for pid, environ in live_environs() if mark in environ]


def node_processes(state_dir):
    """Live pids of the processes a cluster node runs: its daemon and shims (their
    TRAINQ_STATE_DIR is the node's) and the jobs it started (their TRAINQ_RUN_DIR is under
    its runs dir). A job's TRAINQ_STATE_DIR is its submitter's, whichever node runs it."""
    own, runs = f"TRAINQ_STATE_DIR={state_dir}".encode(), f"TRAINQ_RUN_DIR={state_dir}/".encode()
    found = []
    for pid, environ in live_environs():
        run_dir = [v for v in environ if v.startswith(b"TRAINQ_RUN_DIR=")]
        if any(v.startswith(runs) for v in run_dir) if run_dir else own in environ:
            found.append(pid)
    return found


def kill_until_gone(find_pids, rounds=50):
    """SIGKILLs what find_pids() returns until it returns nothing (processes may fork)."""
    for _ in range(rounds):
        pids = find_pids()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def crash(find_pids, rounds=50):
    """A machine's sudden death, as far as processes go: every process is frozen first
    (SIGSTOP, until no new one appears), then killed, so none sees another die and records
    it (a shim writing its job's exit, say)."""
    frozen = set()
    for _ in range(rounds):
        pids = [p for p in find_pids() if p not in frozen]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            frozen.add(pid)
    kill_until_gone(find_pids, rounds)


def gpu(i, total="80GiB", others=0, **kw):
    d = {"uuid": f"GPU-sim-{i}", "name": "Simulated A100 80GB", "memory_total": total,
         "memory_used_by_others": others, "utilization": 0}
    d.update(kw)
    return d


DEFAULT_CONFIG = {"cpu_slots": 16, "sample_interval": "100ms", "grace_period": "1s",
                  "oom_backoff": "1s", "headroom": "256MiB"}


@pytest.fixture
def make_trainq():
    made = []

    def make(gpus=None, state_subdir="state", **config):
        cfg = dict(DEFAULT_CONFIG)
        cfg.update(config)
        root = tempfile.mkdtemp(prefix="tq-", dir="/tmp")
        t = Trainq(root, [gpu(0)] if gpus is None else gpus, cfg, state_subdir)
        made.append(t)
        return t

    yield make
    for t in made:
        try:
            t.cleanup()
        finally:
            shutil.rmtree(t.root, ignore_errors=True)


@pytest.fixture
def tq(make_trainq):
    return make_trainq()


@pytest.fixture
def foreign_process():
    """A live process outside trainq, to name in a simulated GPU's other_processes."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


# --- real local users (tests run as root) ---

def make_user(prefix, groups=()):
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    cmd = ["useradd", "-M", "-U", "-s", "/bin/sh"]
    if groups:
        cmd += ["-G", ",".join(groups)]
    subprocess.run(cmd + [name], check=True)
    return pwd.getpwnam(name)


@pytest.fixture(scope="module")
def people():
    admins = f"tqadm{uuid.uuid4().hex[:6]}"
    subprocess.run(["groupadd", admins], check=True)
    ada, bob = make_user("tqa"), make_user("tqb")
    carol = make_user("tqc", groups=[admins])
    yield {"ada": ada, "bob": bob, "carol": carol, "admins": admins}
    for u in (ada, bob, carol):
        subprocess.run(["userdel", u.pw_name], check=False)
    subprocess.run(["groupdel", admins], check=False)


# --- a cluster: one real redis-server, several trainqd nodes on this machine ---

def free_port():
    """A port nothing listens on, from below the kernel's ephemeral range: a port bind(0)
    returns is an ephemeral one, which any outgoing connection of a test running beside (a
    daemon's to Redis, a client's) may take before our daemon binds it ("Address already in
    use" on 0.0.0.0). Checked free on every address, then released."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(200):
        port = random.randrange(max(1024, low - 20000), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below the ephemeral range")


class RedisServer:
    """A real redis-server on a free local port, its data (AOF) in its own dir."""

    def __init__(self, root, appendfsync="always"):
        self.dir = os.path.join(root, "redis")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.appendfsync = appendfsync
        self.proc = None
        self.start()

    def start(self):
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not installed (scripts/deps.sh test installs it)")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", self.appendfsync, "--dir", self.dir,
             "--daemonize", "no", "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.answers, timeout=10, what=f"redis-server on port {self.port}")

    def answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.kill()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"


# lost_node_wait scaled down with node_timeout (300s and 60s by default).
CLUSTER_CONFIG = {"heartbeat_interval": "200ms", "node_timeout": "4s", "leader_lease": "1s",
                  "grace_period": "500ms", "node_address": "127.0.0.1", "lost_node_wait": "1s"}


class Cluster:
    """Nodes sharing one Redis: each a Trainq instance with its own state dir and GPUs."""

    def __init__(self, make_trainq, redis, count, gpus, config, names=None, node_config=None):
        self.redis = redis
        self.prefix = f"tq{uuid.uuid4().hex[:8]}:"
        self.nodes = {}
        # One cluster key, as docs/cluster.md makes it, shared by every node.
        self.key_dir = tempfile.mkdtemp(prefix="tq-key-", dir="/tmp")
        self.key_file = os.path.join(self.key_dir, "cluster.key")
        subprocess.run([trainqd_binary(), "--new-cluster-key", self.key_file], check=True,
                       capture_output=True)
        for i in range(count):
            name = names[i] if names else f"node{i}"
            cfg = dict(CLUSTER_CONFIG)
            cfg.update({"store": redis.url, "redis_prefix": self.prefix, "node_name": name,
                        "listen": [f"127.0.0.1:{free_port()}"], "cluster_key_file": self.key_file})
            cfg.update(config)
            cfg.update((node_config or {}).get(name, {}))  # what this node alone sets
            self.nodes[name] = make_trainq(gpus=[dict(g) for g in gpus], **cfg)
        for t in self.nodes.values():
            t.start_daemon()

    def node(self, name):
        return self.nodes[name]

    def processes(self, name):
        """What dies with node `name`: its daemon, shims and the jobs running there."""
        return lambda: node_processes(self.nodes[name].state_dir)

    def any(self):
        return next(iter(self.nodes.values()))

    def listing(self, via=None):
        return json.loads((via or self.any()).run("nodes", "--json").stdout)

    def leader(self, via=None):
        return wait_for(lambda: self.listing(via)["leader"], timeout=10, what="a leader")

    def node_of(self, job):
        return job["attempts"][-1]["node"]

    def logs(self):
        """Every node's daemon log, for failure messages."""
        return "\n".join(f"== {name}\n{t.daemon_log()[-3000:]}" for name, t in self.nodes.items())


@pytest.fixture
def redis_server():
    root = tempfile.mkdtemp(prefix="tq-redis-", dir="/tmp")
    servers = []

    def make(**kw):
        r = RedisServer(root, **kw)
        servers.append(r)
        return r

    yield make
    for r in servers:
        r.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def make_cluster(make_trainq, redis_server):
    made = []

    def make(count=3, gpus=None, redis=None, names=None, node_config=None, **config):
        c = Cluster(make_trainq, redis or redis_server(), count,
                    gpus if gpus is not None else [gpu(0)], config, names, node_config)
        made.append(c)
        return c
    yield make
    for c in made:
        shutil.rmtree(c.key_dir, ignore_errors=True)
