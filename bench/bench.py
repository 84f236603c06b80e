#!/usr/bin/env python3
"""`make bench`: trainq measured beside task-spooler and Slurm, in one run, on this machine.

The peers are brought up and measured by ../shared/bench/peers.sh, unchanged; trainq is
measured here the same way (the same trivial jobs, the same latency probe, the same rounds),
and both land in one table in docs/benchmarks.md. Every figure is a median of several rounds
with its min-max, and where a peer measured the same thing, the ratio to it.

Knobs (environment): N_JOBS=200 ROUNDS=5 LAT_SAMPLES=10 SLOTS=2 SCALE_JOBS=100000
IDLE_SECONDS=60 STARTUP_RUNS=300 BENCH_MILLION=1 (0: skip bench/scale.py's million jobs)
BENCH_PEERS=1 (0: skip the peers) BENCH_SCHED=1 (0: skip the Google Benchmark
pass timings) BENCH_CLUSTER=1 (0: skip the cluster on Redis) PEERS=path/to/peers.sh
OUT=docs/benchmarks.md BEFORE=path/to/another/build (its phases of one start beside ours)
"""
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import cluster
import trace_start
import transport

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_JOBS = int(os.environ.get("N_JOBS", 200))
ROUNDS = int(os.environ.get("ROUNDS", 5))
LAT_SAMPLES = int(os.environ.get("LAT_SAMPLES", 10))
SLOTS = int(os.environ.get("SLOTS", 2))
SCALE_JOBS = int(os.environ.get("SCALE_JOBS", 100000))
IDLE_SECONDS = float(os.environ.get("IDLE_SECONDS", 60))
STARTUP_RUNS = int(os.environ.get("STARTUP_RUNS", 300))
TRANSPORT_RUNS = 50  # submits per way to the daemon (bench/transport.py)
POLL = 0.01  # as peers.sh polls task-spooler


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- timing helpers

class Stat:
    """Median with min and max of samples (seconds or any unit)."""

    def __init__(self, samples):
        self.samples = list(samples)
        self.median = statistics.median(self.samples)
        self.min = min(self.samples)
        self.max = max(self.samples)

    def fmt(self, scale=1.0, digits=3):
        return (f"{self.median * scale:.{digits}f} "
                f"({self.min * scale:.{digits}f}–{self.max * scale:.{digits}f})")


def timed(fn, *args):
    t0 = time.monotonic()
    fn(*args)
    return time.monotonic() - t0


def wait_until(predicate, timeout=600, interval=POLL):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("benchmark timed out waiting")
        time.sleep(interval)


def read_timestamp(path):
    wait_until(lambda: os.path.exists(path) and os.path.getsize(path) > 0, interval=0.001)
    with open(path) as f:
        return float(f.read())


def stamp_command(path):
    """The latency probe of peers.sh: the job writes its own start time."""
    return ["sh", "-c", f"date +%s.%N > {path}.tmp && mv {path}.tmp {path}"]


# ---------------------------------------------------------------- a trainq instance

class Trainq:
    def __init__(self, binary, name, config, gpus=None):
        self.binary = binary
        self.root = tempfile.mkdtemp(prefix=f"tqb-{name}-", dir="/tmp")
        self.state = os.path.join(self.root, "state")
        os.makedirs(self.state)
        with open(os.path.join(self.state, "config.toml"), "w") as f:
            for k, v in config.items():
                f.write(f"{k} = {json.dumps(v)}\n")
        self.env = dict(os.environ, TRAINQ_STATE_DIR=self.state)
        self.env.pop("TRAINQ_FAKE_GPUS", None)
        if gpus is not None:
            gpu_file = os.path.join(self.root, "gpus.json")
            with open(gpu_file, "w") as f:
                json.dump({"gpus": gpus}, f)
            self.env["TRAINQ_FAKE_GPUS"] = gpu_file
        self.cli("daemon")

    def cli(self, *args, stdin=None):
        return subprocess.run([self.binary, *args], env=self.env, cwd=self.root, check=True,
                              stdout=subprocess.PIPE, stdin=stdin, text=True).stdout

    def submit(self, cmd, *opts):
        self.cli("submit", *opts, "--", *cmd)

    def submit_file(self, lines, *opts):
        path = os.path.join(self.root, "batch.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.cli("submit", "--from", path, *opts)

    def active(self):
        return len(json.loads(self.cli("ls", "--json")))

    def wait_idle(self):
        wait_until(lambda: self.active() == 0)

    def daemon_pid(self):
        return json.loads(self.cli("daemon", "status", "--json"))["pid"]

    def stop(self):
        subprocess.run([self.binary, "daemon", "stop"], env=self.env, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def proc_cpu_ns(pid):
    """Nanoseconds on CPU of every thread of `pid` (schedstat's first field): the tick counts
    of /proc/PID/stat are 10 ms, coarser than an idle daemon's minute."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended between listing and reading
            pass
    return total


def proc_rss_bytes(pid, field="VmRSS"):
    """Resident memory of `pid` (VmRSS), or its peak so far with field="VmHWM"."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def sim_gpus(n, used_by_others=0):
    return [{"uuid": f"GPU-bench-{i}", "name": "Simulated A100 80GB", "memory_total": "80GiB",
             "memory_used_by_others": used_by_others} for i in range(n)]


# ---------------------------------------------------------------- the measurements

def measure_burst(tq, submit_all):
    """(a) submit N trivial jobs, (b) first submit -> all finished: peers.sh's method."""
    submit_s, done_s = [], []
    for r in range(ROUNDS):
        tq.wait_idle()
        time.sleep(0.5)
        t0 = time.monotonic()
        submit_all()
        t1 = time.monotonic()
        tq.wait_idle()
        t2 = time.monotonic()
        submit_s.append(t1 - t0)
        done_s.append(t2 - t0)
        log(f"  round {r + 1}: submit {t1 - t0:.3f} s, all done {t2 - t0:.3f} s")
    return Stat(submit_s), Stat(done_s)


def measure_cli_burst(tq):
    return measure_burst(tq, lambda: [tq.submit(["true"], "--gpus", "0") for _ in range(N_JOBS)])


def measure_batch_burst(tq):
    return measure_burst(tq, lambda: tq.submit_file(["true"] * N_JOBS, "--gpus", "0"))


def measure_latency(tq):
    """(c) idle queue: submit -> the job's first instruction."""
    samples = []
    for i in range(LAT_SAMPLES):
        tq.wait_idle()
        time.sleep(0.5)
        path = os.path.join(tq.root, f"lat.{i}")
        t0 = time.time()
        tq.submit(stamp_command(path), "--gpus", "0")
        samples.append(read_timestamp(path) - t0)
    return Stat(samples)


def measure_turnover(tq):
    """A job exits -> the next waiting job starts (one slot): the time a slot sits idle."""
    samples = []
    for i in range(LAT_SAMPLES):
        tq.wait_idle()
        a, b = os.path.join(tq.root, f"a.{i}"), os.path.join(tq.root, f"b.{i}")
        tq.submit(["sh", "-c", f"sleep 0.3; date +%s.%N > {a}"], "--gpus", "0")
        tq.submit(stamp_command(b), "--gpus", "0")
        samples.append(read_timestamp(b) - read_timestamp(a))
    return Stat(samples)


def measure_scale(tq):
    """SCALE_JOBS queued jobs that cannot run (the GPU is full): costs of a big queue."""
    lines = ["true"] * SCALE_JOBS
    t_submit = timed(tq.submit_file, lines, "--mem", "1GiB")
    out = {"submit_s": t_submit, "jobs_per_s": SCALE_JOBS / t_submit}
    out["ls_page"] = Stat([timed(tq.cli, "ls", "--limit", "50") for _ in range(ROUNDS)])
    out["show"] = Stat([timed(tq.cli, "show", str(SCALE_JOBS // 2)) for _ in range(ROUNDS)])
    time.sleep(3)  # a few GPU samples and scheduling passes with the big queue
    out["rss"] = proc_rss_bytes(tq.daemon_pid())
    restarts = []
    for _ in range(3):
        tq.cli("daemon", "stop")
        restarts.append(timed(tq.cli, "ls", "--limit", "1"))  # starts it and waits for it
    out["restart"] = Stat(restarts)
    return out


def measure_idle(tq):
    pid = tq.daemon_pid()
    time.sleep(2)
    c0, t0 = proc_cpu_ns(pid), time.monotonic()
    time.sleep(IDLE_SECONDS)
    cpu = (proc_cpu_ns(pid) - c0) / 1e9 / (time.monotonic() - t0)
    return {"cpu_pct": 100 * cpu, "ms_per_min": cpu * 60_000, "rss": proc_rss_bytes(pid)}


GBENCH_REPS = 5


def measure_startup(binary, runs=STARTUP_RUNS, with_daemon=True):
    """Whole-process wall time (fork, exec, dynamic linking, exit) of `trainq --version`,
    `trainqd --version` (unless not `with_daemon`) and /bin/true, interleaved so that drift
    hits all alike."""
    daemon = os.path.join(os.path.dirname(binary), "trainqd")
    argvs = {"/bin/true": ["/bin/true"], "trainq --version": [binary, "--version"]}
    if with_daemon:
        argvs["trainqd --version"] = [daemon, "--version"]
    samples = {name: [] for name in argvs}
    for _ in range(runs):
        for name, argv in argvs.items():
            samples[name].append(timed(lambda: subprocess.run(argv, stdout=subprocess.DEVNULL)))
    return {name: Stat(v) for name, v in samples.items()}


def measure_gbench(path):
    """Medians over GBENCH_REPS repetitions of each benchmark of a Google Benchmark binary,
    by name, times in ms; None when the binary was not built (no Google Benchmark)."""
    if os.environ.get("BENCH_SCHED", "1") == "0" or not os.path.exists(path):
        return None
    out = subprocess.run([path, f"--benchmark_repetitions={GBENCH_REPS}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    doc = json.loads(out)
    per_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    rows = {}
    for b in doc["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        scale = per_ms[b.get("time_unit", "ns")]
        rows[b["run_name"]] = dict(b, cpu_ms=b["cpu_time"] * scale, wall_ms=b["real_time"] * scale)
    return {"rows": rows, "load": doc["context"].get("load_avg", [])}


def measure_fsync(directory):
    """One 4 KiB write and fdatasync, as a commit costs: the floor under a durable submit."""
    path = os.path.join(directory, "fsync.probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    samples = []
    try:
        for i in range(50):
            t0 = time.monotonic()
            os.pwrite(fd, b"x" * 4096, i * 4096)
            os.fdatasync(fd)
            samples.append(time.monotonic() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    return Stat(samples)


# ---------------------------------------------------------------- peers

def run_peers():
    if os.environ.get("BENCH_PEERS", "1") == "0":
        log("BENCH_PEERS=0: peers skipped")
        return None
    script = os.environ.get("PEERS", os.path.join(ROOT, "..", "shared", "bench", "peers.sh"))
    if not os.path.exists(script):
        log(f"no peers script at {script}: peers skipped")
        return None
    results = tempfile.mkdtemp(prefix="tqb-peers-")
    env = dict(os.environ, N_JOBS=str(N_JOBS), ROUNDS=str(ROUNDS), LAT_SAMPLES=str(LAT_SAMPLES),
               SLOTS=str(SLOTS), INSTALL="1", RESULTS_DIR=results)
    log(f"peers: {script}")
    proc = subprocess.run(["bash", script], env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"peers.sh failed ({proc.returncode})")
    samples = {}
    with open(os.path.join(results, f"raw-slots{SLOTS}.csv")) as f:
        for row in csv.DictReader(f):
            key = (f"{row['system']} {row['profile']}", row["metric"])
            samples.setdefault(key, []).append(float(row["seconds"]))
    shutil.rmtree(results, ignore_errors=True)
    peers = {}
    for (system, metric), values in samples.items():
        peers.setdefault(system, {})[metric] = Stat(values)
    return {"stats": peers, "versions": peer_versions()}


def peer_versions():
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    return {"slurm": first_line(["slurmctld", "-V"]), "tsp": first_line(["tsp", "-V"])}


# ---------------------------------------------------------------- report

def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Linux {platform.release()}"


def git_version():
    out = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def source_commit(build):
    """The commit a build tree (BUILD/..) was made from."""
    out = subprocess.run(["git", "-C", os.path.dirname(os.path.dirname(build)), "describe",
                          "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or "another build"


def ratio(ours, theirs, higher_is_better=False):
    if theirs is None:
        return ""
    r = theirs.median / ours.median if higher_is_better else ours.median / theirs.median
    return f"{r:.3g}×"


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release/trainq")
    out_path = os.environ.get("OUT", os.path.join(ROOT, "docs", "benchmarks.md"))
    results = {}
    made = []

    def instance(*a, **kw):
        t = Trainq(binary, *a, **kw)
        made.append(t)
        return t

    try:
        log(f"start-up of trainq and trainqd beside /bin/true, {STARTUP_RUNS} runs each")
        results["startup"] = measure_startup(binary)
        log(f"trainq: CLI submit and drain, {N_JOBS} jobs on {SLOTS} slots, {ROUNDS} rounds")
        cpu = instance("burst", {"cpu_slots": SLOTS})
        results["fsync"] = measure_fsync(cpu.state)
        results["cli"] = measure_cli_burst(cpu)
        log("trainq: batch submit and drain")
        results["batch"] = measure_batch_burst(cpu)
        log("trainq: idle latency")
        results["latency"] = measure_latency(cpu)
        log("trainq: turnover on one slot")
        results["turnover"] = measure_turnover(instance("turnover", {"cpu_slots": 1}))
        log(f"trainq: {SCALE_JOBS} queued jobs")
        # One user's queue past the default max_waiting_jobs_per_user: the cap lifted.
        results["scale"] = measure_scale(instance("scale", {"cpu_slots": 8,
                                                            "max_waiting_jobs_per_user": 0},
                                                  sim_gpus(1, "80GiB")))
        for t in made:
            t.stop()
        made.clear()
        if os.environ.get("BENCH_MILLION", "1") != "0":
            import scale  # it uses this module's helpers
            log(f"trainq: {scale.N:,} queued jobs (bench/scale.py)")
            results["million"] = (scale.N, scale.measure(binary))
        log(f"trainq: idle daemon for {IDLE_SECONDS:.0f} s, no GPUs")
        results["idle0"] = measure_idle(instance("idle0", {}, sim_gpus(0)))
        log(f"trainq: idle daemon for {IDLE_SECONDS:.0f} s, 8 simulated GPUs")
        results["idle8"] = measure_idle(instance("idle8", {}, sim_gpus(8)))
        for t in made:
            t.stop()
        made.clear()
        log(f"trainq: a submit over the Unix socket, TCP and TCP+TLS, {TRANSPORT_RUNS} runs each")
        results["transport"] = transport.measure(binary, TRANSPORT_RUNS)
        if os.environ.get("BENCH_CLUSTER", "1") == "0" or not shutil.which("redis-server"):
            log("no redis-server (scripts/deps.sh test) or BENCH_CLUSTER=0: cluster skipped")
        else:
            log("trainq on Redis beside SQLite: submits and submit -> start")
            results["cluster"] = cluster.measure(binary, log=log)
        if shutil.which("perf"):
            builds = [os.path.dirname(binary)]
            if os.environ.get("BEFORE"):  # another build, labelled by its source's commit
                builds.insert(0, os.path.abspath(os.environ["BEFORE"]))
            log(f"one submit and one start, phase by phase (perf): {', '.join(builds)}")
            results["phases"] = (builds, trace_start.measure(builds))
        else:
            log("no perf (Debian: linux-perf): the phases of one start are skipped")
        log("Google Benchmark: the policy's pass and the daemon's whole pass")
        build = os.path.dirname(binary)
        results["sched"] = measure_gbench(os.path.join(build, "sched_bench"))
        results["daemon"] = measure_gbench(os.path.join(build, "daemon_bench"))
    finally:
        for t in made:
            t.stop()
    peers = run_peers()
    report = render(results, peers, binary)
    # The history of `make bench-smoke APPEND=1` lines (bench/smoke.py) outlives each report.
    if os.path.exists(out_path):
        with open(out_path) as f:
            old = f.read()
        if "\n## History\n" in old:
            report += "\n" + old[old.index("\n## History\n") + 1:]
    with open(out_path, "w") as f:
        f.write(report)
    print(report)
    log(f"wrote {out_path}")


# What each Google Benchmark row measures, and which of its counters to show.
PASS_ROWS = [
    ("sched", "BM_PassOver100kWaitingOn64Gpus/100000", "policy alone, 100,000 jobs of 5 shapes "
     "(the per-shape cache tries about 5), 8 nodes × 8 busy GPUs", ["texts"]),
    ("sched", "BM_PassOver100kWaitingOn64GpusManyAged/100000", "the same, 1 job in 7 aged "
     "(holds)", ["texts", "holds"]),
    ("sched", "BM_MixedPassOn64Gpus/1000", "policy alone, mixed queue of 1,000 jobs, 8 nodes × "
     "8 busy GPUs", ["texts", "starts"]),
    ("sched", "BM_MixedPassOn64Gpus/10000", "the same, 10,000 jobs", ["texts", "starts"]),
    ("sched", "BM_MixedPassOn64Gpus/100000", "the same, 100,000 jobs", ["texts", "starts"]),
    ("sched", "BM_MixedPassOn64GpusManyAged/100000", "the same, 1 job in 7 aged (holds)",
     ["texts", "starts", "holds"]),
    ("sched", "BM_OrderFromIndex", "ordering 100,000 jobs from the index alone", []),
    ("sched", "BM_OnePodOn1213NodesBestFit", "one pod on 1,213 openb-shaped nodes, best fit", []),
    ("sched", "BM_OnePodOn1213NodesFgdShared", "one pod, fragmentation-aware, GPU-sharing pod",
     []),
    ("sched", "BM_OnePodOn1213NodesFgdWholeGpu", "one pod, fragmentation-aware, whole-GPU pod",
     []),
]
for n in (1000, 10000, 100000):
    PASS_ROWS.append(("daemon", f"BM_TurnAfterExits/{n}", f"daemon: a turn after 4 exits, {n:,} "
                      "waiting, 1 node × 8 GPUs", ["started", "reasons", "deferred",
                                                   "deferred_ms"]))
for n in (1000, 10000, 100000):
    PASS_ROWS.append(("daemon", f"BM_WakeupNothingStarts/{n}", f"daemon: a wake-up pass where "
                      f"nothing can start, {n:,} waiting", ["running", "reasons"]))


def ms(x):
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def render_passes(res, add):
    if not res.get("sched") and not res.get("daemon"):
        return
    loads = (res.get("sched") or res["daemon"])["load"]
    add("\n## The scheduling pass and the daemon's whole pass\n")
    add("Google Benchmark (bench/sched_bench.cc, bench/daemon_bench.cc), release build, median "
        f"of {GBENCH_REPS} repetitions. CPU is the loop thread's time, what a pass costs the "
        "machine; wall adds the store's fsyncs and whatever else ran.\n")
    add(f"- machine: {machine()}; load average when the first started: "
        + ", ".join(f"{x:.2f}" for x in loads))
    add("- policy alone: `PlaceOrdered` over the waiting index, nothing written, GPUs given as "
        "input. The five-shape queue is the per-shape cache's best case; the mixed queue "
        "(1/2/4/8 GPUs, 1–64 GiB and percent shares, 24 users, three priorities) is closer to a "
        "real one. `texts`: reason texts built (shapes tried); `starts`: jobs placed.")
    add("- the daemon's whole pass: `DaemonImpl` on a real SQLite store in a temporary dir, "
        "fake shims, GPUs and clock; one node of 8 GPUs; a mixed queue whose jobs carry a "
        "3 KiB environment, as `trainq submit` sends. A turn: 4 running jobs exit; the daemon "
        "reads their exit records, records their ends, samples the GPUs and runs a pass: fair "
        "share, node "
        "build, placement, the starts (run dir, store), the first 1,000 reasons that changed "
        "written to SQLite, the wake-up scan. `started`: jobs started per turn; `reasons`: "
        "reason rows written in the pass; `deferred`: changed reasons left to later loop "
        "turns (1,000 every 100 ms), and `deferred_ms` the loop's CPU time they took, not in "
        "the turn's figure.\n")
    add("| what | CPU ms | wall ms | counters |")
    add("| --- | --- | --- | --- |")
    for binary, name, label, counters in PASS_ROWS:
        row = (res.get(binary) or {}).get("rows", {}).get(name)
        if not row:
            continue
        shown = ", ".join(f"{c} {row[c]:,.0f}" if row[c] >= 10 else f"{c} {row[c]:.1f}"
                          for c in counters if c in row)
        add(f"| {label} | {ms(row['cpu_ms'])} | {ms(row['wall_ms'])} | {shown} |")
    add("\nReproduce: `make bench-sched` (each binary with `--benchmark_repetitions=5 "
        "--benchmark_report_aggregates_only=true`).")


def render(res, peers, binary):
    p = peers["stats"] if peers else {}
    tsp = p.get(f"tsp slots{SLOTS}", {})
    slurm = p.get("slurm default", {})
    slurm_fix = p.get("slurm epilog", {})
    lines = []
    add = lines.append
    add("# Benchmarks\n")
    add("Made by `make bench` (bench/bench.py; the peers by `../shared/bench/peers.sh`, unchanged),")
    add("everything in one run on one machine. Each figure is the median of the rounds with")
    add("(min–max). Ratios compare medians measured in this same run: for times, trainq ÷ peer")
    add("(below 1 is faster); for rates, trainq ÷ peer (above 1 is faster).\n")
    add(f"- machine: {machine()}")
    add(f"- trainq {git_version()} (release build; each submit is fsync'd before it is acknowledged)")
    add(f"- this disk: one 4 KiB write + fdatasync takes {res['fsync'].fmt(1000, 2)} ms, the "
        "floor under one durable CLI submit")
    if peers:
        add(f"- peers: {peers['versions']['slurm']}; {peers['versions']['tsp']}")
    else:
        add("- peers: not measured in this run (BENCH_PEERS=0)")
    add(f"- N_JOBS={N_JOBS} trivial jobs (`true`) per round, ROUNDS={ROUNDS}, "
        f"LAT_SAMPLES={LAT_SAMPLES}, SLOTS={SLOTS}\n")
    add("## Submit, drain, latency\n")
    add("| system | submit N jobs s | jobs/s | first submit → all done s | idle latency ms |")
    add("| --- | --- | --- | --- | --- |")
    cli_submit, cli_done = res["cli"]
    batch_submit, batch_done = res["batch"]
    lat = res["latency"]
    add(f"| trainq (one CLI call per job) | {cli_submit.fmt()} | {N_JOBS / cli_submit.median:.0f} "
        f"| {cli_done.fmt(digits=2)} | {lat.fmt(1000, 1)} |")
    add(f"| trainq (`submit --from`, one request) | {batch_submit.fmt()} | "
        f"{N_JOBS / batch_submit.median:.0f} | {batch_done.fmt(digits=2)} | |")
    for name, s in sorted(p.items()):
        add(f"| {name} | {s['submit'].fmt()} | {N_JOBS / s['submit'].median:.0f} "
            f"| {s['all_done'].fmt(digits=2)} | {s['latency'].fmt(1000, 1)} |")
    if p:
        add("\n| trainq ÷ peer | CLI submit rate | batch submit rate | drain time | idle latency |")
        add("| --- | --- | --- | --- | --- |")
        for name, s in sorted(p.items()):
            add(f"| {name} | {ratio(cli_submit, s['submit'], True)} | "
                f"{ratio(batch_submit, s['submit'], True)} | {ratio(cli_done, s['all_done'])} | "
                f"{ratio(lat, s['latency'])} |")
    sc = res["scale"]
    add("\n## trainq alone\n")
    add("| measurement | figure |")
    add("| --- | --- |")
    add(f"| turnover: a job exits → the next waiting job starts (1 slot) | "
        f"{res['turnover'].fmt(1000, 1)} ms |")
    add(f"| {SCALE_JOBS} jobs submitted in one `submit --from` | {sc['submit_s']:.2f} s "
        f"({sc['jobs_per_s']:.0f} jobs/s) |")
    add(f"| `trainq ls --limit 50` with {SCALE_JOBS} queued | {sc['ls_page'].fmt(1000, 1)} ms |")
    add(f"| `trainq show ID` with {SCALE_JOBS} queued | {sc['show'].fmt(1000, 1)} ms |")
    add(f"| daemon RSS with {SCALE_JOBS} queued | {sc['rss'] / (1 << 20):.1f} MiB |")
    add(f"| daemon restart with {SCALE_JOBS} queued (stop, then a command until it answers) | "
        f"{sc['restart'].fmt(digits=2)} s |")
    for key, label in (("idle0", "no GPUs"), ("idle8", "8 simulated GPUs sampled every second")):
        add(f"| idle daemon, {label}: CPU over {IDLE_SECONDS:.0f} s (schedstat, ns) | "
            f"{res[key]['cpu_pct']:.4f} % ({res[key]['ms_per_min']:.2f} ms per minute) |")
        add(f"| idle daemon, {label}: RSS | {res[key]['rss'] / (1 << 20):.1f} MiB |")
    if res.get("million"):
        import scale  # it uses this module's helpers
        n, rows = res["million"]
        table = scale.render(rows)
        add(f"\n## {n:,} queued jobs\n")
        add("bench/scale.py (`make bench-scale`): one `submit --gpus 1 --mem 1GiB --from FILE` of "
            f"{n:,} lines `true` to a daemon whose one simulated GPU is full, then what a user "
            "pays with that queue.\n")
        for line in table:
            add(line)
    add("\n## Reaching the daemon\n")
    for line in transport.render(res["transport"], TRANSPORT_RUNS):
        add(line)
    if res.get("cluster"):
        add("\n## A cluster on Redis\n")
        add("What a cluster user pays beside a personal daemon (bench/cluster.py, "
            "[cluster.md](cluster.md#benchmarks)).\n")
        for line in cluster.render(res["cluster"], machine()):
            add(line)
    if res.get("phases"):
        builds, medians = res["phases"]
        add("\n## One submit and one start, phase by phase\n")
        add("bench/trace_start.py: the kernel's tracepoints (`perf record -a`: exec, fork, exit, "
            "accept, sendmsg, fdatasync) time each step of an idle submit of `sh -c 'echo x > "
            "FILE'` without slowing it as strace would. The job's cgroups are joined in the "
            "second-to-last phase: the build before wrote to cgroup v1's `cgroup.procs`, where "
            "the first process moved after a quiet moment waits one RCU grace period in the "
            "kernel; this one writes to `tasks`, which takes no such lock.\n")
        labels = ["this build" if b == os.path.dirname(binary) else
                  f"{source_commit(b)} (before)" for b in builds]
        for line in trace_start.render(medians, labels):
            add(line)
    add("\n## Start-up\n")
    add(f"Whole process, median of {STARTUP_RUNS} runs each, interleaved; what every `trainq` "
        "command pays before it talks to the daemon.\n")
    add("| process | ms | ÷ /bin/true |")
    add("| --- | --- | --- |")
    base = res["startup"]["/bin/true"]
    for name, st in res["startup"].items():
        add(f"| `{name}` | {st.fmt(1000, 2)} | {st.median / base.median:.2f}× |")
    render_passes(res, add)
    add("\n## Goals\n")
    add("| goal | where we stand |")
    add("| --- | --- |")
    tsp_rate = N_JOBS / tsp["submit"].median if tsp else None
    ver = res["startup"]["trainq --version"].median / res["startup"]["/bin/true"].median
    add(f"| CLI submit ≥ task-spooler's rate, every acknowledged submit on disk | "
        f"{N_JOBS / cli_submit.median:.0f} jobs/s"
        + (f" ({ratio(cli_submit, tsp['submit'], True)} of task-spooler's {tsp_rate:.0f})"
           if tsp else "") + " |")
    if tsp:
        add(f"| idle submit → running ≤ 1.5× task-spooler | {ratio(lat, tsp['latency'])} "
            f"({lat.median * 1000:.1f} ms) |")
        add(f"| {N_JOBS}-job drain ≤ 1.5× task-spooler | {ratio(cli_done, tsp['all_done'])} |")
    add(f"| `trainq --version` ≤ 1.5× `/bin/true` | {ver:.2f}× |")
    add(f"| a job's exit → the next job running ≤ 5 ms | {res['turnover'].median * 1000:.1f} ms |")
    add(f"| `submit --from` of 100,000 jobs ≥ 20,000 jobs/s | {sc['jobs_per_s']:.0f} jobs/s "
        f"({SCALE_JOBS} jobs) |")
    if res.get("million"):
        n, rows = res["million"]

        def million(prefix):
            return next((figure for label, figure in rows if label.startswith(prefix)), "?")
        add(f"| `ls --limit 50` with {n:,} queued ≤ 10 ms | "
            f"{million('`trainq ls --limit 50`')} |")
        add(f"| daemon RSS with {n:,} queued ≤ 256 MiB | {million('daemon RSS with')} "
            f"({million('daemon RSS after the restart')} after a restart) |")
        add(f"| restart with {n:,} queued ≤ 5 s | {million('restart:')} |")
    turn = (res.get("daemon") or {}).get("rows", {}).get("BM_TurnAfterExits/100000")
    if turn:
        add(f"| a pass after 4 exits ≤ 50 ms with 1,000,000 waiting | {turn['cpu_ms']:.0f} ms CPU "
            "with 100,000 waiting (a million: `BENCH_MILLION=1 make bench-sched`) |")
    add(f"| idle daemon ≤ 0.5 % CPU | {res['idle0']['cpu_pct']:.4f} % (8 GPUs: "
        f"{res['idle8']['cpu_pct']:.4f} %) |")
    add("\nReproduce: `make bench` (add `BENCH_PEERS=0` to skip the peers).")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
