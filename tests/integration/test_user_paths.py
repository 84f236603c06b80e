"""No blocking call on a path a user controls (docs/architecture.md, "Paths users control").

On a shared daemon (root, one event loop for every user) an ordinary user names, as `--image`,
`--mount` and `--stage`, a FIFO, /dev/zero, a link, a 50 GiB sparse file, or a path swapped
between such things while the daemon looks. Each submit is answered at once, refused with the
option and the reason, and nothing is stored; meanwhile another user's `trainq ls` answers and
their running job runs on. Found as `mkfifo ~/img.tar; trainq submit --image ~/img.tar`, which
held the daemon's loop: `ls` hung for everyone and running jobs were fenced.
"""
import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from conftest import check_no_sanitizer_report, trainq_binary, wait_for
from test_shared import Shared

ANSWER_S = 2.0  # a refusal comes within this
LS_S = 1.0  # another user's `trainq ls`, meanwhile


@pytest.fixture(scope="module")
def node(people):
    """A shared daemon, bob's job running on it, and a directory of ada's."""
    s = Shared(people)
    s.start()
    try:
        s.bobs_job = s.submit_as("bob", "--gpus", "0", cmd=["sleep", "600"])
        s.wait_state(s.bobs_job, "running")
        ada = people["ada"]
        s.ada_dir = os.path.join(s.work, f"ada-{uuid.uuid4().hex[:6]}")
        os.mkdir(s.ada_dir, 0o755)
        os.chown(s.ada_dir, ada.pw_uid, ada.pw_gid)
        yield s
    finally:
        s.cleanup()


def as_user(s, name):
    user = s.people[name]
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [],
            "env": s.env_of(user), "cwd": s.work, "umask": 0o022}


def make(s, name, kind, target=None):
    """A FIFO, a symbolic link to `target`, a 50 GiB sparse file or a plain file, ada's."""
    path = os.path.join(s.ada_dir, name)
    if kind == "fifo":
        os.mkfifo(path, 0o644)
    elif kind == "link":
        os.symlink(target, path)
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(50 << 30)
    else:
        with open(path, "w") as f:
            f.write(target or "not an archive\n")
    ada = s.people["ada"]
    os.lchown(path, ada.pw_uid, ada.pw_gid)
    return path


def release(paths):
    """Lets go of a daemon blocked opening one of `paths` (a FIFO that a writer opens)."""
    for p in paths:
        try:
            os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def bobs_ls_takes(s):
    """Seconds bob's `trainq ls` takes (a slow answer counts in full, up to 30 s)."""
    start = time.monotonic()
    try:
        p = subprocess.run([trainq_binary(), "ls", "--json"], capture_output=True, text=True,
                           timeout=30, **as_user(s, "bob"))
        assert p.returncode == 0, p.stderr
    except subprocess.TimeoutExpired:
        pass
    return time.monotonic() - start


def ada_submits(s, *opts, fifos=()):
    """ada's `trainq submit ... -- true`, and bob's `ls` while it is answered: (process, seconds
    the submit took, seconds bob's ls took). A submit not answered in 10 s fails the test."""
    start = time.monotonic()
    proc = subprocess.Popen([trainq_binary(), "submit", "--gpus", "0", *opts, "--", "true"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **as_user(s, "ada"))
    ls = bobs_ls_takes(s)
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        release(fifos)
        proc.kill()
        proc.communicate()
        pytest.fail(f"trainq submit {' '.join(opts)} was not answered in 10 s")
    took = time.monotonic() - start
    check_no_sanitizer_report(err, "trainq submit")
    proc.stdout_text, proc.stderr_text = out, err
    return proc, took, ls


def jobs_of(s, name):
    jobs = json.loads(s.trainq_as("root", "ls", "--all", "--json", check=0).stdout)
    return [j for j in jobs if j["user"] == s.people[name].pw_name]


def bobs_job_runs_on(s):
    job = s.show(s.bobs_job)
    assert job["state"] == "running" and job["attempt"] == 1, job


def assert_refused(proc, took, ls, option, says):
    assert proc.returncode == 2, (proc.returncode, proc.stderr_text)
    assert option + ":" in proc.stderr_text and says in proc.stderr_text, proc.stderr_text
    assert took < ANSWER_S, f"refused after {took:.2f} s"
    assert ls < LS_S, f"bob's ls took {ls:.2f} s meanwhile"


@pytest.mark.parametrize("kind", ["fifo", "device", "link", "sparse"])
def test_an_image_that_is_no_archive_file_is_refused_at_once(node, kind):
    s = node
    path = {"fifo": lambda: make(s, f"img-{kind}.tar", "fifo"),
            "device": lambda: "/dev/zero",
            "link": lambda: make(s, f"img-{kind}.tar", "link", make(s, "fifo-img", "fifo")),
            "sparse": lambda: make(s, f"img-{kind}.tar", "sparse")}[kind]()
    says = {"fifo": f"{path} is a FIFO", "device": "/dev/zero is a character device",
            "link": f"{path} is a symbolic link", "sparse": f"{path} is not a tar archive"}[kind]
    proc, took, ls = ada_submits(s, "--image", path, fifos=[path])
    assert_refused(proc, took, ls, "--image", says)
    assert "give a `podman save`/`docker save` tar or an OCI archive" in proc.stderr_text
    assert jobs_of(s, "ada") == []
    bobs_job_runs_on(s)


@pytest.mark.parametrize("kind", ["fifo", "device", "link"])
def test_a_mount_source_that_is_no_file_or_directory_is_refused_at_once(node, kind):
    s = node
    path = {"fifo": lambda: make(s, f"mnt-{kind}", "fifo"),
            "device": lambda: "/dev/zero",
            "link": lambda: make(s, f"mnt-{kind}", "link", s.ada_dir)}[kind]()
    says = {"fifo": f"{path} is a FIFO", "device": "/dev/zero is a character device",
            "link": f"{path} is a symbolic link"}[kind]
    proc, took, ls = ada_submits(s, "--image", "localhost/none:1", "--mount", f"{path}:/m",
                                 fifos=[path])
    assert_refused(proc, took, ls, "--mount", says)
    assert "a mount's source is a directory or a regular file" in proc.stderr_text
    assert jobs_of(s, "ada") == []
    bobs_job_runs_on(s)


@pytest.mark.parametrize("kind", ["fifo", "device", "link"])
def test_a_stage_source_that_is_no_file_or_directory_is_refused_at_once(node, kind):
    """The client makes the manifest, so it is the one that refuses."""
    s = node
    path = {"fifo": lambda: make(s, f"stage-{kind}", "fifo"),
            "device": lambda: "/dev/zero",
            "link": lambda: make(s, f"stage-{kind}", "link", make(s, "fifo-stage", "fifo"))}[kind]()
    says = {"fifo": "a FIFO", "device": "a character device", "link": "a symbolic link"}[kind]
    proc, took, ls = ada_submits(s, "--stage", path, fifos=[path])
    assert_refused(proc, took, ls, "--stage", says)
    assert "neither a directory nor a regular file" in proc.stderr_text
    assert jobs_of(s, "ada") == []


POST_AS = r"""
import http.client, socket, sys
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sys.argv[1])
conn = Conn("localhost", timeout=10)
conn.request("POST", "/v1/jobs", body=sys.stdin.buffer.read(),
             headers={"Content-Type": "application/json"})
r = conn.getresponse()
print(r.status, r.read().decode()[:2000])
"""


def ada_posts(s, body, fifos=()):
    """POST /v1/jobs by ada on the shared socket: (HTTP status, body, seconds, bob's ls)."""
    ada = s.people["ada"]
    start = time.monotonic()
    proc = subprocess.Popen(["python3", "-c", POST_AS, s.socket], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, user=ada.pw_uid,
                            group=ada.pw_gid)
    proc.stdin.write(json.dumps(body).encode())
    proc.stdin.close()
    ls = bobs_ls_takes(s)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        release(fifos)
        proc.kill()
        pytest.fail("POST /v1/jobs was not answered in 10 s")
    took = time.monotonic() - start
    status, _, text = proc.stdout.read().decode().partition(" ")
    return int(status or 0), text, took, ls


def staging(s, src, manifest_path, manifest="0" * 64):
    return {"command": ["true"], "gpus": 0, "cwd": s.work,
            "transfers": [{"kind": "stage", "src": src, "dst": "d", "manifest": manifest,
                           "manifest_path": manifest_path, "bytes": 0, "files": 0}]}


def test_the_daemon_refuses_stage_files_the_client_would_not_send(node):
    """What a client made by hand names: a source or a manifest that is a FIFO, a device, a
    link or 50 GiB, each refused with a 400 naming --stage, at once."""
    s = node
    fifo = make(s, "stage-src-fifo", "fifo")
    source = make(s, "stage-src", "file", "data\n")
    manifest_fifo = make(s, "manifest-fifo", "fifo")
    cases = [
        (staging(s, fifo, source), f"{fifo} is a FIFO"),
        (staging(s, make(s, "stage-src-link", "link", source), source), "is a symbolic link"),
        (staging(s, source, manifest_fifo), f"manifest {manifest_fifo} is a FIFO"),
        (staging(s, source, "/dev/zero"), "manifest /dev/zero is a character device"),
        (staging(s, source, make(s, "manifest-link", "link", manifest_fifo)),
         "is a symbolic link"),
        (staging(s, source, make(s, "manifest-huge", "sparse")), "holds 53687091200 bytes"),
    ]
    for body, says in cases:
        status, text, took, ls = ada_posts(s, body, fifos=[fifo, manifest_fifo])
        assert status == 400 and "--stage: " in text and says in text, (status, text)
        assert took < ANSWER_S and ls < LS_S, (took, ls, says)
    # The same for a container job's files, sent without the client.
    body = {"command": ["true"], "gpus": 0, "cwd": s.work, "image": fifo,
            "mounts": [f"{fifo}:/m"]}
    status, text, took, ls = ada_posts(s, body, fifos=[fifo])
    assert status == 400 and f"--image: {fifo} is a FIFO" in text, (status, text)
    assert took < ANSWER_S and ls < LS_S
    assert jobs_of(s, "ada") == []
    bobs_job_runs_on(s)


SWAP = r"""
import os, sys, time
path, regular, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
tmp = path + ".new"
makers = [lambda: os.link(regular, tmp), lambda: os.mkfifo(tmp, 0o644),
          lambda: os.symlink(regular, tmp), lambda: os.symlink("/dev/zero", tmp)]
end, swaps = time.monotonic() + seconds, 0
while time.monotonic() < end and not os.path.exists(path + ".stop"):
    make = makers[swaps % len(makers)]
    if swaps % len(makers) == 0 and "--no-regular" in sys.argv:
        make = makers[1]
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    make()
    os.replace(tmp, path)
    swaps += 1
print(swaps)
"""


def test_a_path_swapped_while_the_daemon_looks_never_holds_it(node):
    """Best effort at the race: ada swaps one path between a regular file, a FIFO and links
    while submitting it again and again; every submit is answered at once, and bob's ls too."""
    s = node
    ada = s.people["ada"]
    regular = make(s, "swap-regular", "file")
    slowest = []
    stop = threading.Event()

    def watch_ls():
        while not stop.is_set():
            slowest.append(bobs_ls_takes(s))

    watcher = threading.Thread(target=watch_ls)
    watcher.start()
    try:
        for option in ("--image", "--mount", "--stage"):
            path = os.path.join(s.ada_dir, f"swap{option}")
            # A regular file is a fine mount or stage source: only what is not one is swapped
            # in there, so that every submit is refused.
            flags = [] if option == "--image" else ["--no-regular"]
            swapper = subprocess.Popen(["python3", "-c", SWAP, path, regular, "60", *flags],
                                       user=ada.pw_uid, group=ada.pw_gid,
                                       stdout=subprocess.PIPE, text=True)
            try:
                wait_for(lambda: os.path.lexists(path), what="the swapping to begin")
                opts = {"--image": ["--image", path],
                        "--mount": ["--image", "localhost/none:1", "--mount", f"{path}:/m"],
                        "--stage": ["--stage", path]}[option]
                for _ in range(8):
                    proc, took, _ = ada_submits(s, *opts, fifos=[path])
                    assert proc.returncode == 2, (option, proc.returncode, proc.stderr_text)
                    assert option + ":" in proc.stderr_text, proc.stderr_text
                    assert took < ANSWER_S, f"{option}: answered after {took:.2f} s"
            finally:
                open(path + ".stop", "w").close()
                swaps, _ = swapper.communicate(timeout=30)
            assert int(swaps) > 100, f"{option}: only {swaps} swaps"
    finally:
        stop.set()
        watcher.join()
    assert slowest and max(slowest) < LS_S, f"bob's ls took up to {max(slowest):.2f} s"
    assert jobs_of(s, "ada") == []
    bobs_job_runs_on(s)
