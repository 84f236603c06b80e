"""Chaos (docs/cluster.md, "Failure"): 500 short jobs over three nodes while daemons are
killed and restarted, daemons are frozen (SIGSTOP) past node_timeout while their jobs finish,
and whole nodes (daemon and jobs) are killed and brought back after node_timeout, at random
moments. No job may be lost, no attempt may run twice (every start a job records names an
attempt the store knows, once), and no job that ended runs again.

TRAINQ_CHAOS_JOBS and TRAINQ_CHAOS_SEED change the size and the moments; the figures are
printed (pytest -s) for docs/cluster.md."""
import collections
import os
import re
import random
import signal
import threading
import time

from conftest import crash, read_lines, wait_for

JOBS = int(os.environ.get("TRAINQ_CHAOS_JOBS", "500"))
SEED = int(os.environ.get("TRAINQ_CHAOS_SEED", "7"))


def story(cluster, ids):
    """What every node's log says of jobs `ids`, and of nodes lost and leaders, in time order:
    a failure explains itself."""
    said = re.compile(r"\bjobs? (%s)\b|[\[,](%s)[,\]]|lost|leader|heartbeat" %
                      ("|".join(map(str, ids)), "|".join(map(str, ids))))
    lines = [line.replace(" ", f" {name}: ", 1) for name, t in cluster.nodes.items()
             for line in t.daemon_log().splitlines() if said.search(line)]
    return "\n" + "\n".join(sorted(lines)[-150:])


def test_chaos_loses_no_job_and_runs_no_attempt_twice(make_cluster):
    rng = random.Random(SEED)
    cluster = make_cluster(3, gpus=[{"uuid": f"GPU-sim-{i}", "name": "Simulated A100 80GB",
                                     "memory_total": "80GiB", "memory_used_by_others": 0,
                                     "utilization": 0} for i in range(4)],
                           cpu_slots=8, max_node_failures=100, lost_node_wait="15s")
    nodes = list(cluster.nodes.values())

    def node_state(via, name):
        up = [n for k, n in cluster.nodes.items() if k not in down]
        doc = cluster.listing(up[0] if up else via)
        return {n["name"]: n["state"] for n in doc["nodes"]}.get(name)

    t0 = nodes[0]
    marker = nodes[0].path("starts")
    cmd = ["sh", "-c", f'echo "$TRAINQ_JOB_ID $TRAINQ_ATTEMPT" >> {marker}; sleep 0.2; '
                       f'echo "$TRAINQ_JOB_ID $TRAINQ_ATTEMPT end" >> {marker}']
    # Ends within the 2 s a frozen node's jobs have before they stop themselves (self-fencing).
    slow = [cmd[0], cmd[1], cmd[2].replace("sleep 0.2", "sleep 1")]
    ids = []
    started = time.monotonic()
    daemon_kills = node_kills = freezes = 0
    down = {}  # node name -> when to bring it back
    frozen = {}  # node name -> the timer that thaws its stopped daemon
    while len(ids) < JOBS or down:
        # Submit in bursts through whichever nodes are up.
        up = [n for name, n in cluster.nodes.items() if name not in down]
        for _ in range(min(25, JOBS - len(ids))):
            via = rng.choice(up)
            proc = via.run("submit", "--gpus", "1", "--mem", "2GiB", "--", *cmd, check=False)
            if proc.returncode == 0:
                ids.append(int(proc.stdout.strip()))
        time.sleep(rng.uniform(0.2, 1.0))
        now = time.monotonic()
        for name, (back_at, whole) in list(down.items()):
            # A whole node comes back only once judged lost, as a rebooted machine would
            # after a long outage; sooner, its dead shims would fail their jobs (on a
            # single machine too: a supervisor killed without a record is a failure).
            if whole == "frozen":
                if now >= back_at:  # thawed by its timer
                    frozen.pop(name).join()
                    del down[name]
            elif now >= back_at and (not whole or node_state(t0, name) == "lost"):
                cluster.node(name).start_daemon()
                del down[name]
        candidates = [name for name in cluster.nodes if name not in down]
        if len(ids) < JOBS and len(candidates) > 2 and rng.random() < 0.5:
            name = rng.choice(candidates)
            victim = cluster.node(name)
            roll = rng.random()
            if roll < 0.45:
                victim.kill_daemon()  # jobs run on; the daemon comes back and re-adopts them
                daemon_kills += 1
                down[name] = (now + rng.uniform(0.3, 1.5), False)
            elif roll < 0.7:
                # Frozen past node_timeout while its jobs finish: judged lost, it must still
                # report their ends when it thaws, and none may run again. Jobs of its own
                # are running when it freezes, so there are ends to report.
                via = next(n for k, n in cluster.nodes.items() if k != name and k not in down)
                mine = []
                for _ in range(3):
                    proc = via.run("submit", "--gpus", "0", "--node", name, "--", *slow,
                                   check=False)
                    if proc.returncode == 0:
                        mine.append(int(proc.stdout.strip()))
                ids.extend(mine)
                wait_for(lambda: all(j["state"] == "running" for j in via.ls()
                                     if j["id"] in mine), timeout=10, what="its jobs to run")
                pid, frozen_for = victim.daemon_pid(), rng.uniform(5.0, 6.5)
                os.kill(pid, signal.SIGSTOP)
                # Thawed on time whatever the loop is doing: judged lost by then (node_timeout
                # is 4s), well within lost_node_wait (15s) after that.
                frozen[name] = threading.Timer(frozen_for, os.kill, (pid, signal.SIGCONT))
                frozen[name].start()
                freezes += 1
                down[name] = (time.monotonic() + frozen_for, "frozen")
            else:
                crash(cluster.processes(name))  # the whole node: its jobs die too
                node_kills += 1
                down[name] = (now + 4.0, True)  # node_timeout is 4s
    t = next(n for name, n in cluster.nodes.items() if name not in down)
    ends = wait_for(lambda: (jobs := t.ls("--all")) and
                    all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs) and jobs,
                    timeout=240, interval=1.0, what="every job to end")
    took = time.monotonic() - started
    by_id = {j["id"]: j for j in ends}
    assert sorted(by_id) == sorted(ids), "a job is missing from the store"
    lost = [i for i in ids if by_id[i]["state"] != "succeeded"]
    lines = [line.split() for line in read_lines(marker)]
    starts = collections.Counter((int(w[0]), int(w[1])) for w in lines if len(w) == 2)
    ended = {}  # a job's first attempt that ran to its end
    for w in lines:
        if len(w) == 3:
            ended[int(w[0])] = min(int(w[1]), ended.get(int(w[0]), int(w[1])))
    # A start after one of the job's attempts had run to its end: a job that ended ran again.
    again = sorted({job for (job, n) in starts if job in ended and n > ended[job]})
    twice = [k for k, c in starts.items() if c > 1]
    unknown = [(job, n) for (job, n) in starts if n > by_id[job]["attempt"]]
    never = [i for i in ids if not any(job == i for (job, _) in starts)]
    reruns = sum(j["attempt"] - 1 for j in ends)
    print(f"\nchaos: {len(ids)} jobs, 3 nodes, {daemon_kills} daemon kills, {freezes} freezes, "
          f"{node_kills} node kills, {took:.0f}s; {len(lost)} not succeeded, {len(twice)} "
          f"attempts run twice, {len(unknown)} unrecorded attempts, {reruns} reruns after a "
          f"lost node, {len(again)} reruns of a job that had ended")
    assert lost == [], [(i, by_id[i]["state"], by_id[i]["reason"]) for i in lost[:5]]
    assert twice == [], twice[:5]
    assert unknown == [], unknown[:5]
    assert never == []
    if again:  # printed whole: pytest shortens an assertion's message
        print(story(cluster, again[:3]))
    assert again == [], [(i, by_id[i]["attempts"]) for i in again[:3]]
    assert daemon_kills + node_kills + freezes >= 3
