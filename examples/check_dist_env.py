#!/usr/bin/env python3
"""A job that checks the distributed-training environment trainq gives a multi-GPU job:
what an unmodified `torchrun train.py` reads. Exits 1 naming every problem; with --out it
writes what it saw as JSON; with --wait-file it stays running until that file exists.
"""
import argparse
import json
import os
import sys
import time


def problems(env, gpus):
    found = []
    visible = [g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    if len(visible) != gpus or len(set(visible)) != gpus:
        found.append(f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r}, want {gpus} GPUs")
    expect = {"TRAINQ_NUM_GPUS": str(gpus), "MASTER_ADDR": "127.0.0.1",
              "PET_MASTER_ADDR": "127.0.0.1", "PET_NPROC_PER_NODE": str(gpus), "PET_NNODES": "1"}
    for name, value in expect.items():
        if env.get(name) != value:
            found.append(f"{name}={env.get(name)!r}, want {value!r}")
    port = env.get("MASTER_PORT", "")
    if not port.isdigit() or not 1024 <= int(port) <= 65535:
        found.append(f"MASTER_PORT={port!r} is not a port")
    if env.get("PET_MASTER_PORT") != port:
        found.append(f"PET_MASTER_PORT={env.get('PET_MASTER_PORT')!r} differs from MASTER_PORT")
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        if name in env:
            found.append(f"{name} is set ({env[name]!r}); torchrun sets it per worker")
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpus", type=int, required=True, help="GPUs the job asked for")
    p.add_argument("--out", default="", help="write the checked variables here as JSON")
    p.add_argument("--wait-file", default="", help="keep running until this file exists")
    a = p.parse_args()
    env = dict(os.environ)
    found = problems(env, a.gpus)
    if a.out:
        keys = ["CUDA_VISIBLE_DEVICES", "TRAINQ_NUM_GPUS", "MASTER_ADDR", "MASTER_PORT",
                "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE", "WORLD_SIZE"]
        with open(a.out + ".tmp", "w") as f:
            json.dump({"env": {k: env.get(k) for k in keys}, "problems": found}, f)
        os.replace(a.out + ".tmp", a.out)
    for problem in found:
        print(f"check_dist_env: {problem}", file=sys.stderr)
    while a.wait_file and not os.path.exists(a.wait_file):
        time.sleep(0.02)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
