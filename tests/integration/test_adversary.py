"""A cluster under attack, each attack as it was first reproduced (docs/operations.md, "Who
can do what"): two shared nodes (root daemons running jobs as their users) on one real
redis-server, real local users, the attacker holding Redis write access or a user's token.
Each test shows the attack now does no harm."""
import hashlib
import hmac
import http.client
import json
import os
import secrets
import subprocess
import time
import urllib.parse

import pytest

from conftest import CLUSTER_CONFIG, free_port, trainqd_binary, wait_for
from test_shared import Shared


class Node(Shared):
    def __init__(self, people, name, redis, prefix, key_file):
        self.api_port = free_port()
        cfg = dict(CLUSTER_CONFIG)
        cfg.update({"store": redis.url, "redis_prefix": prefix, "node_name": name,
                    "listen": [f"127.0.0.1:{self.api_port}"], "cluster_key_file": key_file})
        super().__init__(people, **cfg)
        self.name = name

    def api(self, method, target, token=None, authorization=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.api_port, timeout=20)
        headers = {"Authorization": authorization or f"Bearer {token}"}
        conn.request(method, target, headers=headers)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status, body

    def token_for(self, user, role):
        out = self.trainq_as("root", "token", "create", f"t{secrets.token_hex(4)}", "--role", role,
                             "--user", user, "--json", check=0).stdout
        return json.loads(out)["token"]


@pytest.fixture
def cluster(people, redis_server, tmp_path):
    redis = redis_server()
    prefix = f"tq{secrets.token_hex(4)}:"
    key_file = str(tmp_path / "cluster.key")
    subprocess.run([trainqd_binary(), "--new-cluster-key", key_file], check=True)
    nodes = [Node(people, name, redis, prefix, key_file) for name in ("n1", "n2")]
    for n in nodes:
        n.start()
    for n in nodes:
        wait_for(lambda n=n: len(json.loads(n.trainq_as("root", "nodes", "--json",
                                                        check=0).stdout)["nodes"]) == 2,
                 what="both nodes to join")

    def cli(*args):
        return subprocess.run(["redis-cli", "-p", str(redis.port), *args], capture_output=True,
                              text=True, check=True).stdout.strip()

    yield {"nodes": nodes, "redis": cli, "prefix": prefix, "key": key_file}
    for n in nodes:
        n.cleanup()


def encode(values):
    """A list of strings as the Redis store keeps it: LEN:TEXT for each."""
    return "".join(f"{len(v.encode())}:{v}" for v in values)


def test_a_job_rewritten_in_redis_to_run_as_root_is_refused(cluster, people):
    n1, n2 = cluster["nodes"]
    ada = people["ada"]
    ran = os.path.join(n1.work, "first-uid")
    first = n1.submit_as("ada", cmd=["sh", "-c", f"id -u > {ran}; sleep 2"])
    second = n1.submit_as("ada", "--after", str(first), cmd=["true"])
    # Root's job, as an attacker with Redis write access would make it of ada's.
    stolen = os.path.join(n1.work, "stolen")
    cluster["redis"]("HSET", f"{cluster['prefix']}job:{second}", "user", "root", "cwd", "/root",
                     "command", encode(["sh", "-c", f"id > {stolen}; head -1 /etc/shadow >> "
                                                    f"{stolen}"]))
    n1.wait_state(first, "succeeded")
    with open(ran) as f:
        assert int(f.read()) == ada.pw_uid  # an untouched job runs, as its user
    job = n2.wait_state(second, {"failed", "succeeded"})
    assert job["state"] == "failed", job
    assert "does not match the signature node 'n1' made" in job["reason"], job["reason"]
    assert "refused to run it" in job["reason"]
    time.sleep(0.5)
    assert not os.path.exists(stolen)


def test_a_token_written_into_redis_is_nobodys(cluster):
    n1, n2 = cluster["nodes"]
    token = "tq_" + secrets.token_hex(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    p, cli = cluster["prefix"], cluster["redis"]
    cli("HSET", f"{p}token:{digest}", "name", "forged", "hash", digest, "role", "admin", "user",
        "root", "created_at", "1", "expires_at", "0", "revoked_at", "0", "created_by", "root")
    cli("HSET", f"{p}token_names", "forged", digest)
    cli("RPUSH", f"{p}tokens", digest)
    for n in (n1, n2):
        status, body = n.api("GET", "/v1/status", token=token)
        assert status == 401, body
        assert b"not made by a node of this cluster" in body, body
        status, body = n.api("POST", "/v1/daemon/stop", token=token)
        assert status == 401, body
    real = n1.token_for("root", "admin")  # made by a node: good on every node
    assert n2.api("GET", "/v1/status", token=real)[0] == 200
    listed = json.loads(n2.trainq_as("root", "token", "ls", "--json", check=0).stdout)["tokens"]
    assert {t["name"]: t["state"] for t in listed}["forged"] == "unsigned", listed


def running_on(node, other, user, cmd):
    job_id = node.submit_as(user, "--node", other.name, "--gpus", "0", cmd=cmd)
    job = node.wait_state(job_id, "running")
    assert job["attempts"][-1]["node"] == other.name
    return job_id


def test_a_smuggled_log_request_reaches_no_other_route(cluster):
    n1, n2 = cluster["nodes"]
    mine = running_on(n1, n2, "ada", ["sh", "-c", "echo hello from n2; sleep 60"])
    theirs = running_on(n1, n2, "bob", ["sleep", "60"])
    token = n1.token_for(n1.people["ada"].pw_name, "submit")
    for smuggled in (f"POST /v1/jobs/{theirs}/cancel", "POST /v1/daemon/stop"):
        value = f"1 HTTP/1.1\r\nHost: n2\r\n\r\n{smuggled} HTTP/1.1\r\nX-Pad: x"
        status, body = n1.api("GET", f"/v1/jobs/{mine}/log?size=" + urllib.parse.quote(value),
                              token=token)
        assert status == 400, body
        assert b"size" in body, body
    assert n2.daemon.poll() is None, n2.daemon_log()[-2000:]
    assert n1.show(theirs)["state"] == "running"
    # The log itself still comes through n1, fetched from n2 with n1's signature.
    got = wait_for(lambda: (lambda r: r if "hello from n2" in r.stdout else None)(
        n1.trainq_as("ada", "logs", str(mine))), what="the proxied log")
    assert got.returncode == 0, got.stderr
    n1.trainq_as("root", "cancel", str(mine), str(theirs), check=0)


def signed(key_file, node, method, target, now_ms=None):
    """The Authorization header a node sends its peers (src/daemon/cluster_key.cc)."""
    with open(key_file, "rb") as f:
        key = f.read().rstrip()
    ms = str(now_ms if now_ms is not None else int(time.time() * 1000))
    text = "trainq peer v1\n" + "".join(f"{len(x.encode())}:{x}" for x in (node, ms, method,
                                                                           target))
    mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    return f"TrainqNode {node} {ms} {mac}"


def test_a_nodes_signature_reads_logs_and_nothing_else(cluster):
    n1, n2 = cluster["nodes"]
    victim = running_on(n1, n2, "bob", ["sh", "-c", "echo bobs output; sleep 60"])
    key = cluster["key"]
    log = f"/v1/jobs/{victim}/log?attempt=1&length=100&offset=0"
    wait_for(lambda: n2.api("GET", log, authorization=signed(key, "n1", "GET", log))[1]
             .startswith(b"bobs output"), what="the log through a node's request")
    for method, target in (("POST", f"/v1/jobs/{victim}/cancel"), ("POST", "/v1/daemon/stop"),
                           ("GET", "/v1/config"), ("POST", "/v1/tokens")):
        status, body = n2.api(method, target, authorization=signed(key, "n1", method, target))
        assert status == 403, (target, body)
        assert b"may only read a job's log" in body, body
    # The steps of a `trainq sbatch` job only for a part the node runs: this job has none there.
    steps = f"/v1/jobs/{victim}/steps?after=-1&rank=0"
    status, body = n2.api("GET", steps, authorization=signed(key, "n1", "GET", steps))
    assert status == 403 and b"holds no part of job" in body, body
    add = f"/v1/jobs/{victim}/steps"
    status, body = n2.api("POST", add, authorization=signed(key, "n1", "POST", add))
    assert status == 403 and b"may only read a job's log" in body, body
    # A signature for one target is no signature for another, nor an old one, nor another key.
    other = f"/v1/jobs/{victim}/log?attempt=1&length=100&offset=7"
    assert n2.api("GET", other, authorization=signed(key, "n1", "GET", log))[0] == 401
    stale = signed(key, "n1", "GET", log, now_ms=int(time.time() * 1000) - 600_000)
    assert n2.api("GET", log, authorization=stale)[0] == 401
    wrong = os.path.join(os.path.dirname(key), "other.key")
    subprocess.run([trainqd_binary(), "--new-cluster-key", wrong], check=True)
    assert n2.api("GET", log, authorization=signed(wrong, "n1", "GET", log))[0] == 401
    assert n2.show(victim)["state"] == "running"
    n2.trainq_as("root", "cancel", str(victim), check=0)


def test_a_store_open_to_the_network_without_a_password_is_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "config.toml").write_text('store = "redis://10.0.0.10:6379/0"\n')
    proc = subprocess.run([trainqd_binary(), "--check-config", "--state-dir", str(state)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc
    assert "store: Redis on 10.0.0.10 without a password" in proc.stderr, proc.stderr


@pytest.fixture
def shared_node(people):
    port = free_port()
    s = Shared(people, listen=[f"127.0.0.1:{port}"])
    s.listen_port = port
    s.start()
    yield s
    s.cleanup()


def test_another_users_env_values_and_webhook_are_hidden(shared_node, people):
    s = shared_node
    hook = "http://127.0.0.1:9/hook?token=hook-secret-123"
    job = s.submit_as("ada", "--env", "WANDB_API_KEY=env-secret-456", "--notify", hook,
                      cmd=["true"])
    s.wait_state(job, "succeeded")
    secrets_ = ("env-secret-456", "hook-secret-123")
    seen_by = {}
    for who in ("ada", "bob", "carol"):
        texts = [s.trainq_as(who, *args, check=0).stdout
                 for args in (("show", "--json", str(job)), ("show", str(job)),
                              ("ls", "--all", "--json"), ("diff", str(job), str(job)))]
        seen_by[who] = "\n".join(texts)
    for secret in secrets_:
        assert secret in seen_by["ada"], seen_by["ada"]      # the owner
        assert secret in seen_by["carol"], seen_by["carol"]  # an admin
        assert secret not in seen_by["bob"], seen_by["bob"]
    bobs = json.loads(s.trainq_as("bob", "show", "--json", str(job), check=0).stdout)
    assert bobs["record"]["env_overrides"] == ["WANDB_API_KEY=(hidden)"], bobs["record"]
    assert bobs["notify"] == "(hidden)"
    # A read token of bob's over TCP sees no more.
    token = json.loads(s.trainq_as("root", "token", "create", "bobread", "--role", "read",
                                   "--user", people["bob"].pw_name, "--json", check=0)
                       .stdout)["token"]
    conn = http.client.HTTPConnection("127.0.0.1", s.listen_port, timeout=20)
    for target in (f"/v1/jobs/{job}", "/v1/jobs?all=1"):
        conn.request("GET", target, headers={"Authorization": f"Bearer {token}"})
        body = conn.getresponse().read().decode()
        assert f'"id":{job}' in body and all(x not in body for x in secrets_), body
    conn.close()


ATTACK = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
if os.fork():
    print(os.getpid(), flush=True)  # the pid the daemon will see (SO_PEERCRED), then gone
    os._exit(0)
sys.stdin.readline()  # the pid is someone else's now
body = json.dumps({"command": ["x"], "gpus": 0, "gate": True})
s.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: trainq\r\nContent-Type: application/json\r\n"
          f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode())
answer = b""
while chunk := s.recv(65536):
    answer += chunk
print(answer.decode(errors="replace"), flush=True)
"""


def process_at(pid):
    """A root process with exactly `pid` (the kernel gives the next pid after ns_last_pid),
    as the pid's reuse by root's shim would; None if other processes kept taking it."""
    for _ in range(500):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        child = os.fork()
        if child == 0:
            os.execv("/bin/sleep", ["sleep", "300"])
        if child == pid:
            return child
        os.kill(child, 9)
        os.waitpid(child, 0)
    return None


def test_a_gate_cannot_name_a_process_that_took_its_pid(shared_node, people):
    s = shared_node
    ada = people["ada"]
    attacker = subprocess.Popen(["/usr/bin/python3", "-c", ATTACK, s.socket], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, user=ada.pw_uid,
                                group=ada.pw_gid, cwd=s.work)
    pid = int(attacker.stdout.readline())
    attacker.wait()  # the connecting process has exited; its child holds the connection
    victim = process_at(pid)
    assert victim, f"could not start a process at pid {pid}"
    try:
        attacker.stdin.write("go\n")
        attacker.stdin.flush()
        answer = attacker.stdout.read()
        assert " 400 " in answer.splitlines()[0], answer
        assert f"gate: process {pid} is not the caller's (it runs as uid 0" in answer, answer
        assert s.trainq_as("root", "ls", "--all", "--json", check=0).stdout.strip() == "[]"
        assert os.waitpid(victim, os.WNOHANG) == (0, 0)  # root's process was not touched
    finally:
        os.kill(victim, 9)
        os.waitpid(victim, 0)


def state_dir_bytes(s):
    total = 0
    for dirpath, _, names in os.walk(s.state_dir):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                pass
    return total


POST_AS = r"""
import http.client, json, socket, sys
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sys.argv[1])
conn = Conn("localhost", timeout=60)
conn.request("POST", "/v1/jobs", body=sys.stdin.buffer.read(),
             headers={"Content-Type": "application/json"})
r = conn.getresponse()
print(r.status, r.read().decode()[:600])
"""


def post_as(s, name, body):
    """POST /v1/jobs on the shared socket by the person `name`: (HTTP status, body)."""
    user = s.people[name]
    proc = subprocess.run(["python3", "-c", POST_AS, s.socket], input=json.dumps(body).encode(),
                          capture_output=True, timeout=60, user=user.pw_uid, group=user.pw_gid)
    status, _, text = proc.stdout.decode().partition(" ")
    return int(status), text


def test_one_user_cannot_fill_the_state_dir_or_the_queue(people):
    """Finding 6 as reproduced: a batch of 300 jobs sharing 8 x 120 KiB of environment grew the
    state dir by 411 MB; --array 0-99999 was queued whole (653 MB of daemon memory, 7.4 s for
    a default `ls`, 10.9 s for another user's submit)."""
    s = Shared(people, max_waiting_jobs_per_user=1000, max_stored_bytes_per_user="4MiB",
               paused=True)
    s.start()
    try:
        env = {f"BLOB{i}": "x" * (120 << 10) for i in range(8)}
        batch = {"defaults": {"cwd": s.work, "env": env},
                 "jobs": [{"command": ["true"]} for _ in range(300)]}
        before = state_dir_bytes(s)
        status, text = post_as(s, "ada", batch)
        assert status == 201, text
        grown = state_dir_bytes(s) - before
        assert grown < 8 << 20, f"300 jobs sharing 960 KiB of environment took {grown} bytes"

        # Past the waiting-jobs cap the whole array is refused at once, naming the option.
        r = s.trainq_as("ada", "submit", "--array", "0-99999", "--", "true")
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "max_waiting_jobs_per_user = 1000" in r.stderr, r.stderr
        assert "nothing was stored" in r.stderr, r.stderr
        assert len(json.loads(s.trainq_as("ada", "ls", "--json", check=0).stdout)) == 300
        # Each submit stores its own copy of the environment: the one that would take ada
        # past 4 MiB stored is refused, and nothing of it is kept.
        one = {"defaults": {"cwd": s.work, "env": env}, "jobs": [{"command": ["true"]}]}
        assert [post_as(s, "ada", one)[0] for _ in range(3)] == [201] * 3
        status, text = post_as(s, "ada", one)
        assert status == 507 and "max_stored_bytes_per_user = 4.0 MiB" in text, (status, text)
        assert len(json.loads(s.trainq_as("ada", "ls", "--json", check=0).stdout)) == 303

        # Another user's submits are not held by ada's caps.
        job = s.submit_as("bob", cmd=["true"])
        assert s.show(job)["user"] == people["bob"].pw_name
    finally:
        s.cleanup()
