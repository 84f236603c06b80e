#!/usr/bin/python3
"""docs/images/dashboard.png: the real dashboard after a few minutes of a small lab's jobs on
four simulated GPUs (docs/simulated-gpus.md). Usage: dashboard_screenshot.py TRAINQ OUT.png
Knobs (environment): SHOT_SECONDS=240 (how long the jobs run before the picture)."""
import json
import math
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from bench import Trainq, log, sim_gpus  # noqa: E402
from conftest import free_port  # noqa: E402
from devtools import Browser  # noqa: E402

SECONDS = float(os.environ.get("SHOT_SECONDS", 240))
FAKE = os.path.join(ROOT, "examples", "fake_train.py")


def main():
    binary, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    port = free_port()
    gpus = sim_gpus(4)
    tq = Trainq(binary, "shot", {"listen": [f"127.0.0.1:{port}"], "cpu_slots": 4,
                                 "oom_backoff": "20s", "ramp_up": "30s"}, gpus=gpus)
    gpu_file = tq.env["TRAINQ_FAKE_GPUS"]
    usage = os.path.join(tq.root, "usage")
    os.makedirs(usage, exist_ok=True)
    stop = threading.Event()

    def weather():
        """Utilisation of the GPUs that run jobs, another user's process on GPU 3."""
        t = 0
        while not stop.is_set():
            busy = {}
            for g in json.loads(tq.cli("gpus", "--json"))["gpus"]:
                busy[g["index"]] = bool(g["attempts"])
            for i, g in enumerate(gpus):
                wave = 0.5 + 0.5 * math.sin(t / 9 + i)
                g["utilization"] = int(80 + 18 * wave) if busy.get(i) else 0
            gpus[3]["memory_used_by_others"] = "6GiB" if t > 30 else 0
            tmp = gpu_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"gpus": gpus}, f)
            os.replace(tmp, gpu_file)
            t += 2
            stop.wait(2)

    threading.Thread(target=weather, daemon=True).start()

    def job(name, opts, *fake):
        cmd = ["python3", FAKE, "--usage-dir", usage, *fake]
        return tq.cli("submit", "--name", name, *opts, "--", *cmd).strip()

    try:
        big = job("llama-7b-finetune", ["--gpus", "2", "--mem", "60GiB"],
                  "--mem-gib", "54", "--alloc-after", "40", "--duration", "3600")
        job("resnet50-lr3e-4", ["--gpus", "1", "--mem", "24GiB"],
            "--mem-gib", "21", "--alloc-after", "15", "--duration", "3600")
        job("bert-base-sweep-3", ["--gpus", "1", "--mem", "30GiB", "--retries", "2"],
            "--mem-gib", "28", "--alloc-after", "10", "--duration", "3600",
            "--oom-on-attempts", "1")
        job("vit-smoke-test", ["--gpus", "1", "--mem", "8GiB"], "--mem-gib", "7",
            "--alloc-after", "5", "--duration", "60")
        job("data-prep", ["--gpus", "0"], "--duration", "20", "--exit", "1")
        time.sleep(15)
        job("llama-70b-eval", ["--gpus", "4", "--mem", "70GiB"], "--duration", "600")
        job("resnet50-lr1e-3", ["--gpus", "1", "--mem", "40GiB"], "--duration", "600")
        job("report", ["--gpus", "0", "--after", big], "--duration", "5")
        log(f"jobs run for {SECONDS:.0f} s")
        time.sleep(SECONDS)
        url = tq.cli("dashboard", "--no-open").strip()
        browser = Browser(1400, 1560)
        try:
            browser.go(url)
            browser.wait("document.querySelectorAll('#gpus .chart canvas').length >= 4 && "
                         "document.querySelectorAll('#queue tr[data-job]').length >= 6",
                         timeout=60, what="the page")
            time.sleep(3)
            browser.screenshot(os.path.abspath(out))
        finally:
            browser.close()
        log(f"wrote {out}")
    finally:
        stop.set()
        tq.cli("cancel", "--all-mine")  # a blocked job cancelled with its dependency is skipped
        tq.stop()


if __name__ == "__main__":
    main()
