#!/usr/bin/python3
"""`make bench-dashboard`: what watching the queue costs (docs/dashboard.md, "Figures").

- the dashboard's load in headless Chromium with QUEUE waiting jobs (default 10,000): from
  navigation to the queue's first rows and a GPU chart drawn, and the page's JS heap;
- a submit's latency (`trainq submit -- true`, wall time) with no event-stream follower and
  with 100 followers that never read, rounds interleaved;
- what the GPU history takes per GPU per sample, read from /metrics, and so for an hour of 8;
- the daemon's CPU while idle with the QUEUE jobs waiting, with no follower and with one
  (the event stream looks at the store once a second while anyone follows).

Knobs (environment): QUEUE=10000 LOADS=5 SUBMITS=30 FOLLOWERS=100
"""
import http.client
import json
import os
import re
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
from bench import (Trainq, git_version, log, machine, proc_cpu_ns, sim_gpus,  # noqa: E402
                   wait_until)
from conftest import free_port  # noqa: E402
from devtools import Browser  # noqa: E402

QUEUE = int(os.environ.get("QUEUE", 10000))
LOADS = int(os.environ.get("LOADS", 5))
SUBMITS = int(os.environ.get("SUBMITS", 30))
FOLLOWERS = int(os.environ.get("FOLLOWERS", 100))
IDLE_SECONDS = float(os.environ.get("IDLE_SECONDS", 20))


def get(port, path, token):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return body


def page_load(tq, port, url):
    browser = Browser()
    try:
        times, heaps = [], []
        for _ in range(LOADS):
            browser.go("about:blank")
            t0 = time.monotonic()
            browser.go(url)
            browser.wait("document.querySelectorAll('#queue tr[data-job]').length >= 500 && "
                         "document.querySelectorAll('#gpus .chart canvas').length > 0",
                         timeout=120, what="the queue and a chart")
            times.append(time.monotonic() - t0)
            heaps.append(browser.call("Runtime.getHeapUsage")["usedSize"])
        rows = browser.eval("document.querySelectorAll('#queue tr[data-job]').length")
        return times, heaps, rows
    finally:
        browser.close()


def silent_followers(port, token, n):
    socks = []
    for i in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.bind((f"127.0.0.{2 + i // 50}", 0))  # max_connections_per_peer is per address
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET /v1/events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n\r\n"
                  .encode())
        socks.append(s)
    return socks


def submit_times(tq, count):
    out = []
    for _ in range(count):
        t0 = time.monotonic()
        tq.cli("submit", "--gpus", "0", "--", "true")
        out.append(time.monotonic() - t0)
    return out


def idle_cpu(pid, seconds=IDLE_SECONDS):
    """The daemon's CPU share over `seconds` of nothing happening."""
    t0, c0 = time.monotonic(), proc_cpu_ns(pid)
    time.sleep(seconds)
    return (proc_cpu_ns(pid) - c0) / 1e9 / (time.monotonic() - t0)


def main():
    binary = os.path.abspath(sys.argv[1])
    port = free_port()
    tq = Trainq(binary, "dash", {"listen": [f"127.0.0.1:{port}"], "cpu_slots": 2},
                gpus=sim_gpus(2))
    try:
        token = tq.cli("token", "create", "bench", "--role", "read").strip()
        url = tq.cli("dashboard", "--no-open").strip()
        # Two long jobs take the GPUs; QUEUE jobs wait for memory behind them.
        for _ in range(2):
            tq.submit(["sleep", "3600"], "--gpus", "1", "--mem", "60GiB")
        log(f"queueing {QUEUE} jobs")
        tq.submit_file(["sleep 1"] * QUEUE, "--gpus", "1", "--mem", "70GiB")
        wait_until(lambda: f'trainq_jobs{{state="queued"}} {QUEUE}\n' in
                   get(port, "/metrics", token).decode(), timeout=300, interval=0.5)
        listing = len(get(port, "/v1/jobs", token))
        log("loading the page")
        times, heaps, rows = page_load(tq, port, url)

        log("idle CPU without and with a follower")
        pid = tq.daemon_pid()
        cpu_alone = idle_cpu(pid)
        follower = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        follower.request("GET", "/v1/events", headers={"Authorization": f"Bearer {token}"})
        stream = follower.getresponse()
        cpu_followed = idle_cpu(pid)
        stream.close()
        follower.close()

        log("submits with and without silent followers")
        tq.cli("cancel", "--all-mine")  # room under max_waiting_jobs_per_user
        tq.cli("pause")  # the submitted jobs stay queued: a submit, not a start, is timed
        base, loaded = [], []
        rounds = 3
        for _ in range(rounds):
            base += submit_times(tq, SUBMITS // rounds)
            socks = silent_followers(port, token, FOLLOWERS)
            wait_until(lambda: f"trainq_event_streams {FOLLOWERS}\n" in
                       get(port, "/metrics", token).decode(), timeout=60, interval=0.1)
            loaded += submit_times(tq, SUBMITS // rounds)
            for s in socks:
                s.close()
            wait_until(lambda: "trainq_event_streams 0\n" in get(port, "/metrics", token).decode(),
                       timeout=60, interval=0.1)

        metrics = get(port, "/metrics", token).decode()
        history = json.loads(get(port, "/v1/gpus/history?since=0", token))
        hist_bytes = int(re.search(r"trainq_gpu_history_bytes (\d+)", metrics).group(1))
        per_point = hist_bytes / (len(history["t"]) * len(history["gpus"]))
        b, lo = statistics.median(base), statistics.median(loaded)
        print(f"\ntrainq {git_version()} on {machine()}\n")
        print("| what | figure |")
        print("| --- | --- |")
        print(f"| dashboard load, {QUEUE:,} jobs waiting (navigation to rows and a chart, "
              f"median of {LOADS}) | {statistics.median(times):.2f} s "
              f"({min(times):.2f}-{max(times):.2f}); {rows} rows drawn; JS heap "
              f"{statistics.median(heaps) / 2**20:.0f} MiB; GET /v1/jobs {listing / 2**20:.1f} MiB |")
        print(f"| `trainq submit` wall time, no follower (median of {len(base)}) | "
              f"{b * 1000:.1f} ms |")
        print(f"| the same with {FOLLOWERS} followers that never read (median of {len(loaded)}) | "
              f"{lo * 1000:.1f} ms ({lo / b:.2f}x) |")
        print(f"| daemon CPU, idle with {QUEUE:,} jobs waiting: no follower / one | "
              f"{cpu_alone * 100:.1f} % / {cpu_followed * 100:.1f} % of a core |")
        print(f"| GPU history per GPU per sample | {per_point:.0f} B ({len(history['t'])} samples "
              f"of {len(history['gpus'])} GPUs: {hist_bytes} B); an hour of 8 GPUs: "
              f"{per_point * 3600 * 8 / 2**20:.1f} MiB |")
    finally:
        tq.stop()


if __name__ == "__main__":
    main()
