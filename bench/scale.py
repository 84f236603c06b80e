#!/usr/bin/env python3
"""`make bench-scale`: a million queued jobs, as a user would queue them.

One `trainq submit --gpus 1 --mem 1GiB --from FILE` of N lines `true` to a daemon whose one
simulated GPU is full, so every job waits; then what a user pays with that queue: `ls --limit
50`, `show ID`, the daemon's memory, the database's size, and a restart (`daemon stop`, then a
command until it answers). Each figure is printed with the machine; nothing is judged.

Knobs (environment): N=1000000 ROUNDS=5
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Stat, Trainq, git_version, log, machine, proc_rss_bytes, sim_gpus  # noqa: E402

N = int(os.environ.get("N", 1_000_000))
ROUNDS = int(os.environ.get("ROUNDS", 5))


def timed_cli(tq, *args):
    t0 = time.monotonic()
    proc = subprocess.run([tq.binary, *args], env=tq.env, cwd=tq.root, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    return time.monotonic() - t0, proc


def measure(binary):
    """[(what, figure)] for a queue of N jobs."""
    tq = Trainq(binary, "scale", {"cpu_slots": 8, "max_waiting_jobs_per_user": 0},
                sim_gpus(1, "80GiB"))
    rows = []
    try:
        path = os.path.join(tq.root, "jobs.txt")
        with open(path, "w") as f:
            f.write("true\n" * N)
        pid = tq.daemon_pid()
        log(f"submit --from of {N:,} jobs")
        took, proc = timed_cli(tq, "submit", "--gpus", "1", "--mem", "1GiB", "--from", path)
        ids = proc.stdout.split()
        rows.append((f"`submit --from` of {N:,} jobs: exit code, ids printed", f"{proc.returncode}, "
                     f"{len(ids):,}" + (f" ({proc.stderr.strip()[:200]})" if proc.returncode else "")))
        rows.append((f"`submit --from` of {N:,} jobs", f"{took:.1f} s ({N / took:,.0f} jobs/s)"))
        rows.append(("daemon peak RSS while storing them (VmHWM)",
                     f"{proc_rss_bytes(pid, 'VmHWM') / (1 << 20):,.0f} MiB"))
        time.sleep(3)
        rows.append((f"daemon RSS with {N:,} queued", f"{proc_rss_bytes(pid) / (1 << 20):,.0f} MiB"))
        db = os.path.join(tq.state, "trainq.db")
        size = sum(os.path.getsize(db + suffix) for suffix in ("", "-wal")
                   if os.path.exists(db + suffix))
        rows.append(("database size (with its WAL)", f"{size / (1 << 20):,.0f} MiB"))
        ls = Stat([timed_cli(tq, "ls", "--limit", "50")[0] for _ in range(ROUNDS)])
        rows.append((f"`trainq ls --limit 50` with {N:,} queued", f"{ls.fmt(1000, 1)} ms"))
        middle = ids[len(ids) // 2] if ids else "1"
        show = Stat([timed_cli(tq, "show", middle)[0] for _ in range(ROUNDS)])
        rows.append((f"`trainq show ID` with {N:,} queued", f"{show.fmt(1000, 1)} ms"))
        log("restart")
        tq.cli("daemon", "stop")
        t0 = time.monotonic()
        first = None
        while True:
            took, proc = timed_cli(tq, "ls", "--limit", "1")
            if first is None:
                first = (proc.returncode, (proc.stderr.strip() or "answered")[:200])
            if proc.returncode == 0:
                break
            if time.monotonic() - t0 > 600:
                raise RuntimeError("the daemon did not answer within 10 minutes of a restart")
        rows.append(("restart: `daemon stop`, then `ls` until it answers",
                     f"{time.monotonic() - t0:.1f} s (the first command: exit {first[0]}, "
                     f"{first[1]})"))
        pid = json.loads(tq.cli("daemon", "status", "--json"))["pid"]
        rows.append(("daemon RSS after the restart", f"{proc_rss_bytes(pid) / (1 << 20):,.0f} MiB"))
    finally:
        tq.stop()
    return rows


def render(rows):
    lines = ["| measurement | figure |", "| --- | --- |"]
    lines += [f"| {label} | {figure} |" for label, figure in rows]
    return lines


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release/trainq")
    rows = measure(binary)
    print(f"machine: {machine()}; trainq {git_version()} (release build)\n")
    print("\n".join(render(rows)))


if __name__ == "__main__":
    main()
