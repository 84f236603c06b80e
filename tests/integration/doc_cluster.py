"""A cluster set up as docs/cluster.md says, as a test fixture: Redis with the docs' redis.conf
lines and ACL, and shared nodes (`shared = true`, root daemons for every user) each with the
docs' config.toml — the node user and its password file, `listen` with the node's own TLS
certificate, the cluster key — read from the docs and changed only in addresses and paths.
Users act through their own CLI (real local users from the `people` fixture).

The nodes trust each other's certificates through `tls_ca` (a bundle of every node's
self-signed certificate, made with the docs' command), as "TLS between nodes" says."""
import os
import shlex
import shutil
import subprocess
import tempfile

import pytest

from conftest import free_port, trainqd_binary, wait_for
from test_cluster_docs import NODE_PASSWORD, DocRedis, block_after, documented_acl
from test_shared import Shared

# The cluster's times scaled down from the defaults (node_timeout 300 s, heartbeat 10 s):
# 10 s leaves a node room to learn of an outage of the store before its jobs' fence lapses
# (docs/cluster.md, "When the store is away").
FAST = {"heartbeat_interval": "200ms", "node_timeout": "10s", "leader_lease": "1s",
        "grace_period": "500ms", "lost_node_wait": "1s"}


def make_cert(root, name):
    """The node's self-signed certificate, made by docs/cluster.md's command ("TLS between
    nodes") with the node's name, address and paths."""
    lines = block_after("A self-signed certificate per node", "console")
    command = " ".join(line.rstrip("\\").strip() for line in lines)
    assert command.startswith("# openssl req -x509 "), command
    cert, key = os.path.join(root, f"{name}.pem"), os.path.join(root, f"{name}.key")
    for old, new in [("/CN=gpu1", f"/CN={name}"), ("IP:10.0.0.1", "IP:127.0.0.1"),
                     ("/etc/trainq/gpu1.key", key), ("/etc/trainq/gpu1.pem", cert)]:
        assert old in command, f"docs/cluster.md's certificate command no longer has {old}"
        command = command.replace(old, new)
    subprocess.run(shlex.split(command[2:]), check=True, capture_output=True)
    return cert, key


class DocNode(Shared):
    """One node: a shared daemon with the docs' node config."""

    def __init__(self, people, name, store_port, key_file, password_file, ca_file, extra):
        super().__init__(people)
        self.name = name
        self.cert, self.key = make_cert(self.root, name)
        self.port = free_port()
        self.store_port = store_port
        self.key_file, self.password_file, self.ca_file = key_file, password_file, ca_file
        self.extra = dict(FAST)
        self.extra.update(extra)
        self.write_config()
        self.extra_env = {}
        self.wrap = ()

    def write_config(self):
        text = "\n".join(block_after("2. **Each node**", "toml")) + "\n"
        for old, new in [("10.0.0.10:6379", f"127.0.0.1:{self.store_port}"),
                         ("/etc/trainq/redis-password", self.password_file),
                         ('node_name = "gpu1"', f'node_name = "{self.name}"'),
                         ("10.0.0.1:7070", f"127.0.0.1:{self.port}"),
                         ('"10.0.0.1"', '"127.0.0.1"'),
                         ("/etc/trainq/gpu1.pem", self.cert), ("/etc/trainq/gpu1.key", self.key),
                         ("/etc/trainq/nodes-ca.pem", self.ca_file)]:
            assert old in text, f"docs/cluster.md's node config no longer has {old}"
            text = text.replace(old, new)
        if not self.ca_file:  # a node told no CA: the line goes
            text = "\n".join(l for l in text.splitlines() if not l.startswith("tls_ca ")) + "\n"
        lines = [f"cluster_key_file = \"{self.key_file}\"", "cpu_slots = 16",
                 'sample_interval = "100ms"', f'admin_group = "{self.people["admins"]}"']
        lines += [f"{k} = \"{v}\"" for k, v in self.extra.items()]
        with open(os.path.join(self.state_dir, "config.toml"), "w") as f:
            f.write(text + "\n".join(lines) + "\n")

    def start(self, *flags):
        super().start(*flags, env=dict(self.extra_env), wrap=self.wrap)

    def own_host_name(self, hosts_file):
        """As "Two nodes on one machine" says: the daemon (and its jobs) in a UTS namespace
        whose host name is the node's, seeing `hosts_file` as /etc/hosts (a test does not
        edit the machine's)."""
        self.wrap = ("unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c",
                     f'mount --bind {hosts_file} /etc/hosts && hostname {self.name} && exec "$@"',
                     "sh")

    def point_store_at(self, port):
        """Points the node at another Redis address (a proxy) before it starts."""
        self.store_port = port
        self.write_config()


class DocCluster:
    def __init__(self, people, names, config=None, node_config=None):
        self.root = tempfile.mkdtemp(prefix="tq-doccluster-", dir="/tmp")
        self.redis = DocRedis(self.root, documented_acl())
        self.password_file = os.path.join(self.root, "redis-password")
        with open(os.open(self.password_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(NODE_PASSWORD + "\n")
        # The cluster key, made as the docs say, and one copy of it for every node.
        make_key = block_after("Every node also needs the same **cluster key**", "console")[0]
        assert make_key.startswith("# trainqd --new-cluster-key "), make_key
        self.key_file = os.path.join(self.root, "cluster.key")
        subprocess.run([trainqd_binary(), "--new-cluster-key", self.key_file], check=True,
                       capture_output=True)
        self.ca_file = os.path.join(self.root, "nodes-ca.pem")
        self.nodes = {}
        for name in names:
            extra = dict(config or {})
            extra.update((node_config or {}).get(name, {}))
            self.nodes[name] = DocNode(people, name, self.redis.port, self.key_file,
                                       self.password_file, self.ca_file, extra)
        with open(self.ca_file, "w") as f:
            for n in self.nodes.values():
                with open(n.cert) as c:
                    f.write(c.read())
        os.chmod(self.ca_file, 0o644)

    def start(self):
        for n in self.nodes.values():
            n.start()
        first = next(iter(self.nodes.values()))
        wait_for(lambda: len([n for n in self.listing(first)["nodes"] if n["state"] == "up"])
                 == len(self.nodes), timeout=20, what="every node up")

    def listing(self, node):
        import json
        proc = node.trainq_as("root", "nodes", "--json")
        return json.loads(proc.stdout) if proc.returncode == 0 else {"nodes": []}

    def logs(self):
        return "\n".join(f"== {name}\n{n.daemon_log()[-4000:]}" for name, n in self.nodes.items())

    def cleanup(self):
        for n in self.nodes.values():
            n.cleanup()
        self.redis.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def doc_cluster(people):
    made = []

    def make(names=("gpu1", "gpu2"), **kw):
        made.append(DocCluster(people, names, **kw))
        return made[-1]

    yield make
    for c in made:
        c.cleanup()
