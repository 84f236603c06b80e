"""Tests that need a real NVIDIA GPU, NVML and a CUDA build of PyTorch (label `gpu`).

`make test-gpu` runs them; `make test` (and CI, which has no GPU) leaves this label out.
They use the same harness as the integration tests, without simulated GPUs: the daemon loads
the real libnvidia-ml.so.1.
"""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from conftest import FAKE_TRAIN, GIB, make_trainq, wait_for  # noqa: E402,F401


@pytest.fixture
def real(make_trainq):
    # A short OOM back-off, so the retry of a real out-of-memory death comes within the test.
    t = make_trainq(gpus=[], oom_backoff="1s")
    t.env.pop("TRAINQ_FAKE_GPUS", None)
    return t


def nvidia_smi_uuids():
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_nvml_sees_the_same_gpus_as_nvidia_smi(real):
    doc = real.gpus()
    assert doc["source"] == "nvml", doc
    assert [g["uuid"] for g in doc["gpus"]] == nvidia_smi_uuids()
    for g in doc["gpus"]:
        assert g["memory_total"] > 0 and g["processes_known"] in (True, False)


def test_peak_memory_of_a_real_allocation_is_recorded(real):
    job = real.submit("--mem", "4GiB", cmd=[sys.executable, FAKE_TRAIN, "--torch", "--mem-gib", "2",
                                            "--duration", "4"])
    done = real.wait_state(job, "succeeded", timeout=120)
    # NVML's per-process figure includes the CUDA context, so it is at least the tensor.
    assert done["attempts"][0]["peak_mem_bytes"] >= 2 * GIB, done


def test_real_pytorch_oom_is_retried(real):
    job = real.submit("--mem", "1GiB", "--retries", "2",
                      cmd=[sys.executable, FAKE_TRAIN, "--torch", "--mem-gib", "0.5", "--duration", "1",
                           "--oom-on-attempts", "1"])
    done = real.wait_state(job, "succeeded", timeout=180)
    first, second = done["attempts"][0], done["attempts"][1]
    assert first["oom"] is True and first["state"] == "failed", first
    assert second["state"] == "succeeded", second
    log = open(first["log_path"]).read()
    assert "OutOfMemoryError" in log or "CUDA out of memory" in log, log[-2000:]


def test_torchrun_tree_is_stopped_on_cancel(real, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text("import os, time, torch\n"
                      "x = torch.empty(1 << 28, dtype=torch.uint8, device='cuda')\n"
                      "open(os.environ['PIDS'] + '/' + str(os.getpid()), 'w').close()\n"
                      "time.sleep(600)\n")
    pids = tmp_path / "pids"
    pids.mkdir()
    job = real.submit("--mem", "2GiB", "--env", f"PIDS={pids}",
                      cmd=[sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "1", str(script)])
    worker = int(wait_for(lambda: os.listdir(pids), timeout=120, what="the torchrun worker")[0])
    real.run("cancel", str(job))
    real.wait_state(job, "cancelled", timeout=60)
    assert not os.path.exists(f"/proc/{worker}") or "Z" in open(f"/proc/{worker}/stat").read().split()[2]
