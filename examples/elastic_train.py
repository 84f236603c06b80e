#!/usr/bin/env python3
"""A data-parallel training loop that resumes at whatever size it is given.

trainq resizes an elastic job (`--gpus MIN:MAX`) by stopping it and starting it again on
more or fewer GPUs under the same id. This loop is written for that: one process per GPU
under torchrun, DistributedDataParallel, and

  * a checkpoint (model, optimizer, step) saved when the stop's SIGTERM comes (or the
    --signal warning, with --on usr1), read back when it starts again;
  * the same global batch at every size: each step takes --global-batch samples, each
    process --device-batch at a time, and gradient accumulation makes up the rest
    (accumulation = global batch / (processes x device batch)), so a step means the same
    update on 1 GPU or 8, and the learning rate needs no change;
  * the samples of a step decided by the step alone, so the data a step sees does not
    depend on how many processes share it.

  trainq submit --gpus 1:4 -- torchrun examples/elastic_train.py --steps 5000

(torchrun reads the number of processes and a private port from the variables trainq sets.)

Each attempt appends one line to --progress (rank 0): its attempt, restart count, size,
accumulation and the steps it ran.
"""
import argparse
import json
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def batch(step, global_batch):
    """The samples of `step`: the same whatever the number of processes."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(global_batch, 16, generator=g)
    return x, x.sum(dim=1, keepdim=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--step-time", type=float, default=0.0, help="seconds a step takes at least")
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--device-batch", type=int, default=16)
    p.add_argument("--ckpt", default="ckpt/elastic.pt")
    p.add_argument("--on", choices=["term", "usr1"], default="term",
                   help="the signal to save on: the stop's SIGTERM, or --signal USR1's warning")
    p.add_argument("--progress", default="progress.jsonl")
    args = p.parse_args()
    # First: a stop that comes while the processes meet or load is not lost.
    stop = []
    signal.signal(signal.SIGTERM if args.on == "term" else signal.SIGUSR1,
                  lambda *_: stop.append(True))

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    per_step = world * args.device_batch
    if args.global_batch % per_step:
        raise SystemExit(f"--global-batch {args.global_batch} is not a multiple of "
                         f"{world} processes x --device-batch {args.device_batch}")
    accumulation = args.global_batch // per_step
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    if os.path.exists(args.ckpt):
        state = torch.load(args.ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    ddp = DistributedDataParallel(model)
    first = step
    attempt = os.environ.get("TRAINQ_ATTEMPT", "?")
    restarts = os.environ.get("TRAINQ_RESTART_COUNT", "?")
    if rank == 0:
        print(f"attempt {attempt} (restart count {restarts}): {world} processes, accumulation "
              f"{accumulation}, starting at step {step}", flush=True)

    def finish(ended):
        if rank == 0:
            os.makedirs(os.path.dirname(args.ckpt) or ".", exist_ok=True)
            tmp = args.ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
            os.replace(tmp, args.ckpt)
            with open(args.progress, "a") as f:
                f.write(json.dumps({"attempt": attempt, "restarts": restarts, "world": world,
                                    "accumulation": accumulation, "first": first, "last": step,
                                    "ended": ended}) + "\n")
            print(f"saved a checkpoint at step {step} ({ended})", flush=True)

    loss_fn = torch.nn.MSELoss()
    while step < args.steps:
        # Every process stops at the same step: one that was signalled tells the others.
        flag = torch.tensor([1.0 if stop else 0.0], device=device)
        dist.all_reduce(flag)
        if flag.item() > 0:
            finish("stopped")
            return
        started = time.monotonic()
        x, y = batch(step, args.global_batch)
        opt.zero_grad()
        for micro in range(accumulation):
            at = (micro * world + rank) * args.device_batch
            xs, ys = x[at:at + args.device_batch].to(device), y[at:at + args.device_batch].to(device)
            last = micro == accumulation - 1
            ctx = ddp.no_sync() if not last else torch.enable_grad()
            with ctx:
                # Averaged over the global batch: DDP averages over processes, this over steps.
                (loss_fn(ddp(xs), ys) / accumulation).backward()
        opt.step()
        step += 1
        time.sleep(max(0.0, args.step_time - (time.monotonic() - started)))
    finish("finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
