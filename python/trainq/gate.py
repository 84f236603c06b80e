"""The in-script GPU gate: `with trainq.gpu(mem="20GiB") as g:` (docs/python.md).

The running script becomes a job: it waits in the queue like any other, and once placed it
holds its GPUs — CUDA_VISIBLE_DEVICES set before the block runs — until the block ends or
the process dies (the daemon watches its pid). Enter the block before importing torch: CUDA
reads CUDA_VISIBLE_DEVICES once, when it starts. When the block ends the variables the gate
set are as they were before it.
"""

import os
import sys
import time
import warnings

from .client import TERMINAL_STATES, Client
from .errors import TrainqError

# What frameworks print when a GPU runs out of memory; the daemon matches the same text to
# queue the gate again.
_OOM_MARKS = ("out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "RESOURCE_EXHAUSTED",
              "CUBLAS_STATUS_ALLOC_FAILED")


class OutOfMemory(TrainqError):
    """The block ran out of GPU memory. The GPUs were released and the gate is queued again
    (while retries remain): enter `trainq.gpu()` again to wait for its next turn."""

    def __init__(self, message, job_id):
        super().__init__("out_of_memory", message)
        self.job_id = job_id


class Gate:
    """What `trainq.gpu()` gives: the job holding the GPUs and which they are."""

    def __init__(self, client, job_id):
        self.client = client
        self.job_id = job_id
        self.gpus = []        # NVML indices, as in CUDA_VISIBLE_DEVICES
        self.attempt = 0

    def __repr__(self):
        return f"Gate(job={self.job_id}, gpus={self.gpus})"


# A gate queued again after an out-of-memory release, by the options it was asked with: the
# next `trainq.gpu()` of this process with the same options waits for it, not a new job.
_requeued = {}


def _set_environment(values):
    """Sets `values` in os.environ and returns what they replaced: each name's old value, None
    for a name that was unset."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    return before


def _restore_environment(before):
    """Undoes _set_environment: names that were unset are removed, the others get back their
    old values. Other variables are left as the block made them."""
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _is_oom(error):
    text = f"{type(error).__name__}: {error}"
    return type(error).__name__ == "OutOfMemoryError" or any(m in text for m in _OOM_MARKS)


def _warn_if_cuda_started():
    torch = sys.modules.get("torch")
    try:
        started = torch is not None and torch.cuda.is_initialized()
    except Exception:  # noqa: BLE001 - any torch without cuda
        started = False
    if started:
        warnings.warn("trainq.gpu(): CUDA was started before the gate; CUDA_VISIBLE_DEVICES "
                      "set now will not apply. Enter the block before using torch.cuda.",
                      RuntimeWarning, stacklevel=3)


class gpu:  # noqa: N801 - used as `with trainq.gpu(...)`, like open()
    """Waits in trainq's queue for `gpus` GPUs with `mem` free on each (None: whole GPUs),
    then holds them for the block. Keyword arguments as Client.submit's (name, priority,
    retries, time, ...); `client` a Client (default: found as the CLI finds its daemon);
    `quiet` False prints the place in line on stderr while waiting."""

    def __init__(self, mem=None, gpus=1, client=None, quiet=False, poll=0.5, **fields):
        self._client = client or Client()
        self._ask = dict(fields, mem=mem, gpus=gpus)
        self._key = repr(sorted(self._ask.items()))
        self._quiet = quiet
        self._poll = poll
        self._gate = None
        self._environment_before = {}

    def __enter__(self):
        _warn_if_cuda_started()
        job_id = _requeued.pop(self._key, None)
        if job_id is None:
            job_id = self._client.submit([sys.executable, *sys.argv], gate=True, **self._ask)
        self._gate = Gate(self._client, job_id)
        try:
            job = self._wait_placed(job_id)
        except BaseException:
            self._cancel_quietly(job_id)
            raise
        attempt = job["attempts"][-1]
        self._gate.attempt = attempt["n"]
        self._gate.gpus = list(attempt["gpu_indices"])
        self._environment_before = _set_environment({
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in self._gate.gpus),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "TRAINQ_JOB_ID": str(job_id)})
        return self._gate

    def __exit__(self, kind, error, tb):
        # First, so that the environment is back even when the release below raises.
        _restore_environment(self._environment_before)
        self._environment_before = {}
        job_id = self._gate.job_id
        if error is None:
            self._release(job_id, 0, "")
            return False
        text = f"{type(error).__name__}: {error}"
        job = self._release(job_id, 1, text)
        if _is_oom(error) and job is not None and job.get("state") == "queued":
            _requeued[self._key] = job_id
            raise OutOfMemory(f"job {job_id}: {text}; queued again", job_id) from error
        return False

    def _wait_placed(self, job_id):
        last = None
        while True:
            job = self._client.get(job_id)
            state = job["state"]
            if state == "running" and job["attempts"]:
                return job
            if state in TERMINAL_STATES:
                raise TrainqError("gate_ended", f"job {job_id} is {state}: {job['reason']}")
            if not self._quiet and job["reason"] != last:
                last = job["reason"]
                print(f"trainq: job {job_id} {state}: {last}", file=sys.stderr, flush=True)
            time.sleep(self._poll)

    def _release(self, job_id, exit_code, text):
        try:
            answer = self._client._call("POST", f"/v1/jobs/{job_id}/release",
                                        {"exit_code": exit_code, "error": text[-65536:]})
        except TrainqError as e:
            warnings.warn(f"trainq.gpu(): releasing job {job_id}: {e}", RuntimeWarning,
                          stacklevel=3)
            return None
        return answer.get("job")

    def _cancel_quietly(self, job_id):
        try:
            self._client.cancel(job_id)
        except TrainqError:
            pass
