#!/usr/bin/env python3
"""A PyTorch training loop that survives being stopped, as trainq's preemption expects.

Warned by a signal (trainq's --signal, Slurm's --signal), it saves a checkpoint (model,
optimizer, step) and then does what the two common libraries do:
  --on usr1   PyTorch Lightning's SLURMEnvironment: save on SIGUSR1, then ask to be requeued
              (`trainq requeue`, or `scontrol requeue $SLURM_JOB_ID` in an sbatch job) and
              wait to be stopped;
  --on term   Hugging Face Trainer's way: save on SIGTERM and exit.
Started again, it resumes from the checkpoint, so the steps of all its attempts add up to
--steps. Each attempt appends a line to --progress: its attempt, restart count and the steps
it ran, which the tests read.

  trainq submit --preemptible --requeue --signal USR1@60 --checkpoint 'ckpt/*.pt' -- \
      python3 examples/resumable_train.py --steps 1000
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--step-time", type=float, default=0.05, help="seconds a step takes at least")
    p.add_argument("--ckpt", default="ckpt/last.pt")
    p.add_argument("--on", choices=["usr1", "term"], default="usr1")
    p.add_argument("--progress", default="progress.jsonl")
    args = p.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    if os.path.exists(args.ckpt):
        state = torch.load(args.ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    first = step
    attempt = os.environ.get("TRAINQ_ATTEMPT", "?")
    restarts = os.environ.get("TRAINQ_RESTART_COUNT", "?")
    print(f"attempt {attempt} (restart count {restarts}): starting at step {step}", flush=True)

    warned = []
    sig = signal.SIGUSR1 if args.on == "usr1" else signal.SIGTERM
    signal.signal(sig, lambda *_: warned.append(True))

    def save():
        os.makedirs(os.path.dirname(args.ckpt) or ".", exist_ok=True)
        tmp = args.ckpt + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
        os.replace(tmp, args.ckpt)
        print(f"saved a checkpoint at step {step}", flush=True)

    def note(ended):
        with open(args.progress, "a") as f:
            f.write(json.dumps({"attempt": attempt, "restarts": restarts, "first": first,
                                "last": step, "ended": ended}) + "\n")

    x = torch.randn(64, 16)
    y = x.sum(dim=1, keepdim=True)
    while step < args.steps:
        if warned:
            save()
            note("saved")
            if args.on == "term":
                sys.exit(0)
            job = os.environ.get("SLURM_JOB_ID")
            requeue = ["scontrol", "requeue", job] if job else ["trainq", "requeue"]
            print("asking to be requeued: " + " ".join(requeue), flush=True)
            subprocess.run(requeue, check=False)
            while True:  # the stop comes
                time.sleep(1)
        started = time.monotonic()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        time.sleep(max(0.0, args.step_time - (time.monotonic() - started)))
    note("finished")
    print(f"finished at step {step}, loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
