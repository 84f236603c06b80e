"""Black-box harness: the real trainq binary, a real daemon, simulated GPUs.

Each test gets a fresh state dir with its own config and simulated-GPU file, and drives the
CLI exactly as a user would. Nothing here fakes trainq itself.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_TRAIN = os.path.join(HERE, "..", "..", "examples", "fake_train.py")
GIB = 1 << 30


def trainq_binary():
    path = os.environ.get("TRAINQ_BIN")
    if not path:
        pytest.fail("TRAINQ_BIN is not set; run the integration tests through ctest")
    return path


def wait_for(predicate, timeout=15.0, interval=0.02, what="condition"):
    """Polls predicate until it returns a truthy value; fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


class Trainq:
    """One trainq instance: a state dir, its simulated GPUs and the CLI."""

    def __init__(self, root, gpus, config):
        self.root = root
        self.state_dir = os.path.join(root, "state")
        os.makedirs(self.state_dir)
        self.gpu_file = os.path.join(root, "gpus.json")
        self.usage_dir = os.path.join(root, "usage")
        os.makedirs(self.usage_dir)
        self.work = os.path.join(root, "work")
        os.makedirs(self.work)
        self.set_gpus(gpus)
        lines = [f"{k} = {json.dumps(v)}" for k, v in config.items()]
        with open(os.path.join(self.state_dir, "config.toml"), "w") as f:
            f.write("\n".join(lines) + "\n")
        self.env = dict(os.environ)
        self.env["TRAINQ_STATE_DIR"] = self.state_dir
        self.env["TRAINQ_FAKE_GPUS"] = self.gpu_file
        self.env.pop("XDG_STATE_HOME", None)

    def set_gpus(self, gpus, **extra):
        """Rewrites the simulated GPU file (atomically); the daemon re-reads it every sample."""
        doc = {"gpus": gpus, "usage_dir": self.usage_dir}
        doc.update(extra)
        tmp = self.gpu_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.gpu_file)

    def run(self, *args, check=True, timeout=60, **kw):
        proc = subprocess.run([trainq_binary(), *args], env=self.env, cwd=kw.pop("cwd", self.work),
                              capture_output=True, text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"trainq {' '.join(args)} exited {proc.returncode}\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def submit(self, *opts, cmd):
        out = self.run("submit", *opts, "--", *cmd).stdout.strip()
        return int(out)

    def fake_job(self, *args):
        """argv of the fake training job, told where the simulated usage files go."""
        return [sys.executable, FAKE_TRAIN, "--usage-dir", self.usage_dir, *args]

    def show(self, job_id):
        return json.loads(self.run("show", str(job_id), "--json").stdout)

    def state(self, job_id):
        return self.show(job_id)["state"]

    def wait_state(self, job_id, states, timeout=20.0):
        states = {states} if isinstance(states, str) else set(states)
        return wait_for(lambda: self.show(job_id) if self.state(job_id) in states else None,
                        timeout=timeout, what=f"job {job_id} to reach {states}")

    def ls(self, *opts):
        return json.loads(self.run("ls", "--json", *opts).stdout)

    def gpus(self):
        return json.loads(self.run("gpus", "--json").stdout)

    def daemon_pid(self):
        out = subprocess.run(["pgrep", "-f", f"daemon --foreground --state-dir {self.state_dir}$"],
                             capture_output=True, text=True)
        pids = [int(p) for p in out.stdout.split()]
        return pids[0] if pids else None

    def daemon_log(self):
        path = os.path.join(self.state_dir, "daemon.log")
        return open(path).read() if os.path.exists(path) else ""

    def cleanup(self):
        self.run("daemon", "stop", check=False, timeout=30)
        # Jobs outlive the daemon by design: stop whatever this instance left running.
        subprocess.run(["pkill", "-KILL", "-f", self.root], capture_output=True)


def gpu(i, total="80GiB", others=0, **kw):
    d = {"uuid": f"GPU-sim-{i}", "name": "Simulated A100 80GB", "memory_total": total,
         "memory_used_by_others": others, "utilization": 0}
    d.update(kw)
    return d


DEFAULT_CONFIG = {"cpu_slots": 16, "sample_interval": "100ms", "grace_period": "1s",
                  "oom_backoff": "1s", "headroom": "256MiB"}


@pytest.fixture
def make_trainq():
    made = []

    def make(gpus=None, **config):
        cfg = dict(DEFAULT_CONFIG)
        cfg.update(config)
        root = tempfile.mkdtemp(prefix="tq-", dir="/tmp")
        t = Trainq(root, [gpu(0)] if gpus is None else gpus, cfg)
        made.append(t)
        return t

    yield make
    for t in made:
        t.cleanup()
        shutil.rmtree(t.root, ignore_errors=True)


@pytest.fixture
def tq(make_trainq):
    return make_trainq()
