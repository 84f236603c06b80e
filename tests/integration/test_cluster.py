"""A cluster (docs/cluster.md): three trainqd nodes on this machine sharing one real
redis-server, each with its own state dir and simulated GPUs. Jobs submitted on any node
spread over all nodes and run once; the leader's death moves scheduling to another node;
every node answers for the whole cluster."""
import json
import os
import time

from conftest import gpu, process_gone, read_lines, wait_for


def marking_job(marker, seconds=1.0):
    """argv of a job that appends 'JOB ATTEMPT' to marker, then sleeps."""
    return ["sh", "-c", f'echo "$TRAINQ_JOB_ID $TRAINQ_ATTEMPT" >> {marker}; sleep {seconds}']


def test_jobs_spread_over_the_nodes_and_each_runs_once(make_cluster):
    cluster = make_cluster(3)
    nodes = list(cluster.nodes.values())
    marker = nodes[0].path("ran")
    # Exclusive one-GPU jobs, submitted on every node: three run at once, one per node.
    ids = [nodes[i % 3].submit("--gpus", "1", cmd=marking_job(marker)) for i in range(6)]
    jobs = [nodes[(i + 1) % 3].wait_state(job_id, "succeeded", timeout=40)
            for i, job_id in enumerate(ids)]
    for job in jobs:
        assert len(job["attempts"]) == 1, job["attempts"]
    assert sorted(read_lines(marker)) == sorted(f"{i} 1" for i in ids)
    used = {cluster.node_of(job) for job in jobs}
    assert used == set(cluster.nodes), f"jobs ran on {used} only"
    # Each node's log says it started what ran there, and nothing else.
    for name, t in cluster.nodes.items():
        mine = [j["id"] for j in jobs if cluster.node_of(j) == name]
        started = [line for line in t.daemon_log().splitlines() if "started (shim pid" in line]
        assert len(started) == len(mine), (name, started, mine)
    # Any node lists the whole cluster's jobs.
    for t in nodes:
        listed = {j["id"] for j in t.ls("--all")}
        assert set(ids) <= listed


def test_nodes_lists_every_node_and_one_leader(make_cluster):
    cluster = make_cluster(3, gpus=[gpu(0), gpu(1, total="40GiB")])
    leader = cluster.leader()
    for t in cluster.nodes.values():
        doc = wait_for(lambda: (d := cluster.listing(t)) and len(d["nodes"]) == 3 and d,
                       what="three nodes registered")
        assert doc["cluster"] is True and doc["leader"] == leader
        assert sorted(n["name"] for n in doc["nodes"]) == ["node0", "node1", "node2"]
        assert [n["name"] for n in doc["nodes"] if n["leader"]] == [leader]
        for n in doc["nodes"]:
            assert n["state"] == "up" and n["address"] == "127.0.0.1"
            assert [g["memory_total"] for g in n["gpus"]] == [80 << 30, 40 << 30]
            assert all(0 < g["memory_usable"] <= g["memory_total"] for g in n["gpus"])
            assert n["heartbeat_age_ms"] < 4000
    table = cluster.any().run("nodes").stdout
    assert "NODE" in table and all(name in table for name in cluster.nodes)


def test_a_leader_killed_is_replaced_within_two_lease_periods(make_cluster):
    cluster = make_cluster(3)
    leader = cluster.leader()
    others = [t for name, t in cluster.nodes.items() if name != leader]
    killed_at = time.monotonic()
    cluster.node(leader).kill_daemon()
    new = wait_for(lambda: (d := cluster.listing(others[0])["leader"]) not in (None, leader) and d,
                   timeout=10, interval=0.05, what="a new leader")
    took = time.monotonic() - killed_at
    # leader_lease is 1s: the lease lapses within one period, a node takes it on its next round.
    assert took <= 2.0 + 0.5, f"a new leader after {took:.2f}s"
    assert new != leader
    # The queue keeps moving.
    job_id = others[1].submit("--gpus", "1", cmd=["true"])
    job = others[0].wait_state(job_id, "succeeded", timeout=20)
    assert cluster.node_of(job) != leader


def test_an_idle_cluster_starts_a_job_at_once(make_cluster):
    # Events reach the leader as they happen: a submit on a follower starts within a fraction
    # of a heartbeat, never at the next poll.
    cluster = make_cluster(2, heartbeat_interval="1s", node_timeout="20s", leader_lease="3s")
    leader = cluster.leader()
    follower = next(t for name, t in cluster.nodes.items() if name != leader)
    waits = []
    for _ in range(3):
        t0 = time.monotonic()
        job_id = follower.submit("--gpus", "1", cmd=["true"])
        follower.wait_state(job_id, ("running", "succeeded"), timeout=10)
        waits.append(time.monotonic() - t0)
        follower.wait_state(job_id, "succeeded", timeout=10)
    assert min(waits) < 1.0, f"submit to start took {waits} (heartbeat 1s)"


def test_cancel_on_one_node_stops_a_job_running_on_another(make_cluster):
    cluster = make_cluster(2)
    t0 = cluster.any()
    job_id = t0.submit("--gpus", "1", cmd=["sleep", "300"])
    job = t0.wait_state(job_id, "running", timeout=20)
    where = cluster.node_of(job)
    elsewhere = next(t for name, t in cluster.nodes.items() if name != where)
    shim = job["attempts"][-1]["pid"]
    out = elsewhere.run("cancel", str(job_id)).stdout
    assert f"asked node {where}" in out or "stopping" in out, out
    job = elsewhere.wait_state(job_id, "cancelled", timeout=20)
    wait_for(lambda: process_gone(shim), what="the job's shim to end")


def test_a_drained_node_gets_no_new_job(make_cluster):
    cluster = make_cluster(3)
    t = cluster.any()
    t.run("node", "drain", "node0")
    t.run("node", "drain", "node1")
    states = {n["name"]: n["state"] for n in cluster.listing()["nodes"]}
    assert states == {"node0": "drained", "node1": "drained", "node2": "up"}
    ids = [t.submit("--gpus", "1", cmd=["sleep", "300"]) for _ in range(2)]
    first = t.wait_state(ids[0], "running", timeout=20)
    assert cluster.node_of(first) == "node2"
    time.sleep(1.0)  # a few scheduling rounds: the second stays queued
    assert t.state(ids[1]) == "queued"
    t.run("node", "resume", "node1")
    second = t.wait_state(ids[1], "running", timeout=20)
    assert cluster.node_of(second) == "node1"
    proc = t.run("node", "drain", "nosuchnode", check=False)
    assert proc.returncode == 3 and "nosuchnode" in proc.stderr
    for job_id in ids:
        t.run("cancel", str(job_id))


def test_a_submit_no_node_can_hold_is_refused(make_cluster):
    cluster = make_cluster(2)
    t = cluster.any()
    proc = t.run("submit", "--gpus", "2", "--", "true", check=False)
    assert proc.returncode == 2 and "gpus" in proc.stderr, proc.stderr
    assert t.ls("--all") == []


def test_a_single_machine_shows_itself_as_its_only_node(tq):
    tq.start_daemon()
    doc = json.loads(tq.run("nodes", "--json").stdout)
    assert doc["cluster"] is False and len(doc["nodes"]) == 1
    assert doc["nodes"][0]["leader"] is True and doc["nodes"][0]["state"] == "up"
    proc = tq.run("node", "drain", doc["nodes"][0]["name"], check=False)
    assert proc.returncode == 2 and "cluster" in proc.stderr


def test_any_node_serves_the_log_of_a_job_that_ran_on_another(make_cluster):
    cluster = make_cluster(2)
    t = cluster.any()
    job_id = t.submit("--gpus", "1", cmd=["sh", "-c", "echo hello from $TRAINQ_JOB_ID"])
    job = t.wait_state(job_id, "succeeded", timeout=20)
    where = cluster.node_of(job)
    elsewhere = next(n for name, n in cluster.nodes.items() if name != where)
    # Through the API (the CLI would read the file itself: every node here shares one disk).
    answer = elsewhere.api("GET", f"/v1/jobs/{job_id}/log")
    assert answer.status == 200, answer.raw
    assert answer.data == f"hello from {job_id}\n".encode(), answer.raw
    size = elsewhere.api("GET", f"/v1/jobs/{job_id}/log?size")
    assert size.status == 200 and size.body["size"] == len(f"hello from {job_id}\n")
    # Attempts carry their node.
    shown = elsewhere.show(job_id)
    assert shown["attempts"][0]["node"] == where


ENV_DUMP = """
import json, os, sys
rank = os.environ["TRAINQ_NODE_RANK"]
with open(sys.argv[1] + "." + rank, "w") as f:
    json.dump(dict(os.environ), f)
"""


def test_a_two_node_job_runs_one_part_per_node_with_one_master(make_cluster):
    import sys
    cluster = make_cluster(3, gpus=[gpu(0), gpu(1)])
    t = cluster.any()
    out = t.path("env")
    job_id = t.submit("--nodes", "2", "--gpus", "2", cmd=[sys.executable, "-c", ENV_DUMP, out])
    job = t.wait_state(job_id, "succeeded", timeout=30)
    assert len(job["attempts"]) == 1
    attempt = job["attempts"][0]
    nodes = attempt["nodes"]
    assert len(nodes) == 2 and len(set(nodes)) == 2 and attempt["node"] == nodes[0]
    envs = [json.load(open(f"{out}.{rank}")) for rank in (0, 1)]
    port = envs[0]["MASTER_PORT"]
    for rank, env in enumerate(envs):
        assert env["TRAINQ_NODE_RANK"] == env["NODE_RANK"] == env["PET_NODE_RANK"] == str(rank)
        assert env["TRAINQ_NUM_NODES"] == env["PET_NNODES"] == "2"
        assert env["PET_NPROC_PER_NODE"] == "2"
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == port
        assert env["TRAINQ_JOB_ID"] == str(job_id)
        assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert attempt["master_port"] == int(port)


def test_a_gang_that_cannot_fit_waits_with_what_is_missing(make_cluster):
    cluster = make_cluster(2)
    t = cluster.any()
    blocker = t.submit("--gpus", "1", "--node", "node1", cmd=["sleep", "300"])
    t.wait_state(blocker, "running", timeout=20)
    job_id = t.submit("--nodes", "2", "--gpus", "1", cmd=["true"])
    reason = wait_for(lambda: (j := t.show(job_id))["reason"] and j["reason"], timeout=10,
                      what="a reason")
    assert t.state(job_id) == "queued"
    assert "2 nodes" in reason, reason
    t.run("cancel", str(blocker))
    t.wait_state(job_id, "succeeded", timeout=30)
    proc = t.run("submit", "--nodes", "3", "--gpus", "1", "--", "true", check=False)
    assert proc.returncode == 2 and "the cluster has 2" in proc.stderr, proc.stderr


def test_one_part_failing_stops_the_others_and_fails_the_job(make_cluster):
    cluster = make_cluster(2)
    t = cluster.any()
    marker = t.path("parts")
    script = (f'echo "$TRAINQ_NODE_RANK $$" >> {marker}; '
              'if [ "$TRAINQ_NODE_RANK" = 1 ]; then sleep 1; exit 3; fi; exec sleep 300')
    job_id = t.submit("--nodes", "2", "--gpus", "1", "--retries", "0", cmd=["sh", "-c", script])
    job = t.wait_state(job_id, "failed", timeout=30)
    assert len(job["attempts"]) == 1
    pids = [int(line.split()[1]) for line in read_lines(marker)]
    assert len(pids) == 2
    wait_for(lambda: all(process_gone(p) for p in pids), timeout=15,
             what="every part of the job stopped")


def test_a_real_two_node_torchrun_all_reduce(make_cluster):
    import shutil
    torchrun = shutil.which("torchrun")
    assert torchrun, "torchrun is missing: scripts/deps.sh test installs python3-torch"
    cluster = make_cluster(2)
    t = cluster.any()
    out = t.path("allreduce")
    script = t.path("allreduce.py")
    with open(script, "w") as f:
        f.write("import os, torch, torch.distributed as dist\n"
                "dist.init_process_group('gloo')\n"
                "x = torch.tensor([float(dist.get_rank() + 1)])\n"
                "dist.all_reduce(x)\n"
                f"open('{out}.' + os.environ['RANK'], 'w').write(str(x.item()))\n"
                "dist.destroy_process_group()\n")
    # torchrun as a user types it: nodes, ranks, master address and port all come from the
    # PET_* variables trainq sets. The one addition works around Debian's torch 1.13 on
    # Python 3.11, whose Std.from_str("0") returns None (its IntFlag no longer lists a zero
    # member), so torchrun's default --redirects/--tee of "0" fails before any worker
    # starts; "9:1" names a local rank that does not exist, which means the same as "0".
    job_id = t.submit("--nodes", "2", "--gpus", "1",
                      cmd=[torchrun, "--redirects", "9:1", "--tee", "9:1", script])
    job = t.wait_state(job_id, ("succeeded", "failed"), timeout=120)
    logs = t.run("logs", str(job_id), check=False).stdout
    assert job["state"] == "succeeded", logs
    assert [open(f"{out}.{r}").read() for r in (0, 1)] == ["3.0", "3.0"]


def test_a_node_without_the_jobs_cwd_fails_it_at_once_and_it_runs_elsewhere(make_cluster):
    import shutil
    import subprocess
    import tempfile
    from conftest import trainq_binary
    cluster = make_cluster(2)
    a, b = cluster.node("node0"), cluster.node("node1")
    shared = tempfile.mkdtemp(dir="/tmp", prefix="tq-shared-")  # the "shared filesystem"
    try:
        code = os.path.join(shared, "code")
        os.makedirs(code)
        # node1 lacks the mount: in a mount namespace of its own, an empty tmpfs hides it.
        b.run("daemon", "stop")
        subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        f'mount -t tmpfs tmpfs {shared} && exec "$0" daemon', trainq_binary()],
                       env=b.env, cwd=b.work, check=True, timeout=60)
        a.set_gpus([gpu(0, others="80GiB")])  # node0 is full: the leader tries node1 first

        def ready():
            nodes = {n["name"]: n for n in cluster.listing(a)["nodes"]}
            return (nodes["node0"]["gpus"][0]["memory_usable"] == 0 and
                    nodes["node1"]["state"] == "up" and nodes["node1"]["heartbeat_age_ms"] < 1000)
        wait_for(ready, what="node0 full and node1 back")
        job_id = a.submit("--gpus", "1", "--mem", "1GiB", "--cwd", code, cmd=["true"])
        first = wait_for(lambda: (j := a.show(job_id))["attempts"] and
                         j["attempts"][0]["state"] == "failed" and j, timeout=20,
                         what="the attempt on node1 to fail")
        assert first["attempts"][0]["node"] == "node1"
        assert first["attempts"][0]["end_reason"] == f"cwd {code} does not exist on node node1"
        assert first["state"] == "queued" and "node1" in first["exclude_nodes"], first
        a.set_gpus([gpu(0)])
        job = a.wait_state(job_id, "succeeded", timeout=20)
        assert [x["node"] for x in job["attempts"]] == ["node1", "node0"]
        # A job that may only use node1 has nowhere else to go: it fails, saying so.
        only = a.submit("--gpus", "1", "--node", "node1", "--cwd", code, cmd=["true"])
        job = a.wait_state(only, "failed", timeout=20)
        assert "no other node it may use is left" in job["reason"], job["reason"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
