"""A cluster's failures (docs/cluster.md, "Failure"): a node killed with all its processes,
a node frozen (SIGSTOP) whose job stops itself before the rerun starts elsewhere, Redis
killed and restarted from its AOF, Redis away for a while. Real redis-server, real trainqd
nodes, real processes."""
import os
import signal
import sys
import time

from conftest import crash, process_gone, read_lines, wait_for

# A job that writes "ATTEMPT NODE-DIR TIME" every 50 ms into a file shared by its attempts:
# two copies running at once would interleave their lines.
TICKER = """
import os, sys, time
out = sys.argv[1]
tag = os.environ["TRAINQ_ATTEMPT"]
while True:
    with open(out, "a") as f:
        f.write(f"{tag} {time.time():.3f}\\n")
    time.sleep(0.05)
"""


def ticker(t, out):
    return [sys.executable, "-c", TICKER, out]


def spans(out):
    """attempt -> (first tick, last tick)."""
    found = {}
    for line in read_lines(out):
        tag, at = line.split()
        lo, hi = found.get(tag, (float(at), float(at)))
        found[tag] = (min(lo, float(at)), max(hi, float(at)))
    return found


def test_a_node_killed_with_its_jobs_loses_them_to_another_node(make_cluster):
    cluster = make_cluster(3)
    t = cluster.node("node0")
    out = t.path("ticks")
    job_id = t.submit("--gpus", "1", cmd=ticker(t, out))
    job = t.wait_state(job_id, "running", timeout=20)
    victim = cluster.node_of(job)
    survivor = next(n for name, n in cluster.nodes.items() if name != victim)
    wait_for(lambda: "1" in spans(out), what="the first attempt's ticks")
    # The whole node dies: its daemon, the shim and the job.
    crash(cluster.processes(victim))
    killed_at = time.monotonic()
    job = wait_for(lambda: (j := survivor.show(job_id))["attempt"] == 2 and
                   j["state"] == "running" and j, timeout=30, what="the job running again")
    assert time.monotonic() - killed_at >= 3.0  # not before node_timeout (4s) lapsed
    first, second = job["attempts"]
    assert first["state"] == "failed" and first["end_reason"] == f"node {victim} lost"
    assert second["node"] != victim
    assert first["oom"] is False
    states = {n["name"]: n["state"] for n in cluster.listing(survivor)["nodes"]}
    assert states[victim] == "lost"
    wait_for(lambda: "2" in spans(out), what="the second attempt's ticks")
    s = spans(out)
    assert s["1"][1] < s["2"][0], f"the dead node's attempt ran on: {s}"
    survivor.run("cancel", str(job_id))


def test_a_frozen_node_stops_its_job_before_the_rerun_starts(make_cluster):
    cluster = make_cluster(3)
    t = cluster.node("node0")
    out = t.path("ticks")
    job_id = t.submit("--gpus", "1", cmd=ticker(t, out))
    job = t.wait_state(job_id, "running", timeout=20)
    victim_name = cluster.node_of(job)
    victim = cluster.node(victim_name)
    survivor = next(n for name, n in cluster.nodes.items() if name != victim_name)
    shim = job["attempts"][0]["pid"]
    daemon = victim.daemon_pid()
    os.kill(daemon, signal.SIGSTOP)
    try:
        # The frozen daemon renews nothing: its shim stops the job after node_timeout / 2.
        wait_for(lambda: process_gone(shim), timeout=15, what="the frozen node's job to stop")
        job = wait_for(lambda: (j := survivor.show(job_id))["attempt"] == 2 and
                       j["state"] == "running" and j, timeout=30, what="the rerun")
        wait_for(lambda: "2" in spans(out), what="the rerun's ticks")
        s = spans(out)
        assert s["1"][1] < s["2"][0], f"attempts overlapped: {s}"
        assert job["attempts"][0]["end_reason"] == f"node {victim_name} lost"
    finally:
        os.kill(daemon, signal.SIGCONT)
    # Back, the node rejoins; its late record of attempt 1 is refused and changes nothing.
    wait_for(lambda: {n["name"]: n["state"] for n in cluster.listing(survivor)["nodes"]}
             [victim_name] == "up", timeout=15, what="the node to rejoin")
    wait_for(lambda: "refused" in victim.daemon_log() or "recording its end failed" in
             victim.daemon_log(), timeout=10, what="the late write refused")
    job = survivor.show(job_id)
    assert job["attempts"][0]["end_reason"] == f"node {victim_name} lost"
    assert job["attempt"] == 2 and job["state"] == "running"
    survivor.run("cancel", str(job_id))


def test_jobs_that_ended_on_a_frozen_node_keep_their_end_and_run_once(make_cluster):
    """Four jobs finish on a node whose daemon is stopped (SIGSTOP) past node_timeout: it is
    judged lost, and thawed within lost_node_wait it reports their ends; none runs again."""
    cluster = make_cluster(3, lost_node_wait="20s")
    leader = cluster.leader()
    victim_name = next(name for name in cluster.nodes if name != leader)
    victim, t = cluster.node(victim_name), cluster.node(leader)
    marker = t.path("runs")
    cmd = ["sh", "-c", f'echo "$TRAINQ_JOB_ID $TRAINQ_ATTEMPT" >> {marker}; sleep 1']
    ids = [t.submit("--gpus", "0", "--node", victim_name, cmd=cmd) for _ in range(4)]
    for job_id in ids:
        t.wait_state(job_id, "running", timeout=20)
    daemon = victim.daemon_pid()
    os.kill(daemon, signal.SIGSTOP)
    try:
        wait_for(lambda: {n["name"]: n["state"] for n in cluster.listing(t)["nodes"]}
                 [victim_name] == "lost", timeout=20, what="the frozen node judged lost")
        waiting = t.show(ids[0])
        assert waiting["state"] == "queued", waiting
        assert f"node {victim_name} was judged lost: waiting for it" in waiting["reason"] or \
            "reports how it ended" in waiting["reason"], waiting["reason"]
    finally:
        os.kill(daemon, signal.SIGCONT)
    for job_id in ids:
        job = t.wait_state(job_id, "succeeded", timeout=30)
        assert [a["state"] for a in job["attempts"]] == ["succeeded"], job["attempts"]
        assert job["attempts"][0]["node"] == victim_name
    time.sleep(2)  # a rerun, were one placed, would have started by now
    assert sorted(read_lines(marker)) == sorted(f"{i} 1" for i in ids)


def test_redis_killed_and_restarted_keeps_the_queue(make_cluster, redis_server):
    redis = redis_server(appendfsync="always")
    cluster = make_cluster(2, redis=redis, node_timeout="30s", heartbeat_interval="500ms",
                           leader_lease="2s")
    t = cluster.any()
    running = t.submit("--gpus", "1", cmd=["sleep", "300"])
    t.wait_state(running, "running", timeout=20)
    # More than the GPUs: these wait in the queue.
    waiting = [t.submit("--gpus", "1", cmd=["sleep", "300"]) for _ in range(3)]
    before = {j["id"]: j["state"] for j in t.ls("--all")}
    redis.kill()
    proc = t.run("ls", check=False)
    assert proc.returncode != 0 and "unreachable" in proc.stderr, proc.stderr
    redis.start()
    after = wait_for(lambda: (p := t.run("ls", "--all", "--json", check=False)).returncode == 0
                     and p.stdout, timeout=20, what="the store back")
    import json
    after = {j["id"]: j["state"] for j in json.loads(after)}
    assert set(after) == set(before) and after[running] == "running"
    assert all(after[i] in ("queued", "running") for i in waiting)
    for job_id in [running, *waiting]:
        t.run("cancel", str(job_id))


def test_redis_away_for_ten_seconds_crashes_nothing(make_cluster, redis_server):
    redis = redis_server()
    cluster = make_cluster(2, redis=redis, node_timeout="60s", heartbeat_interval="1s",
                           leader_lease="3s")
    t = cluster.any()
    job_id = t.submit("--gpus", "1", cmd=["sleep", "300"])
    shim = t.wait_state(job_id, "running", timeout=20)["attempts"][0]["pid"]
    daemons = [n.daemon_pid() for n in cluster.nodes.values()]
    redis.kill()
    time.sleep(10)
    assert all(not process_gone(pid) for pid in daemons), "a daemon died without its store"
    assert not process_gone(shim), "the running job must keep running"
    redis.start()
    wait_for(lambda: t.run("ls", check=False).returncode == 0, timeout=20, what="the store back")
    assert t.state(job_id) == "running"
    later = t.submit("--gpus", "1", cmd=["true"])
    t.run("cancel", str(job_id))
    t.wait_state(later, "succeeded", timeout=30)
    for n in cluster.nodes.values():
        log = n.daemon_log()
        assert "unreachable" in log or "heartbeat:" in log
