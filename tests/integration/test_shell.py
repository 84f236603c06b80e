"""Interactive sessions (`trainq shell`, docs/workflow.md "Interactive sessions"), driven from
a real pseudo-terminal as a user's terminal emulator would: the session waits its turn, runs
on a terminal joined to the user's, and ends with its program's status, its client, its time
limit or a cancel.
"""
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import urllib.request

import pytest

from conftest import check_no_sanitizer_report, gpu, process_gone, trainq_binary, wait_for
from test_containers import RUNTIME_ARGS, containers_of, image  # noqa: F401
from test_shared import Shared  # noqa: F401  (its fixture's class)
from test_shared import shared  # noqa: F401
from doc_cluster import doc_cluster  # noqa: F401 (the fixture)

PROMPT = "tq$ "
SHELL = ["bash", "--norc", "--noprofile", "-i"]


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """`trainq ARGS` on a new pseudo-terminal of 24x80, its controlling terminal."""

    def __init__(self, argv, env, cwd, user=None):
        self.master, slave = pty.openpty()
        set_size(slave, 24, 80)
        self.modes = termios.tcgetattr(slave)
        kw = {}
        if user is not None:
            kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            os.fchown(slave, user.pw_uid, user.pw_gid)

        def become_session_leader():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=cwd, preexec_fn=become_session_leader, **kw)
        self.slave = slave  # kept open: the terminal's modes are read after the client ends
        self.seen = b""

    def text(self):
        return self.seen.decode(errors="replace")

    def expect(self, pattern, timeout=30):
        """Reads until `pattern` (a regex) appears after what earlier calls consumed."""
        regex = re.compile(pattern.encode())
        deadline = time.monotonic() + timeout
        while True:
            m = regex.search(self.seen, self._mark if hasattr(self, "_mark") else 0)
            if m:
                self._mark = m.end()
                return m
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.master], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no {pattern!r} within {timeout}s; the terminal shows:\n"
                                     f"{self.text()[-2000:]}")
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                raise AssertionError(f"the terminal closed before {pattern!r}:\n"
                                     f"{self.text()[-2000:]}")
            self.seen += chunk

    def type(self, keys):
        os.write(self.master, keys.encode())

    def resize(self, rows, cols):
        set_size(self.master, rows, cols)  # the kernel sends the client SIGWINCH

    def wait(self, timeout=30):
        rc = self.proc.wait(timeout=timeout)
        # What it printed last (its exit line) is still in the terminal.
        while select.select([self.master], [], [], 0.2)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk
        check_no_sanitizer_report(self.text(), "trainq shell")
        return rc

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminals():
    made = []

    def open_terminal(argv, env, cwd, user=None):
        made.append(Terminal(argv, env, cwd, user))
        return made[-1]

    yield open_terminal
    for t in made:
        t.close()


def shell_env(tq):
    return dict(tq.env, PS1=PROMPT, TERM="xterm")


def resize_and_interrupt(term):
    """The terminal follows a resize, and Ctrl-C reaches the foreground program, not trainq:
    the shell survives it."""
    term.resize(40, 132)
    # The client reads the SIGWINCH before the keys typed after it: no sleep needed.
    term.type("stty size\r")
    term.expect(r"40 132\r\n")
    term.type("sleep 100\r")
    time.sleep(0.5)
    term.type("\x03")
    term.type("echo still-here\r")
    term.expect(r"still-here\r\n")


def session_pids(term):
    """The shell's pid and a background child's, as the session itself reports them."""
    term.type("sleep 300 & echo pids=$$,$!\r")
    m = term.expect(r"pids=(\d+),(\d+)")
    return int(m.group(1)), int(m.group(2))


def test_a_session_waits_its_turn_then_runs_on_a_terminal_joined_to_yours(tq, terminals):
    tq.start_daemon()
    blocker = tq.submit("--gpus", "1", cmd=["sleep", "300"])
    tq.wait_state(blocker, "running")
    term = terminals([trainq_binary(), "shell", "--gpus", "1", "--", *SHELL], shell_env(tq),
                     tq.work)
    # It waits in line like any job, saying why.
    term.expect(r"job 2 queued, 1st in line")
    tq.run("cancel", str(blocker))
    term.expect(r"trainq: job 2 on (this machine|node \S+), GPU 0\r\n")
    term.expect(re.escape(PROMPT))
    term.type("echo gpus=$CUDA_VISIBLE_DEVICES job=$TRAINQ_JOB_ID\r")
    term.expect(r"gpus=0 job=2\r\n")
    # The terminal is a real one of the user's size, and follows a resize.
    term.type("tty; stty size\r")
    term.expect(r"/dev/pts/\d+\r\n24 80\r\n")
    resize_and_interrupt(term)
    job = tq.show(2)
    assert job["state"] == "running" and job["interactive"] is True
    assert "session: running" in tq.run("ls").stdout
    term.type("exit 3\r")
    assert term.wait() == 3, term.text()
    # The user's terminal is as it was: cooked, echoing.
    assert termios.tcgetattr(term.slave) == term.modes
    job = tq.wait_state(2, "failed")
    assert job["attempts"][-1]["exit_code"] == 3
    # The transcript: what the program printed, never what was typed unechoed.
    log = tq.run("logs", "2").stdout
    assert "gpus=0 job=2" in log and "still-here" in log


def test_killing_the_client_hangs_the_session_up_and_ends_the_job(tq, terminals):
    tq.start_daemon()
    term = terminals([trainq_binary(), "shell", "--", *SHELL], shell_env(tq), tq.work)
    term.expect(re.escape(PROMPT))
    shell_pid, child_pid = session_pids(term)
    term.proc.kill()  # kill -9: no goodbye from the client
    term.proc.wait()
    job = tq.wait_state(1, "cancelled")
    assert "the terminal disconnected" in job["reason"], job
    wait_for(lambda: process_gone(shell_pid) and process_gone(child_pid),
             what="the session's processes to be gone")
    log = tq.run("logs", "1").stdout
    assert "trainq: the terminal disconnected; hanging up the session" in log


def test_the_time_limit_warns_in_the_terminal_then_hangs_up(tq, terminals):
    tq.start_daemon()
    term = terminals([trainq_binary(), "shell", "--time", "4s", "--", *SHELL], shell_env(tq),
                     tq.work)
    term.expect(re.escape(PROMPT))
    # Half the limit before it when the limit is under two minutes; a minute before otherwise.
    term.expect(r"trainq: this session ends in [12]s \(its time limit, --time 4s\)\r\n")
    term.expect(r"trainq: time limit \(4s\) reached; stopping the job")
    assert term.wait() == 128 + signal.SIGHUP
    assert "trainq: killed by SIGHUP" in term.text()
    job = tq.wait_state(1, "failed")
    assert job["reason"].startswith("time limit (4s)"), job


def test_cancel_ends_the_session_with_a_message_in_the_terminal(tq, terminals):
    tq.start_daemon()
    term = terminals([trainq_binary(), "shell", "--", *SHELL], shell_env(tq), tq.work)
    term.expect(re.escape(PROMPT))
    tq.run("cancel", "1")
    term.expect(r"trainq: the session was cancelled; hanging up")
    assert term.wait() == 128 + signal.SIGHUP
    assert tq.wait_state(1, "cancelled")


def test_without_a_terminal_the_program_gets_pipes(tq):
    tq.start_daemon()
    proc = tq.run("shell", "--gpus", "0", "--", "sh", "-c",
                  "read line; echo got:$line; tty || true; exit 5", input="hello\n",
                  check=False)
    assert proc.returncode == 5, proc
    assert "got:hello" in proc.stdout and "not a tty" in proc.stdout, proc
    assert re.search(r"trainq: job 1 on .*, no GPU", proc.stderr), proc.stderr


def test_no_log_keeps_no_transcript(tq):
    tq.start_daemon()
    proc = tq.run("shell", "--no-log", "--gpus", "0", "--", "echo", "private-output",
                  input="", check=False)
    assert proc.returncode == 0 and "private-output" in proc.stdout, proc
    tq.wait_state(1, "succeeded")
    assert "private-output" not in tq.run("logs", "1").stdout
    assert "transcript not kept (--no-log)" in tq.run("show", "1").stdout


def test_what_a_session_cannot_be_is_refused_and_nothing_stored(tq):
    tq.start_daemon()
    proc = tq.run("shell", "--nodes", "2", "--", "true", check=False)
    assert proc.returncode == 2, proc
    assert "--nodes: 2: an interactive session runs on one node" in proc.stderr
    # A daemon over the network: its shims' sockets are on its machine, not this one.
    remote = tq.run("shell", "--", "true", check=False,
                    env=dict(tq.env, TRAINQ_SERVER="https://127.0.0.1:9"))
    assert remote.returncode == 2, remote
    assert "a session's terminal is reached on the daemon's own machine" in remote.stderr
    answer = tq.api("POST", "/v1/jobs", {"command": ["true"], "no_log": True})
    assert answer.status == 400
    assert "no_log: only for an interactive session" in answer.body["error"]["message"]
    batch = tq.submit("--gpus", "0", cmd=["sleep", "30"])
    answer = tq.api("GET", f"/v1/jobs/{batch}/session")
    assert answer.status == 400 and "not an interactive session" in answer.body["error"]["message"]
    assert [j["id"] for j in tq.ls()] == [batch]


def test_a_users_session_on_a_shared_server_is_theirs_alone(shared, terminals, people):
    s = shared()
    s.start()
    ada = people["ada"]
    env = dict(s.env_of(ada), PS1=PROMPT, TERM="xterm")
    term = terminals([trainq_binary(), "shell", "--", *SHELL], env, s.work, user=ada)
    term.expect(re.escape(PROMPT))
    term.type("echo me=$(id -un) tty=$(stat -c %U $(tty))\r")
    term.expect(rf"me={ada.pw_name} tty={ada.pw_name}\r\n")
    assert json.loads(s.trainq_as("ada", "show", "--json", "1", check=0).stdout)["interactive"]
    sock = os.path.join(s.state_dir, "sessions", "1.1.sock")
    st = os.stat(sock)
    assert (st.st_uid, st.st_mode & 0o777) == (ada.pw_uid, 0o600)
    # Another user cannot reach it: the socket is ada's alone (and the shim would refuse a
    # stranger's connection by its credentials even if it were not).
    probe = subprocess.run(
        ["runuser", "-u", people["bob"].pw_name, "--", "python3", "-c",
         "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", sock],
        capture_output=True, text=True, timeout=30)
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe
    term.type("exit 0\r")
    assert term.wait() == 0


def test_a_session_on_another_node_reaches_the_terminal_through_the_daemons(doc_cluster,
                                                                          terminals):
    """The cluster as docs/cluster.md sets it up (shared TLS nodes, the cluster key, the
    docs' ACL): ada on gpu1 asks for a shell on gpu2. Her terminal's bytes go to gpu1's
    daemon, over the nodes' signed TLS API to gpu2's, and to the shim there."""
    c = doc_cluster()
    c.start()
    gpu1, gpu2 = c.nodes["gpu1"], c.nodes["gpu2"]
    ada = gpu1.people["ada"]
    env = dict(gpu1.env_of(ada), PS1=PROMPT, TERM="xterm")
    term = terminals([trainq_binary(), "shell", "--node", "gpu2", "--", *SHELL], env, gpu1.work,
                     user=ada)
    # The one difference the user sees: the node in the first line.
    term.expect(r"trainq: job 1 on node gpu2, GPU 0\r\n")
    term.expect(re.escape(PROMPT))
    term.type("echo me=$(id -un) job=$TRAINQ_JOB_ID tty=$(stat -c %U $(tty)); stty size\r")
    term.expect(rf"me={ada.pw_name} job=1 tty={ada.pw_name}\r\n24 80\r\n")
    resize_and_interrupt(term)
    # It runs on gpu2: the shim's socket is in gpu2's state dir, and gpu1 sends the client
    # through itself rather than to a socket of gpu2's.
    job = json.loads(gpu1.trainq_as("ada", "show", "--json", "1", check=0).stdout)
    assert job["attempts"][-1]["node"] == "gpu2" and job["interactive"], job
    assert os.path.exists(os.path.join(gpu2.state_dir, "sessions", "1.1.sock"))
    assert not os.path.exists(os.path.join(gpu1.state_dir, "sessions", "1.1.sock"))
    where = subprocess.run(
        ["curl", "-s", "--unix-socket", gpu1.socket,
         "http://trainq/v1/jobs/1/session"], capture_output=True, text=True, timeout=30,
        user=ada.pw_uid, group=ada.pw_gid)
    assert json.loads(where.stdout) == {"node": "gpu2", "attempt": 1, "relay": True}, where
    other = subprocess.run(
        ["curl", "-s", "-w", "%{http_code}", "--unix-socket", gpu1.socket, "-H",
         "Connection: Upgrade", "-H", "Upgrade: websocket", "http://trainq/v1/jobs/1/session"],
        capture_output=True, text=True, timeout=30, user=ada.pw_uid, group=ada.pw_gid)
    assert other.stdout.endswith("400") and "switches to trainq-session" in other.stdout, other
    term.type("exit 3\r")
    assert term.wait() == 3, term.text()
    assert termios.tcgetattr(term.slave) == term.modes
    job = gpu1.wait_state(1, ("failed",))
    assert job["attempts"][-1]["exit_code"] == 3
    assert "still-here" in gpu1.trainq_as("ada", "logs", "1", check=0).stdout
    # A client that goes away hangs the session up across the nodes too.
    term = terminals([trainq_binary(), "shell", "--node", "gpu2", "--", *SHELL], env, gpu1.work,
                     user=ada)
    term.expect(re.escape(PROMPT))
    shell, child = session_pids(term)
    term.proc.kill()
    job = gpu1.wait_state(2, ("cancelled",))
    assert "the terminal disconnected" in job["reason"], job
    wait_for(lambda: process_gone(shell) and process_gone(child), what="the session's processes")


def test_an_idle_session_is_hung_up_but_typing_or_a_busy_gpu_keeps_it(make_trainq, terminals):
    tq = make_trainq(interactive_idle_timeout="3s")
    tq.start_daemon()
    term = terminals([trainq_binary(), "shell", "--", *SHELL], shell_env(tq), tq.work)
    term.expect(re.escape(PROMPT))
    # Keys count as use: typed every half second for twice the timeout, it stays.
    for i in range(12):
        term.type(f"# {i}\r")
        time.sleep(0.5)
    # So does a GPU in use (the simulated GPU's utilisation), with no key at all.
    tq.set_gpus([gpu(0, utilization=60)])
    time.sleep(6)
    assert tq.state(1) == "running"
    # Neither: hung up, with the reason in the terminal and on the job.
    tq.set_gpus([gpu(0)])
    term.expect(r"trainq: idle for 3s: no input and no GPU use \(interactive_idle_timeout\)"
                r"; hanging up the session", timeout=30)
    assert term.wait() == 128 + signal.SIGHUP
    job = tq.wait_state(1, "cancelled")
    assert job["reason"].startswith("idle for 3s"), job


def test_salloc_gives_an_allocation_that_srun_runs_steps_on(tq, terminals):
    tq.start_daemon()
    term = terminals([trainq_binary(), "salloc", "-n", "2", "--gres=gpu:1", "-t", "10", *SHELL],
                     shell_env(tq), tq.work)
    term.expect(re.escape(PROMPT))
    term.type("echo job=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES; srun -l hostname\r")
    term.expect(r"job=1 gpus=0\r\n")
    host = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
    # The two tasks' lines, in whatever order they came (srun -l orders nothing across tasks).
    lines = term.expect(rf"([01]): {re.escape(host)}\r\n([01]): {re.escape(host)}\r\n")
    assert sorted(lines.groups()) == [b"0", b"1"], term.text()
    # An interactive step: its one task on this terminal, with the step's variables.
    term.type("srun --pty sh -c 'echo step=$SLURM_STEP_ID procid=$SLURM_PROCID; tty'\r")
    term.expect(r"step=\d+ procid=0\r\n/dev/pts/\d+\r\n")
    term.type("srun --pty -n 2 true\r")
    term.expect(r"srun: error: --pty runs one task on one terminal")
    job = tq.show(1)
    assert job["interactive"] and job["slurm"] and job["time_limit_ms"] == 600000, job
    term.type("exit 0\r")
    assert term.wait() == 0
    tq.wait_state(1, "succeeded")


def test_srun_pty_outside_a_job_is_a_session(tq, terminals):
    tq.start_daemon()
    srun = os.path.join(os.path.dirname(trainq_binary()), "slurm", "srun")
    term = terminals([srun, "--gres=gpu:1", "--pty", *SHELL], shell_env(tq), tq.work)
    term.expect(re.escape(PROMPT))
    term.type("echo gpus=$CUDA_VISIBLE_DEVICES; exit 2\r")
    term.expect(r"gpus=0\r\n")
    assert term.wait() == 2
    assert tq.show(1)["interactive"]


def documented_notebook_command():
    """The `trainq shell ... jupyter lab ...` line of docs/workflow.md, as words."""
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "workflow.md")
    for line in open(docs):
        if "trainq shell" in line and "jupyter lab" in line:
            words = line.split()
            return words[words.index("trainq"):]
    raise AssertionError("docs/workflow.md shows no `trainq shell ... jupyter lab` command")


def test_the_documented_notebook_recipe_serves_a_notebook_from_a_queued_gpu(tq, terminals,
                                                                           tmp_path):
    tq.start_daemon()
    env = shell_env(tq)
    if shutil.which("jupyter") is None:
        stand_in = tmp_path / "bin"
        stand_in.mkdir()
        target = os.path.join(os.path.dirname(__file__), "data", "jupyter_stand_in.py")
        (stand_in / "jupyter").write_text(f"#!/bin/sh\nexec {sys.executable} {target} \"$@\"\n")
        (stand_in / "jupyter").chmod(0o755)
        env["PATH"] = f"{stand_in}:{env['PATH']}"
    words = documented_notebook_command()
    term = terminals([trainq_binary(), *words[1:]], env, tq.work)
    term.expect(r"trainq: job 1 on .*, GPU 0\r\n")
    url = term.expect(r"(http://127\.0\.0\.1:\d+/lab\?token=\w+)").group(1).decode()
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
    job = tq.show(1)
    assert job["state"] == "running" and job["time_limit_ms"] == 4 * 3600 * 1000
    term.type("\x03")
    time.sleep(0.3)
    term.type("\x03")  # Jupyter asks for a second one
    assert term.wait() in (0, 130), term.text()
    assert tq.wait_state(1, ["succeeded", "failed"])


def test_a_session_with_an_image_runs_inside_its_container(make_trainq, terminals, image):
    tq = make_trainq(container_runtime="podman", container_runtime_args=RUNTIME_ARGS)
    tq.start_daemon()
    name, _ = image
    # No command: the image's shell (busybox has no bash), not this machine's $SHELL.
    term = terminals([trainq_binary(), "shell", "--image", name], dict(shell_env(tq),
                     SHELL="/usr/bin/zsh-not-in-the-image"), tq.work)
    term.expect(re.escape(PROMPT), timeout=60)
    # Inside: the image's busybox, its own terminal (podman run -it), the job's GPU as 0.
    term.type("echo in=$CUDA_VISIBLE_DEVICES; readlink /proc/self/fd/0; ls /bin/busybox\r")
    term.expect(r"in=0\r\n/dev/pts/\d+\r\n/bin/busybox\r\n")
    term.type("exit 4\r")
    assert term.wait(timeout=60) == 4, term.text()
    tq.wait_state(1, "failed", timeout=60)
    assert containers_of(1) == []
