"""Files and permissions against another real local user (docs/operations.md, "Files and
permissions"): the client talks only to its own daemon, the socket's directory and the state
dir are the user's alone, every file trainqd makes is 0600, links planted in the state dir are
never followed, and jobs keep their user's umask.

Two users are created for the module: `victim` runs trainq, `other` plays the local attacker.
"""
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid

import pytest

from conftest import (check_no_sanitizer_report, kill_until_gone, processes_of_state_dir,
                      trainq_binary, trainqd_binary, wait_for)

SECRET = "tq-secret-" + uuid.uuid4().hex


def _mask64(v):
    return v & 0xFFFFFFFFFFFFFFFF


def std_hash(text):
    """libstdc++'s std::hash<std::string> (_Hash_bytes, seed 0xc70f6907) on 64-bit: the key
    of the fallback socket's name, so the attacker here can plant it as a real one could."""
    data = text.encode()
    mul = (0xc6a4a793 << 32) + 0x5bd1e995
    shift_mix = lambda v: v ^ (v >> 47)  # noqa: E731
    h = _mask64(0xc70f6907 ^ _mask64(len(data) * mul))
    aligned = len(data) & ~7
    for i in range(0, aligned, 8):
        word = int.from_bytes(data[i:i + 8], "little")
        h = _mask64((h ^ _mask64(shift_mix(_mask64(word * mul)) * mul)) * mul)
    if len(data) & 7:
        h = _mask64((h ^ int.from_bytes(data[aligned:], "little")) * mul)
    h = _mask64(shift_mix(h) * mul)
    return shift_mix(h)


# Binds as root, becomes `other`, then listens: SO_PEERCRED names the user who called
# listen(). Counts what each connection sends until a connection says END.
LISTENER = r"""
import os, socket, sys
path, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
os.setgid(gid)
os.setuid(uid)
s.listen(16)
print("ready", flush=True)
conns, got = 0, b""
while True:
    c, _ = s.accept()
    data = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        data += b
        if data == b"END":
            break
    c.close()
    if data == b"END":
        break
    conns += 1
    got += data
print(f"connections={conns} bytes={len(got)}", flush=True)
sys.stdout.buffer.write(got)
"""


def make_user(prefix):
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", name], check=True)
    return pwd.getpwnam(name)


@pytest.fixture(scope="module")
def users():
    victim, other = make_user("tqv"), make_user("tqo")
    yield victim, other
    for u in (victim, other):
        subprocess.run(["userdel", u.pw_name], check=False)


class Instance:
    """A trainq state dir used by `victim`, under a root only the test writes in."""

    def __init__(self, victim, other, state_name="state"):
        self.victim, self.other = victim, other
        self.root = tempfile.mkdtemp(prefix="tq-perm-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.home = self.own_dir("home")
        self.work = self.own_dir("work")
        self.state_dir = os.path.join(self.home, state_name)
        self.gpu_file = os.path.join(self.root, "gpus.json")
        with open(self.gpu_file, "w") as f:
            json.dump({"gpus": [{"uuid": "GPU-sim-0", "name": "Simulated", "memory_total": "80GiB",
                                 "memory_used_by_others": 0, "utilization": 0}]}, f)
        os.chmod(self.gpu_file, 0o644)
        self.env = {"PATH": "/usr/bin:/bin", "HOME": self.home, "TRAINQ_STATE_DIR": self.state_dir,
                    "TRAINQ_FAKE_GPUS": self.gpu_file, "SECRET_TOKEN": SECRET,
                    "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
        self.listeners = []

    def own_dir(self, name, mode=0o755):
        path = os.path.join(self.root, name)
        os.mkdir(path)
        os.chown(path, self.victim.pw_uid, self.victim.pw_gid)
        os.chmod(path, mode)
        return path

    def make_state_dir(self, mode, owner=None):
        owner = owner or self.victim
        os.mkdir(self.state_dir)
        os.chown(self.state_dir, owner.pw_uid, owner.pw_gid)
        os.chmod(self.state_dir, mode)

    def as_victim(self, argv, env=None, timeout=60):
        proc = subprocess.run(argv, env=env or self.env, cwd=self.work, user=self.victim.pw_uid,
                              group=self.victim.pw_gid, extra_groups=[], umask=0o022,
                              capture_output=True, text=True, timeout=timeout)
        check_no_sanitizer_report(proc.stderr, " ".join(argv))
        return proc

    def trainq(self, *args, **kw):
        return self.as_victim([trainq_binary(), *args], **kw)

    def as_other(self, argv):
        return subprocess.run(["runuser", "-u", self.other.pw_name, "--", *argv],
                               capture_output=True, text=True, timeout=30)

    def plant_listener(self, path):
        """A listener of `other` at `path`; returns a function that ends it and says what
        it received."""
        proc = subprocess.Popen([sys.executable, "-c", LISTENER, path, str(self.other.pw_uid),
                                 str(self.other.pw_gid)], stdout=subprocess.PIPE)
        self.listeners.append(proc)
        assert proc.stdout.readline() == b"ready\n"

        def finish():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(path)
                s.sendall(b"END")
            out, _ = proc.communicate(timeout=10)
            return out

        return finish

    def processes(self):
        return processes_of_state_dir(self.state_dir)

    def cleanup(self):
        for proc in self.listeners:
            proc.kill()
            proc.wait()
        if os.path.isdir(self.state_dir):
            self.trainq("daemon", "stop", timeout=30)
        kill_until_gone(self.processes)
        log = os.path.join(self.state_dir, "daemon.log")
        if os.path.isfile(log) and not os.path.islink(log):
            check_no_sanitizer_report(open(log, errors="replace").read(), log)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def inst(users):
    made = []

    def make(**kw):
        made.append(Instance(*users, **kw))
        return made[-1]

    yield make
    for i in made:
        i.cleanup()


def test_client_refuses_another_users_listener_and_sends_it_nothing(inst):
    t = inst()
    t.make_state_dir(0o700)
    finish = t.plant_listener(os.path.join(t.state_dir, "trainq.sock"))
    proc = t.trainq("submit", "--", "true")
    received = finish()
    assert proc.returncode == 4, proc
    assert os.path.join(t.state_dir, "trainq.sock") in proc.stderr
    assert f"user {t.other.pw_name} (uid {t.other.pw_uid})" in proc.stderr
    assert received.startswith(b"connections=1 bytes=0\n"), received
    assert SECRET.encode() not in received


def long_state_name():
    return "s" * 110  # STATE_DIR/trainq.sock is too long for a Unix socket address


def test_client_refuses_a_socket_dir_another_user_made_in_a_shared_runtime_dir(inst):
    t = inst(state_name=long_state_name())
    runtime = os.path.join(t.root, "runtime")
    os.mkdir(runtime)
    os.chmod(runtime, 0o1777)  # world-writable, as /tmp is: the path is predictable
    planted = os.path.join(runtime, "trainq")
    subprocess.run(["runuser", "-u", t.other.pw_name, "--", "mkdir", "-m", "0777", planted],
                   check=True)
    finish = t.plant_listener(os.path.join(planted, f"{std_hash(t.state_dir):016x}.sock"))
    env = dict(t.env, XDG_RUNTIME_DIR=runtime)
    proc = t.trainq("submit", "--", "true", env=env)
    received = finish()
    assert proc.returncode == 4, proc
    assert f"unsafe socket directory {planted}" in proc.stderr
    assert f"owned by {t.other.pw_name}" in proc.stderr
    assert received.startswith(b"connections=0 bytes=0\n"), received
    assert not os.path.exists(t.state_dir), "no daemon may be started for it"


def test_fallback_socket_dir_in_tmp_is_private_and_checked(inst):
    t = inst(state_name=long_state_name())
    private = f"/tmp/trainq-{t.victim.pw_uid}"
    shutil.rmtree(private, ignore_errors=True)
    try:
        os.mkdir(private)
        os.chown(private, t.other.pw_uid, t.other.pw_gid)
        proc = t.trainq("submit", "--", "true")
        assert proc.returncode == 4, proc
        assert f"unsafe socket directory {private}: it is owned by {t.other.pw_name}" in proc.stderr

        os.chown(private, t.victim.pw_uid, t.victim.pw_gid)
        os.chmod(private, 0o755)
        proc = t.trainq("submit", "--", "true")
        assert proc.returncode == 4, proc
        assert f"unsafe socket directory {private}: its mode is 0755" in proc.stderr

        os.rmdir(private)  # absent: the daemon makes it 0700 and serves from it
        proc = t.trainq("submit", "--", "true")
        assert proc.returncode == 0, proc
        st = os.lstat(private)
        assert (st.st_uid, st.st_mode & 0o7777) == (t.victim.pw_uid, 0o700)
        assert os.path.exists(os.path.join(private, f"{std_hash(t.state_dir):016x}.sock"))
    finally:
        t.cleanup()
        shutil.rmtree(private, ignore_errors=True)


def files_under(top):
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)


def test_other_users_cannot_read_a_0755_state_dirs_files_and_jobs_keep_their_umask(inst):
    t = inst()
    t.make_state_dir(0o755)
    proc = t.trainq("submit", "--", "sh", "-c", "umask > umask.txt; echo hi > made.txt")
    assert proc.returncode == 0, proc
    job = proc.stdout.strip()
    wait_for(lambda: json.loads(t.trainq("show", job, "--json").stdout)["state"] == "succeeded",
             what=f"job {job} to succeed")

    assert open(os.path.join(t.work, "umask.txt")).read() == "0022\n"
    assert os.stat(os.path.join(t.work, "made.txt")).st_mode & 0o777 == 0o644

    state = lambda name: os.path.join(t.state_dir, name)  # noqa: E731
    assert os.path.exists(state("trainq.db-wal")), "the WAL is where the secret sits first"
    assert SECRET.encode() in open(state("trainq.db-wal"), "rb").read() + \
        open(state("trainq.db"), "rb").read()
    for name in ("trainq.db", "trainq.db-wal", "daemon.log"):
        read = t.as_other(["cat", state(name)])
        assert read.returncode != 0 and "Permission denied" in read.stderr, (name, read)
    runs = list(files_under(state("runs")))
    assert any(p.endswith("spec.json") for p in runs), runs
    for path in runs:
        read = t.as_other(["cat", path])
        assert read.returncode != 0, (path, read)
    for path in [state(n) for n in os.listdir(t.state_dir)] + runs:
        st = os.lstat(path)
        want = 0o700 if os.path.isdir(path) else 0o600
        assert st.st_mode & 0o777 == want, f"{path}: {oct(st.st_mode)}"


@pytest.mark.parametrize("case", ["owned_by_other", "group_writable", "world_writable"])
def test_unsafe_state_dir_is_refused_by_client_and_daemon(inst, case):
    t = inst()
    if case == "owned_by_other":
        t.make_state_dir(0o755, owner=t.other)
        words = f"it is owned by {t.other.pw_name} (uid {t.other.pw_uid})"
    else:
        mode = 0o775 if case == "group_writable" else 0o777
        t.make_state_dir(mode)
        words = f"its mode is {mode:04o}"
    for argv in ([trainq_binary(), "submit", "--", "true"],
                 [trainqd_binary(), "--state-dir", t.state_dir]):
        proc = t.as_victim(argv, timeout=30)
        assert proc.returncode == 4, (argv, proc)
        assert f"unsafe state dir {t.state_dir}: {words}" in proc.stderr, proc.stderr
        assert f"chmod 700 {t.state_dir}" in proc.stderr
    assert os.listdir(t.state_dir) == []


@pytest.mark.parametrize("name", ["daemon.log", "trainq.db", "trainq.db-wal", "daemon.lock"])
def test_link_planted_in_the_state_dir_is_refused_and_its_target_unchanged(inst, name):
    t = inst()
    t.make_state_dir(0o700)
    target = os.path.join(t.home, "precious.txt")
    with open(target, "w") as f:
        f.write("keep me\n")
    os.chown(target, t.victim.pw_uid, t.victim.pw_gid)
    link = os.path.join(t.state_dir, name)
    os.symlink(target, link)
    for argv in ([trainq_binary(), "submit", "--", "true"],
                 [trainqd_binary(), "--state-dir", t.state_dir]):
        proc = t.as_victim(argv, timeout=30)
        assert proc.returncode == 4, (argv, proc)
        assert f"{link} is a symbolic link" in proc.stderr, proc.stderr
    assert open(target).read() == "keep me\n"
    assert sorted(os.listdir(t.state_dir)) == [name]
