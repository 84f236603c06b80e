"""docs/cluster.md's setup as written: its redis.conf lines and ACL file run a real
redis-server, its node config (the user in `store`, the password in store_password_file) a
real trainqd. Redis restarted by SIGTERM and by kill -9 keeps every job, token and node, and
ids go on; a default user that would make Redis drop the writes at a restart stops trainqd
at start, naming the fix (docs/cluster.md, "Redis ACL", "Durability")."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

from conftest import free_port, gpu, trainqd_binary, wait_for

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "cluster.md")
NODE_PASSWORD = "node-pw-not-in-any-log"


def doc_text():
    with open(DOC) as f:
        return f.read()


def block_after(marker, lang=""):
    """The first fenced block (```lang) after `marker` in docs/cluster.md, dedented."""
    text = doc_text()
    start = text.index(marker)
    m = re.compile(r"^( *)```" + re.escape(lang) + r"\n(.*?)^\1```", re.M | re.S).search(
        text, start)
    assert m, f"docs/cluster.md has no ```{lang} block after {marker!r}"
    indent = len(m.group(1))
    return [line[indent:] for line in m.group(2).splitlines()]


def documented_acl():
    lines = [l for l in block_after("## Redis ACL") if l.startswith("user ")]
    return [l.replace("NODE-PASSWORD", NODE_PASSWORD).replace("VIEW-PASSWORD", "view-pw")
            for l in lines]


class DocRedis:
    """redis-server run with docs/cluster.md's redis.conf lines (its address and ACL file's
    path moved here) and the given ACL file lines."""

    def __init__(self, root, acl, conf_lines=None):
        self.dir = os.path.join(root, "redis")
        os.makedirs(self.dir)
        self.port = free_port()
        acl_path = os.path.join(self.dir, "users.acl")
        with open(acl_path, "w") as f:
            f.write("\n".join(acl) + "\n")
        conf = conf_lines if conf_lines is not None else block_after("1. **Redis**")
        assert any(l.startswith("aclfile ") for l in conf), conf
        conf = [l.replace("10.0.0.10", "127.0.0.1").replace("/etc/redis/users.acl", acl_path)
                for l in conf]
        conf += [f"port {self.port}", f"dir {self.dir}", 'save ""', "daemonize no",
                 f"logfile {os.path.join(self.dir, 'redis.log')}"]
        self.conf = os.path.join(self.dir, "redis.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join(conf) + "\n")
        self.proc = None
        self.start()

    def start(self):
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not installed (scripts/deps.sh test installs it)")
        self.proc = subprocess.Popen(["redis-server", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_for(self.answers, timeout=10, what=f"redis-server on port {self.port}")

    def answers(self):
        """PONG to the node's user once the AOF is loaded (the default user is off, and
        an unauthenticated PING is answered NOAUTH even while loading)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(f"AUTH trainq-node {NODE_PASSWORD}\r\nPING\r\n".encode())
                answer = b""
                while answer.count(b"\r\n") < 2:
                    chunk = s.recv(256)
                    if not chunk:
                        break
                    answer += chunk
                return answer == b"+OK\r\n+PONG\r\n"
        except OSError:
            return False

    def restart(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=20)
        self.start()

    def log(self):
        with open(os.path.join(self.dir, "redis.log"), errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def doc_redis():
    root = tempfile.mkdtemp(prefix="tq-docredis-", dir="/tmp")
    made = []

    def make(acl=None, conf_lines=None):
        r = DocRedis(root, acl if acl is not None else documented_acl(), conf_lines)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()
    shutil.rmtree(root, ignore_errors=True)


def node_config(root, redis):
    """docs/cluster.md's step 2 config.toml, with the addresses and files of this machine:
    its TLS pair made here, its password file holding the node user's password."""
    cert, key = os.path.join(root, "gpu1.pem"), os.path.join(root, "gpu1.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=gpu1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    password_file = os.path.join(root, "redis-password")
    with open(os.open(password_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(NODE_PASSWORD + "\n")
    text = "\n".join(block_after("2. **Each node**", "toml")) + "\n"
    for old, new in [("10.0.0.10:6379", f"127.0.0.1:{redis.port}"),
                     ("/etc/trainq/redis-password", password_file),
                     ("10.0.0.1:7070", f"127.0.0.1:{free_port()}"),
                     ('"10.0.0.1"', '"127.0.0.1"'),
                     ("/etc/trainq/gpu1.pem", cert), ("/etc/trainq/gpu1.key", key),
                     ("/etc/trainq/nodes-ca.pem", cert)]:  # one node: its own certificate
        assert old in text, f"docs/cluster.md's node config no longer has {old}"
        text = text.replace(old, new)
    return text


def check_config(state_dir, *flags):
    return subprocess.run([trainqd_binary(), "--check-config", "--state-dir", state_dir, *flags],
                          capture_output=True, text=True, timeout=30)


def start_node(make_trainq, redis, extra=""):
    """A node with the doc's config. The doc's node is a shared daemon, which --check-config
    judges as written; the daemon here runs it as a personal one (its CLI's socket in its
    state dir), the rest unchanged."""
    t = make_trainq(gpus=[gpu(0)])
    text = node_config(t.root, redis)
    shared_dir = os.path.join(t.root, "shared-state")
    os.makedirs(shared_dir, mode=0o700)
    with open(os.path.join(shared_dir, "config.toml"), "w") as f:
        f.write(text + f'socket = "{os.path.join(t.root, "run", "trainq.sock")}"\n')
    # The cluster key, made as the doc says and copied to the node's state dir.
    make_key = block_after("Every node also needs the same **cluster key**", "console")[0]
    assert make_key == "# trainqd --new-cluster-key /var/lib/trainq/cluster.key", make_key
    key = os.path.join(shared_dir, "cluster.key")
    subprocess.run([trainqd_binary(), "--new-cluster-key", key], check=True, capture_output=True)
    checked = check_config(shared_dir)
    assert checked.returncode == 0 and "valid (shared)" in checked.stdout, checked
    shutil.copy2(key, os.path.join(t.state_dir, "cluster.key"))
    personal = text.replace("shared = true\n", "")
    with open(os.path.join(t.state_dir, "config.toml"), "a") as f:
        f.write(personal + extra)
    return t


def kept(t):
    """What the store keeps, as the CLI shows it: jobs with their attempts, tokens, nodes."""
    jobs = [t.show(j["id"]) for j in sorted(t.ls("--all"), key=lambda j: j["id"])]
    tokens = json.loads(t.run("token", "ls", "--json").stdout)["tokens"]
    nodes = json.loads(t.run("nodes", "--json").stdout)["nodes"]
    return {"jobs": [(j["id"], j["state"], [(a["n"], a["state"], a["node"])
                                           for a in j["attempts"]]) for j in jobs],
            "tokens": [(tok["name"], tok["role"]) for tok in tokens],
            "nodes": [(n["name"], n["address"]) for n in nodes]}


def test_the_documented_cluster_keeps_its_queue_across_redis_restarts(make_trainq, doc_redis):
    redis = doc_redis()
    t = start_node(make_trainq, redis, 'heartbeat_interval = "200ms"\n')
    t.start_daemon()
    ids = [t.submit(cmd=["true"]) for _ in range(3)]
    assert ids == [1, 2, 3]
    for i in ids:
        t.wait_state(i, "succeeded")
    t.run("token", "create", "laptop", "--role", "read")
    before = kept(t)
    assert ("laptop", "read") in before["tokens"], before
    for sig in (signal.SIGTERM, signal.SIGKILL):
        redis.restart(sig)
        after = wait_for(lambda: _or_none(lambda: kept(t)), timeout=15,
                         what="the node to read the store again")
        assert after == before, (sig, redis.log()[-2000:])
    assert "NOPERM" not in redis.log(), redis.log()[-2000:]
    # Ids go on from where they were, and the new job's run dir is its own.
    new = t.submit(cmd=["true"])
    assert new == 4
    t.wait_state(new, "succeeded")
    assert NODE_PASSWORD not in t.daemon_log()


def _or_none(read):
    try:
        return read()
    except AssertionError:  # a CLI call failed while the node reconnects
        return None


def test_a_default_user_that_would_drop_writes_stops_the_node_naming_the_fix(make_trainq,
                                                                              doc_redis):
    acl = documented_acl()
    acl[0] = "user default off"  # what docs/cluster.md said before: no commands at all
    redis = doc_redis(acl=acl)
    t = start_node(make_trainq, redis)
    proc = t.run("daemon", check=False)
    out = proc.stdout + proc.stderr + t.daemon_log()
    assert proc.returncode != 0, out
    assert "would drop trainq's writes when it restarts" in out, out
    assert "redis/redis#14541" in out, out
    assert "user default off resetkeys ~trainq:* resetchannels -@all +multi +exec" in out, out
    assert NODE_PASSWORD not in out


def test_appendonly_off_is_warned_about(make_trainq, doc_redis):
    conf = [l for l in block_after("1. **Redis**") if not l.startswith("append")]
    redis = doc_redis(conf_lines=conf + ["appendonly no"])
    t = start_node(make_trainq, redis)
    t.start_daemon()
    assert "appendonly off" in t.daemon_log(), t.daemon_log()[-2000:]


def test_check_config_wants_the_users_password_somewhere(doc_redis, tmp_path):
    redis = doc_redis()
    text = node_config(str(tmp_path), redis)
    cases = {
        "no-file": (re.sub(r"(?m)^store_password_file = .*\n", "", text),
                    "store: a user without a password; set store_password_file"),
        "empty-file": (text.replace(str(tmp_path / "redis-password"),
                                    str(tmp_path / "empty")), "holds no password"),
    }
    (tmp_path / "empty").write_text("\n")
    for name, (config, want) in cases.items():
        state = tmp_path / name
        state.mkdir(mode=0o700)
        (state / "config.toml").write_text(config.replace("shared = true\n", ""))
        proc = check_config(str(state))
        assert proc.returncode == 2 and want in proc.stderr, (name, proc)
        assert NODE_PASSWORD not in proc.stdout + proc.stderr
