#!/usr/bin/env bash
# `make demo`: a personal trainq daemon runs a small sweep. Several jobs share a GPU by
# memory, one dies of out-of-memory and succeeds on its retry, the queue drains.
set -euo pipefail
bin=$(realpath "${1:-build/release/trainq}")
here=$(cd "$(dirname "$0")/.." && pwd)
job="$here/examples/fake_train.py"
root=$(mktemp -d /tmp/trainq-demo.XXXXXX)
export TRAINQ_STATE_DIR="$root/state"
mkdir -p "$TRAINQ_STATE_DIR" "$root/usage"
cat >"$TRAINQ_STATE_DIR/config.toml" <<TOML
oom_backoff = "2s"
sample_interval = "200ms"
cpu_slots = 8
TOML

real_gpus=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  real_gpus=1
fi
if [ "$real_gpus" = 1 ] && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "== trainq demo on this machine's REAL GPUs (PyTorch allocates real memory) =="
  nvidia-smi -L
  gpu_args=(--torch)
  mem=(--mem 2GiB) ; gib=2
else
  cat <<'BANNER'
==========================================================================
  NO USABLE GPU HERE: this demo runs on SIMULATED GPUs
  (two simulated 80 GiB A100s; another user already holds 15 GiB of GPU 1)
==========================================================================
BANNER
  export TRAINQ_FAKE_GPUS="$root/gpus.json"
  cat >"$TRAINQ_FAKE_GPUS" <<JSON
{"gpus": [
  {"uuid": "GPU-sim-0", "name": "Simulated A100 80GB", "memory_total": "80GiB", "memory_used_by_others": 0, "utilization": 0},
  {"uuid": "GPU-sim-1", "name": "Simulated A100 80GB", "memory_total": "80GiB", "memory_used_by_others": "15GiB", "utilization": 0}],
 "usage_dir": "usage"}
JSON
  gpu_args=(--usage-dir "$root/usage")
  mem=(--mem 30GiB) ; gib=28
fi

tq() { "$bin" "$@"; }
cleanup() { tq daemon stop >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "state dir: $TRAINQ_STATE_DIR"
echo
echo "== queue a learning-rate sweep: 5 jobs, each needs ${mem[1]} on one GPU =="
for lr in 1e-4 3e-4 1e-3 3e-3 1e-2; do
  id=$(tq submit "${mem[@]}" --name "lr=$lr" -- python3 "$job" "${gpu_args[@]}" \
        --mem-gib "$gib" --alloc-after 1 --duration 4)
  echo "  job $id: lr=$lr"
done
oom=$(tq submit "${mem[@]}" --name "big-batch" -- python3 "$job" "${gpu_args[@]}" \
        --mem-gib "$gib" --duration 3 --oom-on-attempts 1)
echo "  job $oom: big-batch (dies of CUDA out-of-memory on its first attempt)"
cpu=$(tq submit --gpus 0 --name "eval-cpu" -- python3 "$job" --duration 2)
echo "  job $cpu: eval-cpu (a CPU job)"
echo

tq gpus
while :; do
  echo
  echo "== $(date +%T) =="
  tq ls
  [ "$(tq ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 0 ] && break
  sleep 2
done

echo
echo "== the queue drained: every job, every attempt =="
tq ls --all
echo
echo "== job $oom: out of memory on attempt 1, retried =="
tq show "$oom"
failed=$(tq ls --json --state failed,cancelled | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
succeeded=$(tq ls --json --state succeeded | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
echo
echo "summary: $succeeded jobs succeeded, $failed failed; logs and records under $TRAINQ_STATE_DIR"
[ "$failed" = 0 ]
