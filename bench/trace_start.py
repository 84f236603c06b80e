#!/usr/bin/env python3
"""One submit to an idle daemon and the start of its job, phase by phase, in µs.

Usage: bench/trace_start.py BUILD_DIR [BUILD_DIR...]   (each holding trainq and trainqd)

The kernel's own tracepoints (`perf record -a`: process exec, fork and exit, and the
accept, sendmsg and fdatasync system calls) time each step without slowing it the way strace
does (strace stops the process at every call: a few µs become 100). Each build runs RUNS
submits (default 10), each after half a second of idleness, of `sh -c 'echo x > FILE'`;
each phase's median is printed, the builds side by side. Needs root and perf (Debian:
linux-perf).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

RUNS = int(os.environ.get("RUNS", 10))
EVENTS = ["sched:sched_process_exec", "sched:sched_process_fork", "sched:sched_process_exit",
          "syscalls:sys_enter_fdatasync", "syscalls:sys_exit_fdatasync",
          "syscalls:sys_enter_sendmsg", "syscalls:sys_enter_accept",
          "syscalls:sys_enter_accept4"]
LINE = re.compile(r"^\s*(\S+)\s+(\d+)\s+(\d+\.\d+):\s+(\S+):\s*(.*)$")
PHASES = [
    "client: exec → request sent (start-up, options, socket checks)",
    "daemon: request sent → fdatasync (accept, parse, check, insert)",
    "daemon: fdatasync",
    "daemon: fdatasync → 201 sent",
    "daemon: 201 sent → shim forked (the pass, run dir, attempt recorded)",
    "shim: forked → exec'd",
    "shim: exec'd → job forked (loading, records, log, cgroups made)",
    "job: forked → exec'd (cgroups joined, user, fds)",
    "submit → running, whole (client exec → the job's exec)",
    "client: exit after its exec (what `trainq submit` takes)",
]

JOB = """import os, subprocess, sys, time
trainq, root, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, TRAINQ_STATE_DIR=os.path.join(root, "state"))
subprocess.run([trainq, "daemon"], env=env, check=True, stdout=subprocess.DEVNULL)
for i in range(runs):
    time.sleep(0.5)
    f = os.path.join(root, f"ran{i}")
    subprocess.run([trainq, "submit", "--gpus", "0", "--", "sh", "-c", f"echo x > {f}"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    while not os.path.exists(f):
        time.sleep(0.001)
time.sleep(0.3)
subprocess.run([trainq, "daemon", "stop"], env=env, stdout=subprocess.DEVNULL)
"""


def parse(text):
    out = []
    for raw in text.splitlines():
        m = LINE.match(raw)
        if m:
            out.append((m.group(1), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)))
    return out


def phases(evs, build):
    """Each submit's phases from the events, in order."""
    client_exe = os.path.join(build, "trainq")
    runs = []
    execs = [e for e in evs if e[3] == "sched:sched_process_exec" and
             f"filename={client_exe} " in e[4] + " "]
    # The first is `trainq daemon`, the last `trainq daemon stop`: the submits are between.
    for ex in execs[1:-1]:
        pid, t0 = ex[1], ex[2]
        after = [e for e in evs if e[2] >= t0]

        def first(pred, since):
            return next(e for e in after if e[2] >= since and pred(e))

        try:
            sent = first(lambda e: e[1] == pid and e[3] == "syscalls:sys_enter_sendmsg", t0)
            sync = first(lambda e: e[3] == "syscalls:sys_enter_fdatasync", sent[2])
            daemon = sync[1]
            synced = first(lambda e: e[1] == daemon and e[3] == "syscalls:sys_exit_fdatasync",
                           sync[2])
            answer = first(lambda e: e[1] == daemon and e[3] == "syscalls:sys_enter_sendmsg",
                           synced[2])
            spawn = first(lambda e: e[1] == daemon and e[3] == "sched:sched_process_fork",
                          answer[2])
            shim = int(re.search(r"child_pid=(\d+)", spawn[4]).group(1))
            shim_exec = first(lambda e: e[1] == shim and e[3] == "sched:sched_process_exec",
                              spawn[2])
            job_fork = first(lambda e: e[1] == shim and e[3] == "sched:sched_process_fork",
                             shim_exec[2])
            job = int(re.search(r"child_pid=(\d+)", job_fork[4]).group(1))
            job_exec = first(lambda e: e[1] == job and e[3] == "sched:sched_process_exec",
                             job_fork[2])
            client_exit = first(lambda e: e[1] == pid and e[3] == "sched:sched_process_exit", t0)
        except StopIteration:
            continue
        runs.append([sent[2] - t0, sync[2] - sent[2], synced[2] - sync[2], answer[2] - synced[2],
                     spawn[2] - answer[2], shim_exec[2] - spawn[2], job_fork[2] - shim_exec[2],
                     job_exec[2] - job_fork[2], job_exec[2] - t0, client_exit[2] - t0])
    return runs


def trace(build):
    work = tempfile.mkdtemp(prefix="tq-trace-")
    try:
        os.makedirs(os.path.join(work, "state"))
        data = os.path.join(work, "perf.data")
        args = ["perf", "record", "-q", "-a", "-o", data]
        for e in EVENTS:
            args += ["-e", e]
        subprocess.run(args + ["--", sys.executable, "-c", JOB, os.path.join(build, "trainq"),
                               work, str(RUNS)], check=True, stderr=subprocess.DEVNULL)
        text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,time,event,trace"],
                              check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout
        return phases(parse(text), build)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(builds):
    """{build: [median seconds of each of PHASES]} for each build dir."""
    medians = {}
    for build in builds:
        runs = trace(build)
        if not runs:
            raise RuntimeError(f"trace_start: no complete submit traced for {build}")
        medians[build] = [statistics.median(r[i] for r in runs) for i in range(len(PHASES))]
    return medians


def render(medians, labels):
    lines = [f"| phase (µs, median of {RUNS} idle submits) | " + " | ".join(labels) + " |",
             "| --- |" + " --- |" * len(labels)]
    for i, phase in enumerate(PHASES):
        lines.append(f"| {phase} | " + " | ".join(f"{m[i] * 1e6:.0f}" for m in medians.values())
                     + " |")
    return lines


def main():
    builds = [os.path.abspath(b) for b in sys.argv[1:]] or [os.path.abspath("build/release")]
    if not shutil.which("perf"):
        sys.exit("trace_start: perf is not installed (Debian: apt-get install linux-perf)")
    print("\n".join(render(measure(builds), [os.path.relpath(b) for b in builds])))


if __name__ == "__main__":
    main()
