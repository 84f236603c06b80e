#!/usr/bin/env python3
"""`make bench-smoke`: trainq beside task-spooler in under a minute, rounds interleaved.

What a user pays, measured the way ../shared/bench/peers.sh measures task-spooler (the same
trivial jobs, the same latency probe, the same polling), but with each round of trainq next to
a round of task-spooler so that a noisy machine hits both alike. It prints the ratios the
goals are written in (docs/benchmarks.md, "Goals") and, with APPEND=1, adds one line to the
history table at the end of docs/benchmarks.md. CI runs it for information: the figures are
printed, never judged (shared machines are noisy).

Knobs (environment): N_JOBS=200 ROUNDS=3 LAT_SAMPLES=6 SLOTS=2 STARTUP_RUNS=40 APPEND=0
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import (ROOT, Stat, Trainq, git_version, log, machine, measure_startup,  # noqa: E402
                   read_timestamp, stamp_command, wait_until)

N_JOBS = int(os.environ.get("N_JOBS", 200))
ROUNDS = int(os.environ.get("ROUNDS", 3))
LAT_SAMPLES = int(os.environ.get("LAT_SAMPLES", 6))
SLOTS = int(os.environ.get("SLOTS", 2))
STARTUP_RUNS = int(os.environ.get("STARTUP_RUNS", 40))
LAT_GAP = 0.3  # idle time before each latency sample, as peers.sh waits (shorter: a smoke run)


class TaskSpooler:
    """A private tsp server (its own socket), driven as peers.sh drives it."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="tqb-tsp-")
        self.env = dict(os.environ, TMPDIR=self.root, TS_SOCKET=os.path.join(self.root, "ts.sock"),
                        TS_MAXFINISHED="100000")
        self.tsp("-S", str(SLOTS))

    def tsp(self, *args):
        return subprocess.run(["tsp", *args], env=self.env, cwd=self.root, check=True,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL).stdout

    def submit(self, cmd):
        self.tsp("-n", *cmd)

    def active(self):
        return sum(1 for line in self.tsp("-l").splitlines()
                   if any(f" {s} " in line for s in ("queued", "running", "allocating")))

    def wait_idle(self):
        wait_until(lambda: self.active() == 0)

    def clear(self):
        self.tsp("-C")

    def stop(self):
        subprocess.run(["tsp", "-K"], env=self.env, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def burst(q, submit):
    """Submit N_JOBS `true` one process each; (submit seconds, first submit -> all done)."""
    q.wait_idle()
    time.sleep(0.3)
    t0 = time.monotonic()
    for _ in range(N_JOBS):
        submit(["true"])
    t1 = time.monotonic()
    q.wait_idle()
    return t1 - t0, time.monotonic() - t0


def latency(q, submit, path):
    q.wait_idle()
    time.sleep(LAT_GAP)
    t0 = time.time()
    submit(stamp_command(path))
    return read_timestamp(path) - t0


def turnover(tq, i):
    a, b = os.path.join(tq.root, f"a.{i}"), os.path.join(tq.root, f"b.{i}")
    tq.wait_idle()
    tq.submit(["sh", "-c", f"sleep 0.2; date +%s.%N > {a}"], "--gpus", "0")
    tq.submit(stamp_command(b), "--gpus", "0")
    return read_timestamp(b) - read_timestamp(a)


def measure(binary):
    tq = Trainq(binary, "smoke", {"cpu_slots": SLOTS})
    one_slot = Trainq(binary, "smoke1", {"cpu_slots": 1})
    ts = TaskSpooler()
    try:
        res = {k: [] for k in ("tq_submit", "tq_done", "ts_submit", "ts_done", "tq_lat", "ts_lat",
                               "turnover")}
        for r in range(ROUNDS):
            s, d = burst(tq, lambda cmd: tq.submit(cmd, "--gpus", "0"))
            res["tq_submit"].append(s)
            res["tq_done"].append(d)
            s, d = burst(ts, ts.submit)
            res["ts_submit"].append(s)
            res["ts_done"].append(d)
            ts.clear()
            log(f"round {r + 1}: trainq {res['tq_submit'][-1]:.3f} s / {res['tq_done'][-1]:.3f} s,"
                f" task-spooler {s:.3f} s / {d:.3f} s")
        for i in range(LAT_SAMPLES):
            res["tq_lat"].append(latency(tq, lambda cmd: tq.submit(cmd, "--gpus", "0"),
                                         os.path.join(tq.root, f"lat.{i}")))
            res["ts_lat"].append(latency(ts, ts.submit, os.path.join(ts.root, f"lat.{i}")))
            res["turnover"].append(turnover(one_slot, i))
        out = {k: Stat(v) for k, v in res.items()}
        out["startup"] = measure_startup(binary, STARTUP_RUNS, with_daemon=False)
        out["tsp_version"] = (ts.tsp("-V").strip().splitlines() or ["task-spooler"])[0]
        return out
    finally:
        tq.stop()
        one_slot.stop()
        ts.stop()


def rows(m):
    """(label, trainq, task-spooler or /bin/true, ratio, goal) for the goals' figures."""
    rate = lambda s: N_JOBS / s.median  # noqa: E731
    st = m["startup"]
    return [
        ("CLI submit, one process per job (jobs/s)", f"{rate(m['tq_submit']):.0f}",
         f"{rate(m['ts_submit']):.0f}", rate(m["tq_submit"]) / rate(m["ts_submit"]), "≥ 1×"),
        ("idle queue: submit → job running (ms)", f"{m['tq_lat'].median * 1000:.1f}",
         f"{m['ts_lat'].median * 1000:.1f}", m["tq_lat"].median / m["ts_lat"].median, "≤ 1.5×"),
        (f"{N_JOBS} trivial jobs drained on {SLOTS} slots (s)", f"{m['tq_done'].median:.2f}",
         f"{m['ts_done'].median:.2f}", m["tq_done"].median / m["ts_done"].median, "≤ 1.5×"),
        ("`trainq --version` vs `/bin/true` (ms)", f"{st['trainq --version'].median * 1000:.2f}",
         f"{st['/bin/true'].median * 1000:.2f}",
         st["trainq --version"].median / st["/bin/true"].median, "≤ 1.5×"),
    ]


def render(m):
    lines = [f"machine: {machine()}; trainq {git_version()} (release build); "
             f"{m['tsp_version']}",
             f"N_JOBS={N_JOBS} ROUNDS={ROUNDS} LAT_SAMPLES={LAT_SAMPLES} SLOTS={SLOTS}, rounds "
             "interleaved; medians", "",
             "| | trainq | task-spooler (`/bin/true` for start-up) | ratio | goal |",
             "| --- | --- | --- | --- | --- |"]
    for label, ours, theirs, r, goal in rows(m):
        lines.append(f"| {label} | {ours} | {theirs} | {r:.2f}× | {goal} |")
    lines.append(f"| a job exits → the next job running, 1 slot (ms) | "
                 f"{m['turnover'].median * 1000:.1f} | | | ≤ 5 ms |")
    return "\n".join(lines)


HISTORY = "## History"


def append_history(m):
    """One line per landing in docs/benchmarks.md's history table (ratios over time)."""
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    with open(path) as f:
        text = f.read()
    r = rows(m)
    line = (f"| {time.strftime('%Y-%m-%d')} | {git_version()} | {r[0][3]:.2f}× | {r[1][3]:.2f}× | "
            f"{r[2][3]:.2f}× | {r[3][3]:.2f}× | {m['turnover'].median * 1000:.1f} ms |")
    if HISTORY not in text:
        text += (f"\n{HISTORY}\n\n`make bench-smoke APPEND=1` at each landing (bench/smoke.py): "
                 "trainq ÷ task-spooler in one run, rounds interleaved.\n\n"
                 "| date | commit | CLI submit rate | submit → running | 200-job drain | "
                 "`--version` ÷ `/bin/true` | exit → next running |\n"
                 "| --- | --- | --- | --- | --- | --- | --- |\n")
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n" + line + "\n")


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release/trainq")
    if not shutil.which("tsp"):
        sys.exit("bench-smoke: task-spooler's tsp is missing (scripts/deps.sh test installs it)")
    log(f"bench-smoke: trainq beside task-spooler, {ROUNDS} interleaved rounds")
    t0 = time.monotonic()
    m = measure(binary)
    print(render(m))
    log(f"bench-smoke took {time.monotonic() - t0:.0f} s")
    if os.environ.get("APPEND") == "1":
        append_history(m)
        log("appended a line to docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
