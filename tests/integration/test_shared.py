"""A shared server: one root daemon for every user (trainqd --shared), with real local users.

Jobs run as their submitters; users act on their own jobs only, admins on all; the client
finds the shared socket; two users' jobs never book the same GPU memory twice.
"""
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile

import pytest

from conftest import (check_no_sanitizer_report, gpu, kill_until_gone,
                      processes_of_state_dir, trainq_binary, trainqd_binary,
                      wait_for)

SHARED_SOCKET = "/run/trainq/trainq.sock"
SHARED_STATE = "/var/lib/trainq"


class Shared:
    """A trainqd --shared under a temporary root, and its users' CLI."""

    def __init__(self, people, socket_path=None, **config):
        self.people = people
        self.root = tempfile.mkdtemp(prefix="tq-shared-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.state_dir = os.path.join(self.root, "state")
        os.mkdir(self.state_dir, 0o700)
        self.socket = socket_path or os.path.join(self.root, "run", "trainq.sock")
        self.work = os.path.join(self.root, "work")
        os.mkdir(self.work)
        os.chmod(self.work, 0o777)
        self.usage_dir = os.path.join(self.root, "usage")
        os.mkdir(self.usage_dir)
        os.chmod(self.usage_dir, 0o777)
        self.gpu_file = os.path.join(self.root, "gpus.json")
        with open(self.gpu_file, "w") as f:
            json.dump({"gpus": [gpu(0)], "usage_dir": self.usage_dir}, f)
        os.chmod(self.gpu_file, 0o644)
        cfg = {"cpu_slots": 16, "sample_interval": "100ms", "grace_period": "1s",
               "admin_group": people["admins"]}
        cfg.update(config)
        with open(os.path.join(self.state_dir, "config.toml"), "w") as f:
            f.write("".join(f"{k} = {json.dumps(v)}\n" for k, v in cfg.items()))
        self.daemon = None

    def start(self, *flags, env=None, wrap=()):
        """Starts the daemon; `env` adds to its environment, `wrap` goes before its argv."""
        added = env or {}
        env = {"PATH": "/usr/bin:/bin", "TRAINQ_FAKE_GPUS": self.gpu_file,
               "TRAINQ_STATE_DIR": self.state_dir, "ROOTS_OWN_SECRET": "root-only",
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
        env.update(added)
        argv = [trainqd_binary(), "--shared", "--state-dir", self.state_dir, *flags]
        if self.socket != SHARED_SOCKET:
            argv += ["--socket", self.socket]
        self.log = open(os.path.join(self.root, "trainqd.log"), "w")
        self.daemon = subprocess.Popen([*wrap, *argv], env=env, stdout=self.log,
                                       stderr=subprocess.STDOUT)
        wait_for(lambda: self.answers() or self.daemon.poll() is not None,
                 what="the shared daemon to answer")
        assert self.daemon.poll() is None, self.daemon_log()

    def answers(self):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(self.socket)
            return True
        except OSError:
            return False

    def daemon_log(self):
        path = os.path.join(self.root, "trainqd.log")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    def env_of(self, user, server=True):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.work, "USER": user.pw_name,
               "TRAINQ_STATE_DIR": self.state_dir,  # marks the jobs' processes for cleanup
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
        if server:
            env["TRAINQ_SERVER"] = "unix:" + self.socket
        return env

    def trainq_as(self, name, *args, env=None, check=None):
        """`trainq ARGS` run by the person `name` (or root)."""
        if name == "root":
            kw = {}
            e = env or self.env_of(pwd.getpwuid(0))
        else:
            user = self.people[name]
            groups = [g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem]
            kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": groups}
            e = env or self.env_of(user)
        proc = subprocess.run([trainq_binary(), *args], env=e, cwd=self.work, capture_output=True,
                              text=True, timeout=60, umask=0o022, **kw)
        check_no_sanitizer_report(proc.stderr, f"trainq {' '.join(args)} as {name}")
        if check is not None:
            assert proc.returncode == check, (f"trainq {' '.join(args)} as {name}: exit "
                                              f"{proc.returncode}\n{proc.stdout}{proc.stderr}")
        return proc

    def submit_as(self, name, *opts, cmd):
        return int(self.trainq_as(name, "submit", *opts, "--", *cmd, check=0).stdout.strip())

    def show(self, job_id):
        return json.loads(self.trainq_as("root", "show", "--json", str(job_id), check=0).stdout)

    def wait_state(self, job_id, states):
        states = {states} if isinstance(states, str) else set(states)
        return wait_for(lambda: (lambda j: j if j["state"] in states else None)(self.show(job_id)),
                        what=f"job {job_id} to reach {states}")

    def cleanup(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait(timeout=30)
        kill_until_gone(lambda: processes_of_state_dir(self.state_dir))
        check_no_sanitizer_report(self.daemon_log(), "the shared daemon's log")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def shared(people):
    made = []

    def make(**kw):
        made.append(Shared(people, **kw))
        return made[-1]

    yield make
    for s in made:
        s.cleanup()


def test_a_job_runs_as_its_submitter_with_nothing_of_roots(shared, people):
    s = shared()
    s.start()
    assert stat.S_IMODE(os.stat(s.socket).st_mode) == 0o666
    # Users pass through to the trees staged for their jobs; nothing else there is theirs.
    assert stat.S_IMODE(os.stat(s.state_dir).st_mode) == 0o711
    ada = people["ada"]
    script = 'id -u; id -g; id -G; echo "$HOME $USER $LOGNAME ${ROOTS_OWN_SECRET:-absent}"; pwd'
    job = s.submit_as("ada", "--gpus", "0", cmd=["sh", "-c", script])
    done = s.wait_state(job, "succeeded")
    assert done["user"] == ada.pw_name
    lines = s.trainq_as("ada", "logs", str(job), check=0).stdout.splitlines()
    assert lines[0] == str(ada.pw_uid)
    assert lines[1] == str(ada.pw_gid)
    assert lines[2].split() == [str(ada.pw_gid)]  # no group of root's
    assert lines[3] == f"{ada.pw_dir} {ada.pw_name} {ada.pw_name} absent"
    assert lines[4] == s.work
    log = done["attempts"][0]["log_path"]
    st = os.stat(log)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (ada.pw_uid, ada.pw_gid, 0o600)
    # The run dir, with the job's environment in spec.json, stays root's.
    run_dir = os.path.dirname(log)
    assert os.stat(run_dir).st_uid == 0 and stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    # Supplementary groups are the user's own: carol is in the admins' group.
    carol = people["carol"]
    job = s.submit_as("carol", "--gpus", "0", cmd=["id", "-G"])
    s.wait_state(job, "succeeded")
    groups = s.trainq_as("carol", "logs", str(job), check=0).stdout.split()
    assert sorted(groups) == sorted([str(carol.pw_gid), str(grp.getgrnam(people["admins"]).gr_gid)])


def test_users_act_on_their_own_jobs_only_admins_on_all(shared, people):
    s = shared()
    s.start()
    ada = people["ada"].pw_name
    first = s.submit_as("ada", "--gpus", "0", cmd=["sh", "-c", "echo ada-secret-output; sleep 60"])
    second = s.submit_as("ada", "--gpus", "0", cmd=["sleep", "60"])
    s.wait_state(first, "running")
    wait_for(lambda: "ada-secret-output" in s.trainq_as("ada", "logs", str(first)).stdout,
             what="ada's output")

    for args in (["cancel", str(first)], ["retry", str(first)], ["logs", str(first)]):
        r = s.trainq_as("bob", *args)
        assert r.returncode == 4, (args, r.stdout, r.stderr)
        assert f"job {first} belongs to {ada}; only {ada} or an admin may" in r.stderr, r.stderr
        assert "ada-secret-output" not in r.stdout
    assert s.show(first)["state"] == "running"  # nothing changed
    # Not through the file either: the run dir is root's.
    log = s.show(first)["attempts"][0]["log_path"]
    r = subprocess.run(["cat", log], user=people["bob"].pw_uid, capture_output=True, text=True)
    assert r.returncode != 0 and "ada-secret-output" not in r.stdout

    # A member of admin_group, and root, may.
    s.trainq_as("carol", "cancel", str(first), check=0)
    s.wait_state(first, "cancelled")
    s.trainq_as("root", "cancel", str(second), check=0)
    s.wait_state(second, "cancelled")
    # Bob's own job is his to cancel; daemon-wide actions are admins' only.
    mine = s.submit_as("bob", "--gpus", "0", cmd=["sleep", "60"])
    s.trainq_as("bob", "cancel", str(mine), check=0)
    r = s.trainq_as("bob", "config", "set", "devices", "0")
    assert r.returncode == 4 and "only an admin may" in r.stderr, r.stderr
    r = s.trainq_as("bob", "daemon", "stop")
    assert r.returncode == 4, r.stdout + r.stderr
    assert s.daemon.poll() is None


def test_a_cwd_the_user_may_not_enter_is_refused_at_submit(shared):
    s = shared()
    s.start()
    closed = os.path.join(s.root, "roots-only")
    os.mkdir(closed, 0o700)
    r = s.trainq_as("ada", "submit", "--cwd", closed, "--", "true")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cwd" in r.stderr and closed in r.stderr, r.stderr
    assert json.loads(s.trainq_as("root", "ls", "--all", "--json", check=0).stdout) == []


def test_ls_shows_whose_jobs_and_filters_by_user(shared, people):
    s = shared()
    s.start()
    ada, bob = people["ada"].pw_name, people["bob"].pw_name
    a = s.submit_as("ada", "--gpus", "0", cmd=["sleep", "60"])
    b = s.submit_as("bob", "--gpus", "0", cmd=["sleep", "60"])
    table = s.trainq_as("bob", "ls", check=0).stdout
    assert "USER" in table.splitlines()[0]
    assert ada in table and bob in table  # everyone sees the whole queue
    by_user = json.loads(s.trainq_as("bob", "ls", "--json", "--user", ada, check=0).stdout)
    assert [j["id"] for j in by_user] == [a]
    mine = json.loads(s.trainq_as("bob", "ls", "--json", "--mine", check=0).stdout)
    assert [j["id"] for j in mine] == [b]


def test_two_users_never_book_the_same_gpu_memory_twice(shared):
    s = shared()
    s.start()
    jobs = [s.submit_as(who, "--gpus", "1", "--mem", "30GiB", cmd=["sleep", "60"])
            for who in ("ada", "bob", "ada")]
    s.wait_state(jobs[0], "running")
    s.wait_state(jobs[1], "running")
    third = s.show(jobs[2])
    assert third["state"] == "queued", third
    assert "GPU" in third["reason"] or "memory" in third["reason"], third["reason"]


def test_the_client_finds_the_shared_socket_and_starts_no_daemon_of_its_own(shared, people):
    if os.path.exists(SHARED_SOCKET) or os.path.exists(SHARED_STATE):
        pytest.skip(f"{SHARED_SOCKET} or {SHARED_STATE} exists: this machine has a shared daemon")
    made_dir = not os.path.exists(os.path.dirname(SHARED_SOCKET))
    s = shared(socket_path=SHARED_SOCKET)
    try:
        s.start()
        home = os.path.join(s.root, "ada-home")
        os.mkdir(home)
        os.chown(home, people["ada"].pw_uid, people["ada"].pw_gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": home,
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
        r = s.trainq_as("ada", "submit", "--gpus", "0", "--", "true", env=env, check=0)
        job = int(r.stdout)
        assert s.wait_state(job, "succeeded")["user"] == people["ada"].pw_name
        assert not os.path.exists(os.path.join(home, ".local")), "a personal daemon was started"
        # The shared daemon gone, its socket left behind: no personal daemon in its place.
        s.daemon.kill()
        s.daemon.wait()
        r = s.trainq_as("ada", "ls", env=env)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "shared daemon" in r.stderr and "does not answer" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(home, ".local")), "a personal daemon was started"
        # While it restarts its socket is gone, but the shared state dir says the same.
        os.unlink(SHARED_SOCKET)
        made_state = not os.path.exists(SHARED_STATE)
        if made_state:
            os.mkdir(SHARED_STATE, 0o700)
        try:
            r = s.trainq_as("ada", "ls", env=env)
        finally:
            if made_state:
                os.rmdir(SHARED_STATE)
        assert r.returncode == 1 and "does not answer" in r.stderr, r.stdout + r.stderr
        assert not os.path.exists(os.path.join(home, ".local")), "a personal daemon was started"
    finally:
        if s.daemon and s.daemon.poll() is None:
            s.daemon.kill()
            s.daemon.wait()
        if os.path.exists(SHARED_SOCKET):
            os.unlink(SHARED_SOCKET)
        if made_dir:
            shutil.rmtree(os.path.dirname(SHARED_SOCKET), ignore_errors=True)


def test_a_shared_daemon_needs_root(shared, people):
    s = shared()
    os.chown(s.state_dir, people["ada"].pw_uid, people["ada"].pw_gid)
    r = subprocess.run([trainqd_binary(), "--shared", "--state-dir", s.state_dir, "--socket",
                        s.socket], user=people["ada"].pw_uid, capture_output=True, text=True,
                       timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 4, r.stdout + r.stderr
    assert "must run as root" in r.stderr


def test_logs_follow_through_the_daemon_to_the_end(shared):
    s = shared()
    s.start()
    script = "for i in 1 2 3 4 5; do echo line-$i; sleep 0.2; done"
    job = s.submit_as("ada", "--gpus", "0", cmd=["sh", "-c", script])
    s.wait_state(job, "running")
    # Ada cannot open the log (the run dir is root's): it comes through the daemon.
    r = s.trainq_as("ada", "logs", "-f", str(job), check=0)
    assert r.stdout.splitlines() == [f"line-{i}" for i in range(1, 6)], r.stdout
    assert s.show(job)["state"] == "succeeded"
