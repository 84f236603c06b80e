"""The trainq HTTP API (docs/api.md) from Python: Client submits, lists, waits for, cancels
and retries jobs and reads their logs, talking to the daemon the trainq CLI would use."""

import json
import os
import secrets
import shlex
import shutil
import subprocess
import time
import urllib.parse

from . import _http
from ._server import choose_server
from .errors import Invalid, NotAllowed, NotFound, TrainqError, Timeout, Unavailable, error_for

__all__ = ["Client", "TERMINAL_STATES"]

TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})
LOG_CHUNK = 8 << 20
RESEND_PAUSE = 0.2
_CLI_EXIT_ERRORS = {2: (Invalid, "invalid"), 3: (NotFound, "not_found"),
                    4: (NotAllowed, "permission")}


def _command_list(cmd):
    """`cmd` as argv: a string is split as a shell would (shlex), a list taken as it is."""
    if isinstance(cmd, str):
        return shlex.split(cmd)
    return [os.fspath(arg) if isinstance(arg, os.PathLike) else arg for arg in cmd]


def _check_utf8(field, text):
    """Invalid naming `field` when `text` holds bytes that are not UTF-8 (surrogate escapes
    from os.environ or argv): trainq carries text as it is, never replaced."""
    if not isinstance(text, str):
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid("invalid", f"{field}: not UTF-8 text; trainq carries commands, names and "
                      "environment as UTF-8 text") from None


def _job_environment(overrides):
    """The caller's environment with `overrides` on top; an override of None removes it."""
    env = {k: v for k, v in os.environ.items() if k}
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _id_list(value):
    """An id or ids as the list the API takes."""
    return [value] if isinstance(value, int) else list(value)


def _job_id(job_id):
    """`job_id` as a path segment: a positive int (or its digits), else Invalid."""
    text = str(job_id)
    if isinstance(job_id, bool) or not text.isdecimal() or not text.isascii() or int(text) <= 0:
        raise Invalid("invalid", f"job id: {job_id!r} is not a job id; use the number submit "
                      "returned")
    return str(int(text))


def _query(params):
    """"?k=v&..." of the params that are not None ("" when none)."""
    kept = {k: v for k, v in params.items() if v is not None}
    return "?" + urllib.parse.urlencode(kept) if kept else ""


def _decode(answer):
    """The JSON of a 2xx answer (status, content type, body); the API's error as a
    TrainqError otherwise."""
    status, _, data = answer
    try:
        doc = json.loads(data) if data else None
    except ValueError:
        doc = None
        if 200 <= status < 300:
            raise TrainqError("internal", "the daemon sent a reply that is not JSON; is trainqd "
                              "the same version as this client?", status) from None
    if 200 <= status < 300:
        return doc
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str) and \
            isinstance(error.get("message"), str):
        raise error_for(error["code"], error["message"], status)
    raise error_for("internal", f"the daemon answered HTTP {status}", status)


def _cli_message(stderr):
    """What a failed trainq command printed, without its "trainq: " prefix."""
    text = stderr.strip()
    return text[len("trainq: "):] if text.startswith("trainq: ") else text


class Client:
    """A client of one trainq daemon, chosen as the CLI chooses it: `server` (a URL:
    unix:/PATH.sock, http://HOST:PORT, https://HOST:PORT), else TRAINQ_SERVER; else, unless a
    state dir is named (`state_dir`, TRAINQ_STATE_DIR), the shared daemon of this machine
    when there is one; else the personal daemon of the state dir, started on demand with
    `trainq daemon start` (TRAINQ_BIN, else `trainq` on PATH). Over TCP the request carries
    `Authorization: Bearer` with `token`, else TRAINQ_TOKEN, else ~/.config/trainq/token;
    https verifies against TRAINQ_CA when set. `timeout` bounds each request, in seconds.

    Raises Invalid for a bad URL and NotAllowed for a token file others may read. Every call
    raises the API's errors as TrainqError subclasses (trainq.errors).
    """

    def __init__(self, server=None, state_dir=None, token=None, timeout=30.0):
        self._choice = choose_server(server, state_dir, token)
        self._timeout = timeout
        fixed = self._choice.fixed
        https = fixed is not None and fixed.kind == "https"
        self._ssl = _http.tls_context(self._choice.ca_file) if https else None

    def __repr__(self):
        return f"<trainq.Client of {self.describe()}>"

    def describe(self):
        """Which daemon this client talks to, in words."""
        return self._choice.describe()

    @property
    def state_dir(self):
        """The personal daemon's state dir; None when the daemon is one trainq does not
        start (a URL or the shared daemon)."""
        return None if self._choice.fixed else self._choice.paths.state_dir

    # --- jobs ---

    def submit(self, cmd, gpus=1, mem=None, name=None, cwd=None, env=None, priority=0,
               retries=3, time=None, after=None, cpus=None, **extra):
        """Submits one job and returns its id. `cmd` is a list, or a string split as a shell
        would; the job gets this process's environment with `env` on top (a value of None
        removes a variable) and runs in `cwd` (default: the current directory). `mem` ("20GiB"),
        `time` ("2h30m"), `after` (an id or ids), `cpus` (host CPU slots; by default 1 for a
        CPU job, none for a GPU job) and the keys of `extra` (after_any, nodes,
        exclude_nodes, num_nodes, ...) go to the daemon as they are, which judges them:
        Invalid naming the field when one is wrong. A lost answer is sent again once with
        the same Idempotency-Key, so the job is stored once."""
        body = self._submit_body(_command_list(cmd), gpus=gpus, mem=mem, name=name, cwd=cwd,
                                 env=env, priority=priority, retries=retries, time=time,
                                 after=after, cpus=cpus, **extra)
        answer = self._submit(body)
        return answer["ids"][0]

    def get(self, job_id):
        """The job with all its attempts (docs/api.md); NotFound when there is no such job."""
        return self._call("GET", f"/v1/jobs/{_job_id(job_id)}")

    def list(self, all=False, state=None, user=None):
        """Jobs, oldest first: waiting and running ones, or every one with `all`; `state` a
        state or states ("queued", ["running", "failed"]); `user` one user's only."""
        if state is not None and not isinstance(state, str):
            state = ",".join(state)
        query = _query({"all": "1" if all else None, "state": state, "user": user})
        return self._call("GET", "/v1/jobs" + query)["jobs"]

    def wait(self, job_id, timeout=None, poll=0.5):
        """The job once it has ended (succeeded, failed or cancelled), asking every `poll`
        seconds; raises Timeout after `timeout` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job["state"] in TERMINAL_STATES:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout("timeout", f"job {job_id} is still {job['state']} after "
                              f"{timeout}s")
            pause = poll if deadline is None else min(poll, deadline - time.monotonic())
            time.sleep(max(pause, 0))

    def cancel(self, job_id):
        """Cancels a waiting job or stops a running one; returns the daemon's answer."""
        return self._call("POST", f"/v1/jobs/{_job_id(job_id)}/cancel")

    def retry(self, job_id):
        """Queues a job that ended again, as a new attempt; returns the daemon's answer."""
        return self._call("POST", f"/v1/jobs/{_job_id(job_id)}/retry")

    def cancel_many(self, job_ids):
        """Cancels or stops many jobs in one request, as `trainq cancel 10-20` does: the
        daemon decides them together, so none of them starts between two cancels. Returns
        one result per id, in order: {"id", "state", "message"}, or {"id", "error": {"code",
        "message"}} for a job that could not be cancelled (unknown, ended, not yours)."""
        return self._many("cancel", job_ids)

    def retry_many(self, job_ids):
        """Queues many jobs that ended again in one request; results as cancel_many's."""
        return self._many("retry", job_ids)

    def _many(self, verb, job_ids):
        ids = [int(_job_id(job_id)) for job_id in job_ids]
        if not ids:
            return []
        return self._call("POST", f"/v1/jobs/{verb}", {"ids": ids})["results"]

    def logs(self, job_id, attempt=None):
        """The whole log of an attempt (default: the latest) as bytes, as far as it is
        written now. TrainqError `conflict` when the job has not started yet."""
        base = f"/v1/jobs/{_job_id(job_id)}/log"
        size = self._call("GET", base + _query({"attempt": attempt, "size": "1"}))
        chunks, offset = [], 0
        while True:
            chunk = self._bytes(base + _query({"attempt": size["attempt"], "offset": offset,
                                               "length": LOG_CHUNK}))
            chunks.append(chunk)
            offset += len(chunk)
            if len(chunk) < LOG_CHUNK:
                return b"".join(chunks)

    def gpus(self):
        """This node's GPUs, reservations, usable memory, processes and topology."""
        return self._call("GET", "/v1/gpus")

    def status(self):
        """The daemon's pid, node and GPU probe."""
        return self._call("GET", "/v1/status")

    # --- the request ---

    def _submit_body(self, command, cwd, env, **fields):
        for i, arg in enumerate(command):
            _check_utf8(f"command[{i}]", arg)
        cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
        if not cwd.startswith("/"):
            cwd = os.path.join(os.getcwd(), cwd)
        _check_utf8("cwd", cwd)
        _check_utf8("name", fields.get("name"))
        # Where the submit ran, as the CLI and Slurm's SLURM_SUBMIT_DIR give it.
        job_env = _job_environment({"TRAINQ_SUBMIT_DIR": os.getcwd(), **(env or {})})
        for key, value in job_env.items():
            _check_utf8("environment variable name", key)
            _check_utf8(f"environment variable {key}", value)
        if fields.get("after") is not None:
            fields["after"] = _id_list(fields["after"])
        body = {"command": command, "cwd": cwd, "env": job_env}
        body.update({k: v for k, v in fields.items() if v is not None})
        return body

    def _submit(self, body):
        """POST /v1/jobs with a fresh Idempotency-Key; sent again once with the same key
        when the answer was lost (the daemon answers a repeat with the ids it stored)."""
        data = json.dumps(body).encode()
        headers = {"Idempotency-Key": secrets.token_hex(16)}
        try:
            return _decode(self._send("POST", "/v1/jobs", data, headers))
        except _http.AnswerLost:
            time.sleep(RESEND_PAUSE)
        try:
            return _decode(self._send("POST", "/v1/jobs", data, headers))
        except _http.AnswerLost as lost:
            raise lost.error from None

    def _call(self, method, target, payload=None):
        """A JSON call: its answer, or the daemon's error raised."""
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            return _decode(self._send(method, target, data))
        except _http.AnswerLost as lost:
            raise lost.error from None

    def _bytes(self, target):
        """A GET whose 2xx answer is bytes (a log); errors as _call's."""
        try:
            answer = self._send("GET", target, b"")
        except _http.AnswerLost as lost:
            raise lost.error from None
        status, _, data = answer
        return data if 200 <= status < 300 else _decode(answer)

    def _send(self, method, target, data, headers=None):
        """One exchange; when nothing could be sent to a personal daemon, it is started and
        the request sent once more. A request that went out is never sent again here."""
        try:
            return self._exchange(method, target, data, headers)
        except _http.NotDelivered as nd:
            if self._choice.fixed is not None:
                raise self._unreachable(nd.error) from None
        self._start_daemon()
        try:
            return self._exchange(method, target, data, headers)
        except _http.NotDelivered as nd:
            raise nd.error from None

    def _exchange(self, method, target, data, headers):
        choice = self._choice
        head = dict(headers or {})
        if choice.fixed is not None and choice.fixed.kind != "unix" and choice.token:
            head["Authorization"] = "Bearer " + choice.token
        if choice.fixed is None and choice.paths.socket_dir:
            _http.check_socket_dir(choice.paths.socket_dir)
        return _http.exchange(choice.fixed, choice.paths.socket, method, target, data, head,
                              self._timeout, self._ssl)

    def _unreachable(self, error):
        hint = ""
        if self._choice.origin == "the shared daemon of this machine":
            hint = ("; it serves every user of this machine and is started by the system "
                    "(systemctl status trainqd), never by trainq. For a daemon of your own, "
                    "name a state dir (state_dir= or TRAINQ_STATE_DIR)")
        return Unavailable("unavailable", f"{self.describe()} does not answer ({error}){hint}")

    def _start_daemon(self):
        """`trainq --state-dir DIR daemon start`: returns once the personal daemon answers.
        Its refusal is raised as the CLI's exit code says (a bad config: Invalid)."""
        state_dir = self._choice.paths.state_dir
        binary = os.environ.get("TRAINQ_BIN") or shutil.which("trainq")
        if not binary:
            raise Unavailable("unavailable", f"no trainq daemon runs for {state_dir}, and the "
                              "trainq command that starts one is not on PATH (or TRAINQ_BIN)")
        try:
            proc = subprocess.run([binary, "--state-dir", state_dir, "daemon", "start"],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors="replace", timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unavailable("unavailable", f"could not run {binary} daemon start: {e}") from None
        if proc.returncode != 0:
            cls, code = _CLI_EXIT_ERRORS.get(proc.returncode, (Unavailable, "unavailable"))
            raise cls(code, _cli_message(proc.stderr) or
                      f"{binary} daemon start exited {proc.returncode}")
