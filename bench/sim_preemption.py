#!/usr/bin/env python3
"""The Philly preemption tables of docs/scheduling.md ("Microsoft Philly, held-out week Nov 1-8
2017: preemption"): FIFO, naive, trainq without and with preemption, and Tiresias's 2D-LAS,
replayed by `trainq sim replay`, one markdown row each with the process's CPU time.

Usage: bench/sim_preemption.py TRAINQ [TRACES_DIR]   (default TRACES_DIR: ../shared/traces)
       SETS=held-out,warm,tuning picks the tables (default: all three).

held-out: the week Nov 1-8 2017 cut from philly_sia_all.csv, from an empty cluster; warm: the
same with the week before replayed too (--warmup 7d); tuning: the October week slice, the only
data the preemption knobs were chosen on. 56 nodes x 8 GPUs throughout.
"""
import json
import os
import resource
import subprocess
import sys

CLUSTER = "56x8:32GiB"
# Chosen on the October week only (docs/scheduling.md, "Tuning").
PREEMPT = ["--preempt", "--preempt-fair-share", "--preempt-aging", "--min-runtime", "90m"]
POLICIES = [
    ("fifo", ["--policy", "fifo"]),
    ("naive", ["--policy", "naive"]),
    ("trainq", ["--policy", "trainq"]),
    ("trainq + preemption", ["--policy", "trainq", *PREEMPT]),
    ("tiresias (2D-LAS)", ["--policy", "tiresias"]),
]


def sets(traces):
    everything = os.path.join(traces, "philly_sia_all.csv")
    week = ["--window", "2017-11-01..2017-11-08"]
    return {
        "held-out": ["--trace", everything, *week],
        "warm": ["--trace", everything, *week, "--warmup", "7d"],
        "tuning": ["--trace", os.path.join(traces, "philly_sia_week_2017-10-01.csv")],
    }


def run(trainq, args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([trainq, "sim", "replay", *args, "--nodes", CLUSTER, "--json"],
                          capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), cpu


def row(name, m, cpu):
    fair = "unbounded" if m["fairness"] is None else f"{m['fairness']:.3f}"
    return (f"| {name} | {m['mean_jct_s']:,.0f} s | {m['mean_queue_s']:,.0f} s | "
            f"{m['p99_queue_s']:,.0f} s | {fair} | {m['preemptions']:,} | "
            f"{m['lost_gpu_hours']:,.0f} | {m['mean_first_queue_s']:,.0f} s | {cpu:.1f} s |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    trainq = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    traces = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "shared",
                                                                    "traces")
    if not os.path.exists(os.path.join(traces, "philly_sia_all.csv")):
        sys.exit(f"{traces}: no philly_sia_all.csv; give the shared traces folder")
    chosen = os.environ.get("SETS", "held-out,warm,tuning").split(",")
    for name, args in sets(traces).items():
        if name not in chosen:
            continue
        print(f"\n{name}\n")
        print("| policy | mean JCT | mean queue | p99 queue | fairness (max/min) | preemptions "
              "| lost GPU-h | mean first wait | CPU time |")
        print("|---|---|---|---|---|---|---|---|---|")
        for policy, extra in POLICIES:
            m, cpu = run(trainq, [*args, *extra])
            print(row(policy, m, cpu), flush=True)


if __name__ == "__main__":
    main()
