#!/usr/bin/env python3
"""A stand-in for a training job, used by `make demo` and the integration tests.

On simulated GPUs (--usage-dir) it declares GPU memory the way the simulated probe reads it:
a usage file naming its pid, optionally only after a delay (a job that allocates late).
With --torch and a CUDA build of PyTorch it allocates real GPU memory instead, and its
out-of-memory attempts allocate more than the GPU has, so the error is PyTorch's own.
Without PyTorch an out-of-memory attempt prints PyTorch's message as PyTorch words it.
"""
import argparse
import json
import os
import sys
import time

OOM_TEXT = """Traceback (most recent call last):
  File "train.py", line 42, in <module>
    loss = model(batch).sum()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use. Of the allocated memory 76.21 GiB is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated.
"""


def allocate_torch(n_gpus, mem_gib, oom):
    """Real allocations; an OOM attempt asks for more than the GPU has and lets PyTorch fail."""
    import torch  # only with --torch: the demo checks that a CUDA build is importable
    tensors = []
    for i in range(n_gpus):
        total = torch.cuda.get_device_properties(i).total_memory
        size = 2 * total if oom else int(mem_gib * (1 << 30))
        if size > 0:
            tensors.append(torch.empty(size, dtype=torch.uint8, device=f"cuda:{i}"))
    return tensors


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--usage-dir", default="", help="simulated GPUs: where usage files go")
    p.add_argument("--torch", action="store_true", help="allocate real GPU memory with PyTorch")
    p.add_argument("--mem-gib", type=float, default=0.0, help="GiB to 'allocate' on each GPU")
    p.add_argument("--alloc-after", type=float, default=0.0, help="seconds before allocating")
    p.add_argument("--duration", type=float, default=0.0, help="seconds to run")
    p.add_argument("--oom-on-attempts", default="", help="comma list of attempts that die of OOM")
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--env-out", default="", help="write the environment as JSON here")
    p.add_argument("--wait-file", default="", help="run until this file exists")
    p.add_argument("--marker", default="", help="append a line here when an attempt starts")
    p.add_argument("--oom-text", default=OOM_TEXT, help="what an out-of-memory attempt prints")
    a = p.parse_args()

    attempt = os.environ.get("TRAINQ_ATTEMPT", "0")
    print(f"fake_train: job {os.environ.get('TRAINQ_JOB_ID')} attempt {attempt} "
          f"on CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}", flush=True)
    if a.marker:
        with open(a.marker, "a") as f:
            f.write(f"job {os.environ.get('TRAINQ_JOB_ID')} attempt {attempt} pid {os.getpid()}\n")
    if a.env_out:
        with open(a.env_out + ".tmp", "w") as f:
            json.dump(dict(os.environ), f)
        os.replace(a.env_out + ".tmp", a.env_out)
    time.sleep(a.alloc_after)
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    oom_now = attempt in [s for s in a.oom_on_attempts.split(",") if s]
    held = allocate_torch(len(gpus), a.mem_gib, oom_now) if a.torch else None
    for g in gpus:
        if a.mem_gib > 0 and a.usage_dir:
            path = os.path.join(a.usage_dir, f"{os.getpid()}-{g}.json")
            with open(path + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "gpu": int(g), "bytes": int(a.mem_gib * (1 << 30))}, f)
            os.replace(path + ".tmp", path)
    if oom_now:
        time.sleep(0.2)
        sys.stderr.write(a.oom_text.rstrip("\n") + "\n")
        sys.exit(1)
    deadline = time.monotonic() + a.duration
    while time.monotonic() < deadline or (a.wait_file and not os.path.exists(a.wait_file)):
        time.sleep(0.02)
    del held
    print("fake_train: done", flush=True)
    sys.exit(a.exit)


if __name__ == "__main__":
    main()
