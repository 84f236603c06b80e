"""The control plane may fail; the work may not (docs/cluster.md, "When the store is away").
On the cluster as the docs set it up (shared nodes, TLS, the cluster key, the docs' ACL):
Redis down for three times half of node_timeout stops no job and loses no end; one node cut
off from Redis alone still stops its job before another node runs it; a daemon whose event
loop is held past the fence stops no job."""
import json
import os
import signal
import socket
import threading
import time

from conftest import process_gone, wait_for
from doc_cluster import doc_cluster  # noqa: F401 (the fixture)

NODE_TIMEOUT_S = 10  # doc_cluster.FAST


def show(node, job_id):
    proc = node.trainq_as("root", "show", "--json", str(job_id))
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def wait_state(node, job_id, states, timeout=30):
    states = {states} if isinstance(states, str) else set(states)
    return wait_for(lambda: (lambda j: j if j and j["state"] in states else None)(
        show(node, job_id)), timeout=timeout, what=f"job {job_id} to reach {states}")


def pid_of(job):
    return job["attempts"][-1]["pid"]


class Proxy:
    """A TCP relay to Redis that the test can cut: the node behind it loses the store alone."""

    def __init__(self, target_port):
        from conftest import free_port
        self.port = free_port()
        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.conns = []
        self.cut_off = False
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.cut_off:
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target))
                except OSError:
                    client.close()
                    continue
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Every connection through the relay dropped, and new ones refused."""
        with self.lock:
            self.cut_off = True
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns = []

    def close(self):
        self.cut()
        self.listener.close()


def test_redis_down_for_three_half_node_timeouts_stops_no_job(doc_cluster):
    """TRAINQ_OUTAGE_SECONDS sets a longer outage, for the figure in docs/cluster.md."""
    c = doc_cluster()
    c.start()
    gpu1, gpu2 = c.nodes["gpu1"], c.nodes["gpu2"]
    outage = float(os.environ.get("TRAINQ_OUTAGE_SECONDS", 3 * NODE_TIMEOUT_S / 2))
    # Two long jobs, one on each node, by two users; a short one that ends during the outage.
    runs = str(int(outage + 15))
    long1 = gpu1.submit_as("ada", "--gpus", "1", "--node", "gpu1", cmd=["sleep", runs])
    long2 = gpu2.submit_as("bob", "--gpus", "1", "--node", "gpu2", cmd=["sleep", runs])
    short = gpu1.submit_as("ada", "--gpus", "0", "--node", "gpu2", cmd=["sleep", "6"])
    pids = {j: pid_of(wait_state(gpu1, j, "running")) for j in (long1, long2, short)}
    c.redis.stop()
    down_at = time.monotonic()
    failed = gpu1.trainq_as("ada", "ls")
    assert failed.returncode != 0 and "store unreachable" in failed.stderr, failed
    while time.monotonic() - down_at < outage:
        for j in (long1, long2):
            assert not process_gone(pids[j]), (
                f"job {j} stopped {time.monotonic() - down_at:.1f} s into the outage\n{c.logs()}")
        time.sleep(0.5)
    assert process_gone(pids[short]), "the short job should have ended during the outage"
    c.redis.start()
    for j in (long1, long2, short):
        job = wait_state(gpu1, j, "succeeded", timeout=60)
        assert len(job["attempts"]) == 1, (j, job["attempts"], c.logs())
        assert job["attempts"][0]["exit_code"] == 0, job["attempts"]
    # The ends: the short job's recorded once Redis answered; nobody judged a node lost.
    for n in c.nodes.values():
        log = n.daemon_log()
        assert "an outage of the store, not of this node" in log, log[-3000:]
        assert "lost: no heartbeat" not in log, log[-3000:]
        assert "stopped by self-fencing" not in log, log[-3000:]
    assert "recording its end" in gpu2.daemon_log(), gpu2.daemon_log()[-3000:]
    nodes = c.listing(gpu1)["nodes"]
    assert sorted((n["name"], n["state"]) for n in nodes) == [("gpu1", "up"), ("gpu2", "up")]


def test_a_node_cut_off_alone_stops_its_job_before_another_runs_it(doc_cluster):
    c = doc_cluster(names=("gpu1", "gpu2"))
    proxy = Proxy(c.redis.port)
    try:
        c.nodes["gpu2"].point_store_at(proxy.port)
        c.start()
        gpu1, gpu2 = c.nodes["gpu1"], c.nodes["gpu2"]
        # gpu1's GPU busy while the job is placed, so it lands on gpu2; then freed.
        holder = gpu1.submit_as("bob", "--gpus", "1", "--node", "gpu1", cmd=["sleep", "300"])
        wait_state(gpu1, holder, "running")
        job = gpu1.submit_as("ada", "--gpus", "1", cmd=["sleep", "300"])
        first = wait_state(gpu1, job, "running")
        assert first["attempts"][0]["node"] == "gpu2", first["attempts"]
        gpu1.trainq_as("bob", "cancel", str(holder), check=0)
        wait_state(gpu1, holder, "cancelled")
        pid = pid_of(first)
        cut_at = time.monotonic()
        proxy.cut()
        # Its peer still sees the store: gpu2's job stops itself, then runs again on gpu1.
        wait_for(lambda: process_gone(pid), timeout=NODE_TIMEOUT_S, what="the cut-off job to stop")
        stopped_after = time.monotonic() - cut_at
        again = wait_for(lambda: (lambda j: j if j and len(j["attempts"]) == 2 and
                                  j["attempts"][1]["pid"] else None)(show(gpu1, job)),
                         timeout=4 * NODE_TIMEOUT_S, what="the job to run again on gpu1")
        rerun_after = time.monotonic() - cut_at
        assert again["attempts"][1]["node"] == "gpu1", again["attempts"]
        assert stopped_after < rerun_after, (stopped_after, rerun_after)
        assert stopped_after < NODE_TIMEOUT_S, stopped_after
        log = gpu2.daemon_log()
        assert "cannot reach the store while the others can" in log, log[-3000:]
        assert "lost: no heartbeat" in gpu1.daemon_log() or "lost: no heartbeat" in \
            c.logs(), c.logs()
        gpu1.trainq_as("ada", "cancel", str(job), check=0)
    finally:
        proxy.close()


def test_a_loop_held_past_the_fence_stops_no_job(doc_cluster):
    held_ms = int(NODE_TIMEOUT_S * 1000 * 0.8)  # past fence_after (node_timeout / 2)
    c = doc_cluster()
    for n in c.nodes.values():
        n.extra_env["TRAINQ_TEST_STALL_MS"] = str(held_ms)
    c.start()
    gpu1 = c.nodes["gpu1"]
    job = gpu1.submit_as("ada", "--gpus", "1", "--node", "gpu1", cmd=["sleep", "300"])
    pid = pid_of(wait_state(gpu1, job, "running"))
    daemon_pid = gpu1.daemon.pid
    os.kill(daemon_pid, signal.SIGUSR2)
    began = time.monotonic()
    # While the loop is held, the job runs on and the other node sees this one beat.
    while time.monotonic() - began < held_ms / 1000 + 2:
        assert not process_gone(pid), f"the job stopped while the loop was held\n{c.logs()}"
        time.sleep(0.5)
    gpu2 = c.nodes["gpu2"]
    nodes = {n["name"]: n for n in c.listing(gpu2)["nodes"]}
    assert nodes["gpu1"]["state"] == "up", nodes
    assert wait_state(gpu1, job, "running")["attempts"][0]["pid"] == pid
    log = gpu1.daemon_log()
    assert "event loop: no progress" in log and "a test's stall" in log, log[-3000:]
    assert "renewed by the liveness thread" in log, log[-3000:]
    gpu1.trainq_as("ada", "cancel", str(job), check=0)
