"""Chaos, bounded: 300 jobs submitted one by one through the CLI while the daemon is killed
with SIGKILL 30 times, and a few shims and jobs are killed too. Afterwards: no acknowledged
submit lost, none stored twice, no attempt run twice, no two attempts of one job running at
once, and nothing stuck — every job ends.

Each job writes one line when it starts and one when it ends to a ledger file of its own
(appends of a few bytes, so lines never interleave), naming its job, attempt and pid."""
import os
import random
import signal
import threading
import time

from conftest import wait_for

JOBS = 300
DAEMON_KILLS = 30
SHIM_KILLS = 3
JOB_KILLS = 3
SEED = 20261125

# The time comes from bash itself (EPOCHREALTIME, in microseconds; "000" makes it ns): a
# `$(date)` would fork a second `bash -c`, which a job kill may hit, leaving a line without it.
JOB_SCRIPT = ('echo "start $TRAINQ_JOB_ID $TRAINQ_ATTEMPT $$ ${EPOCHREALTIME/./}000" >> "$1/$2"; '
              'sleep 0.$((RANDOM % 4 + 1)); '
              'echo "end $TRAINQ_JOB_ID $TRAINQ_ATTEMPT $$ ${EPOCHREALTIME/./}000" >> "$1/$2"')


def live_pids(tq, *argv):
    """Pids of this instance's processes whose command line starts with `argv` (the program's
    basename first). Matched from the start: a `trainq submit` carries the job's whole script
    in its arguments, and killing the CLI (or LeakSanitizer's tracer, a clone of it) is no job
    kill."""
    out = []
    for pid in tq.processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        args[0] = os.path.basename(args[0])
        if [a.decode(errors="replace") for a in args[:len(argv)]] == list(argv):
            out.append(pid)
    return out


def job_pids(tq):
    """The jobs' processes: their shells and the sleeps in them."""
    return live_pids(tq, "bash", "-c") + live_pids(tq, "sleep")


class Chaos:
    def __init__(self, tq):
        self.tq = tq
        self.ledger = tq.path("ledger")
        os.makedirs(self.ledger)
        self.acknowledged = {}  # name -> id printed by `trainq submit`
        self.refused = []       # names whose submit exited non-zero (may or may not be stored)
        self.killed = {"daemon": 0, "shim": 0, "job": 0}
        self.done = threading.Event()
        self.rng = random.Random(SEED)

    def submit_all(self):
        try:
            for i in range(JOBS):
                name = f"chaos{i}"
                r = self.tq.run("submit", "--gpus", "0", "--name", name, "--", "bash", "-c",
                                JOB_SCRIPT, "job", self.ledger, name, check=False, timeout=120)
                if r.returncode == 0:
                    self.acknowledged[name] = int(r.stdout.strip())
                else:
                    self.refused.append((name, r.returncode, r.stderr.strip()))
        finally:
            self.done.set()

    def kill_one(self, what):
        if what == "daemon":
            # The daemon killed last is back only once a submit has started it again: wait
            # for it (a while), so each planned kill hits a daemon rather than the gap.
            pid = None
            for _ in range(30):
                pid = self.tq.daemon_pid()
                if pid or self.done.is_set():
                    break
                time.sleep(0.1)
            pids = [pid] if pid else []
        elif what == "shim":
            pids = live_pids(self.tq, "trainqd", "shim")
        else:
            pids = job_pids(self.tq)
        if not pids:
            return
        try:
            os.kill(self.rng.choice(pids), signal.SIGKILL)
            self.killed[what] += 1
        except ProcessLookupError:
            pass

    def kill_all(self):
        plan = ["daemon"] * DAEMON_KILLS + ["shim"] * SHIM_KILLS + ["job"] * JOB_KILLS
        self.rng.shuffle(plan)
        for what in plan:
            if self.done.wait(self.rng.uniform(0.2, 0.8)):
                return
            self.kill_one(what)


def ledger_runs(ledger):
    """{(job, attempt): [(start_ns, end_ns or None, pid)]} from every job's ledger."""
    runs = {}
    for name in os.listdir(ledger):
        for line in open(os.path.join(ledger, name)):
            kind, job, attempt, pid, ns = line.split()
            key = (int(job), int(attempt))
            if kind == "start":
                runs.setdefault(key, []).append([int(ns), None, pid])
            else:
                for run in runs.get(key, []):
                    if run[2] == pid:
                        run[1] = int(ns)
    return runs


def test_chaos_loses_nothing_runs_nothing_twice_and_leaves_nothing_stuck(make_trainq):
    tq = make_trainq(cpu_slots=16, grace_period="1s", sample_interval="100ms")
    tq.run("ls")
    chaos = Chaos(tq)
    submitter = threading.Thread(target=chaos.submit_all)
    killer = threading.Thread(target=chaos.kill_all)
    submitter.start()
    killer.start()
    submitter.join(timeout=600)
    killer.join(timeout=60)
    assert not submitter.is_alive()
    assert chaos.killed["daemon"] >= DAEMON_KILLS // 2, chaos.killed

    # Nothing stuck: with the chaos over, every stored job ends.
    def all_done():
        jobs = tq.ls("--all")
        waiting = [j for j in jobs if j["state"] not in ("succeeded", "failed", "cancelled")]
        return jobs if not waiting else None
    jobs = wait_for(all_done, timeout=120, interval=0.5, what="every job to end")

    by_name = {}
    for job in jobs:
        by_name.setdefault(job["name"], []).append(job)
    # None stored twice: a submit sent again after a kill carries its key.
    twice = {n: [j["id"] for j in js] for n, js in by_name.items() if len(js) > 1}
    assert not twice, f"stored more than once: {twice}"
    # None lost: every acknowledged id is there, under its name.
    lost = [n for n, i in chaos.acknowledged.items()
            if n not in by_name or by_name[n][0]["id"] != i]
    assert not lost, f"acknowledged but lost: {lost}"
    assert len(chaos.acknowledged) >= JOBS - 5, chaos.refused[:5]

    # No attempt run twice, no two attempts of one job at once.
    runs = ledger_runs(chaos.ledger)
    doubled = {k: v for k, v in runs.items() if len(v) > 1}
    assert not doubled, f"attempts that ran more than once: {doubled}"
    by_job = {}
    for (job, attempt), [(start, end, _)] in runs.items():
        by_job.setdefault(job, []).append((start, end or float("inf"), attempt))
    for job, spans in by_job.items():
        spans.sort()
        for (s1, e1, a1), (s2, e2, a2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"job {job}: attempts {a1} and {a2} ran at once"

    # Only the killed shims and jobs may fail; every other job succeeded, once.
    failed = [j for j in jobs if j["state"] != "succeeded"]
    assert len(failed) <= chaos.killed["shim"] + chaos.killed["job"], \
        [(j["id"], j["state"], j["reason"]) for j in failed]
    for job in jobs:
        if job["state"] == "succeeded":
            assert (job["id"], job["attempt"]) in runs, f"job {job['id']} never ran"
    wait_for(lambda: not job_pids(tq), what="no job process left")
    print(f"chaos: {len(jobs)} jobs, {len(chaos.acknowledged)} acknowledged, "
          f"{len(chaos.refused)} refused, kills {chaos.killed}, {len(failed)} failed")
