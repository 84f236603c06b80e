"""The researcher's workflow through the real daemon and CLI: run and wait, sweeps, arrays
and groups, sbatch scripts, webhooks (docs/workflow.md)."""
import datetime
import http.server
import json
import os
import pwd
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import trainq_binary, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
ME = pwd.getpwuid(os.getuid()).pw_name  # who the daemon sees submitting


def popen(tq, *args):
    return subprocess.Popen([trainq_binary(), *args], env=tq.env, cwd=tq.work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# --- run and wait ---

def test_run_streams_the_output_and_exits_with_the_jobs_code(tq):
    p = tq.run("run", "--gpus", "0", "--", "sh", "-c", "echo hello from the job; exit 7",
               check=False)
    assert p.returncode == 7, p.stderr
    assert "hello from the job" in p.stdout
    assert "exit code 7" in p.stderr
    ok = tq.run("run", "--gpus", "0", "--", "sh", "-c", "echo fine")
    assert ok.returncode == 0 and ok.stdout == "fine\n"
    killed = tq.run("run", "--gpus", "0", "--", "sh", "-c", "kill -9 $$", check=False)
    assert killed.returncode == 128 + 9
    # A command that cannot start exits as a shell would say (docs/workflow.md).
    missing = tq.run("run", "--gpus", "0", "--", "no-such-command-for-trainq", check=False)
    assert missing.returncode == 127 and "No such file or directory" in missing.stderr
    plain = tq.path("plain.txt")
    with open(plain, "w") as f:
        f.write("not a program\n")
    denied = tq.run("run", "--gpus", "0", "--", plain, check=False)
    assert denied.returncode == 126 and "Permission denied" in denied.stderr, denied.stderr


def test_run_shows_its_place_in_line_then_runs(tq):
    go = tq.path("go")
    hog = tq.submit("--gpus", "1", cmd=tq.fake_job("--wait-file", go))
    tq.wait_state(hog, "running")
    p = popen(tq, "run", "--gpus", "1", "--", "sh", "-c", "echo second")
    wait_for(lambda: len(tq.ls()) == 2, what="the run's job to be queued")
    time.sleep(1.0)
    open(go, "w").close()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out == "second\n"
    # Not a terminal: plain lines, the first naming the place in line and the reason.
    assert "queued, 1st in line:" in err, err
    assert "GPU" in err


def started(tq):
    """The running job's id once its command has printed: its shim is then ready to stop it."""
    def running():
        jobs = [j for j in tq.ls() if j["state"] == "running"]
        return jobs and "started" in tq.run("logs", str(jobs[0]["id"])).stdout and jobs[0]["id"]
    return wait_for(running, what="the job to run and print")


def test_ctrl_c_cancels_and_a_second_detaches(tq):
    p = popen(tq, "run", "--gpus", "0", "--", "sh", "-c", "echo started; sleep 300")
    job = started(tq)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "cancelling job" in err
    assert tq.wait_state(job, "cancelled")

    p = popen(tq, "run", "--gpus", "0", "--", "sh", "-c", "trap '' TERM; echo started; sleep 300")
    job = started(tq)
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert "detached" in err


def test_wait_returns_the_first_failed_code_and_any_returns_at_the_first_end(tq):
    go = tq.path("go")
    a = tq.submit("--gpus", "0", cmd=["sh", "-c", "exit 0"])
    b = tq.submit("--gpus", "0", cmd=["sh", "-c", "exit 5"])
    slow = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    w = tq.run("wait", str(a), str(b), check=False)
    assert w.returncode == 5
    assert tq.run("wait", str(a)).returncode == 0
    anyone = tq.run("wait", "--any", str(slow), str(a), check=False)
    assert anyone.returncode == 0
    assert tq.state(slow) == "running"
    open(go, "w").close()
    assert tq.run("wait", str(slow)).returncode == 0
    bad = tq.run("wait", "abc", check=False)
    assert bad.returncode == 2 and "job id" in bad.stderr


# --- sweeps, arrays, groups ---

def test_a_sweep_expands_the_cross_product_in_one_group_and_cancels_whole(tq):
    go = tq.path("go")
    out = tq.run("submit", "--json", "--gpus", "0", "--sweep", "lr=1e-3,3e-4,1e-4",
                 "--sweep", "bs=32,64", "--", "sh", "-c",
                 'while [ ! -e "$0" ]; do sleep 0.05; done', go, "lr={lr} bs={bs}").stdout
    doc = json.loads(out)
    ids, group = doc["ids"], doc["group"]
    assert len(ids) == 6 and group == ids[0]
    jobs = tq.ls("--group", str(group))
    assert [j["id"] for j in jobs] == ids
    notes = [j["command"][-1] for j in jobs]
    assert notes == [f"lr={lr} bs={bs}" for lr in ("1e-3", "3e-4", "1e-4") for bs in ("32", "64")]
    assert jobs[1]["name"].endswith("lr=1e-3 bs=64")
    other = tq.submit("--gpus", "0", cmd=tq.fake_job("--wait-file", go))
    wait_for(lambda: all(tq.state(i) == "running" for i in ids), what="the sweep to run")
    c = tq.run("cancel", "--group", str(group))
    assert f"group {group}" in c.stdout
    for i in ids:
        tq.wait_state(i, "cancelled")
    assert tq.state(other) == "running"  # not in the group
    retried = tq.run("retry", "--group", str(group))
    assert "6 job(s) queued again" in retried.stdout
    open(go, "w").close()
    assert tq.run("wait", "--group", str(group), timeout=120).returncode == 0


def test_an_array_runs_at_most_its_limit_at_once_with_its_index(tq):
    tq.set_gpus([{"uuid": f"GPU-sim-{i}", "name": "Simulated", "memory_total": "80GiB",
                  "memory_used_by_others": 0, "utilization": 0} for i in range(4)])
    go = tq.path("go")
    out = tq.run("submit", "--json", "--gpus", "1", "--array", "0-5%2", "--",
                 "sh", "-c", 'echo "$TRAINQ_ARRAY_INDEX {index}" > "$0.$TRAINQ_ARRAY_INDEX"; '
                 'while [ ! -e "$0" ]; do sleep 0.05; done', go).stdout
    doc = json.loads(out)
    ids, group = doc["ids"], doc["group"]
    assert len(ids) == 6
    wait_for(lambda: sum(tq.state(i) == "running" for i in ids) == 2, what="two running")
    time.sleep(0.5)
    assert sum(tq.state(i) == "running" for i in ids) == 2  # four GPUs free, limit two
    waiting = [j for j in tq.ls("--group", str(group)) if j["state"] == "queued"]
    assert "at most 2 of its jobs run at once" in waiting[0]["reason"]
    open(go, "w").close()
    assert tq.run("wait", "--group", str(group), timeout=120).returncode == 0
    for index in range(6):
        with open(f"{go}.{index}") as f:
            assert f.read() == f"{index} {index}\n"


def test_bad_sweeps_and_arrays_are_refused_naming_the_option(tq):
    p = tq.run("submit", "--sweep", "lr=1,2", "--", "python", "t.py", check=False)
    assert p.returncode == 2 and "{lr} appears nowhere" in p.stderr
    p = tq.run("submit", "--array", "5-1", "--", "true", check=False)
    assert p.returncode == 2 and "--array: '5-1'" in p.stderr
    assert tq.ls("--all") == []


# --- sbatch ---

SCRIPT = """#!/bin/bash
#SBATCH --job-name=envprobe
#SBATCH --array=0-3%2
#SBATCH --output=out/%x-%A_%a.out
#SBATCH --error=out/%x-%A_%a.err
#SBATCH --cpus-per-task=1
#SBATCH --time=0:05:00
#SBATCH --partition=gpu
env | grep -E '^(SLURM|ENVIRONMENT)' | sort
echo "args: $*"
echo "to stderr" >&2
"""


def slurm_vars(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and
                (line.startswith("SLURM") or line.startswith("ENVIRONMENT")))


def test_sbatch_runs_an_array_script_with_the_variables_slurm_gives(tq):
    os.makedirs(tq.path("out"))
    with open(tq.path("probe.sh"), "w") as f:
        f.write(SCRIPT)
    p = tq.run("sbatch", "probe.sh", "a1", "a2 with space")
    assert p.stdout.startswith("Submitted batch job ")
    array_id = int(p.stdout.split()[-1])
    assert "--partition=gpu is not honoured" in p.stderr
    assert tq.run("wait", "--group", str(array_id), timeout=120).returncode == 0
    jobs = tq.ls("--group", str(array_id))
    assert len(jobs) == 4
    for task, job in enumerate(jobs):
        out_file = tq.path(f"out/envprobe-{array_id}_{task}.out")
        err_file = tq.path(f"out/envprobe-{array_id}_{task}.err")
        wait_for(lambda: os.path.exists(out_file) and "args:" in open(out_file).read(),
                 what=f"{out_file}")
        text = open(out_file).read()
        assert "args: a1 a2 with space" in text
        wait_for(lambda: open(err_file).read() == "to stderr\n", what=f"{err_file}")
        got = slurm_vars(text)
        # The variables and values the reference Slurm gave the same script
        # (data/slurm_reference_env.md), derived for this job.
        expected = {
            "SLURM_JOB_ID": str(job["id"]), "SLURM_JOBID": str(job["id"]),
            "SLURM_JOB_NAME": "envprobe", "SLURM_ARRAY_JOB_ID": str(array_id),
            "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": "4",
            "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3",
            "SLURM_ARRAY_TASK_STEP": "1", "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
            "SLURM_SUBMIT_DIR": tq.work, "SLURM_CPUS_PER_TASK": "1",
            "SLURM_CPUS_ON_NODE": "1", "SLURM_TASKS_PER_NODE": "1", "ENVIRONMENT": "BATCH",
        }
        for name, value in expected.items():
            assert got.get(name) == value, (name, got.get(name), value)
        for name in ("SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_SUBMIT_HOST",
                     "SLURM_TASK_PID", "SLURM_JOB_USER"):
            assert got.get(name), name
        log = tq.run("logs", str(job["id"])).stdout
        assert "args: a1 a2 with space" in log and "to stderr" in log


def test_sbatch_parsable_dependency_and_refusals(tq):
    with open(tq.path("first.sh"), "w") as f:
        f.write("#!/bin/sh\n#SBATCH -J first\necho one\n")
    first = int(tq.run("sbatch", "--parsable", "first.sh").stdout)
    with open(tq.path("second.sh"), "w") as f:
        f.write(f"#!/bin/sh\n#SBATCH -J second\n#SBATCH --dependency=afterok:{first}\n"
                "echo two\n")
    second = int(tq.run("sbatch", "--parsable", "second.sh").stdout)
    assert tq.show(second)["after"] == [first]
    tq.wait_state(second, "succeeded", timeout=60)
    assert open(tq.path(f"slurm-{second}.out")).read() == "two\n"
    with open(tq.path("bad.sh"), "w") as f:
        f.write("echo no interpreter\n")
    p = tq.run("sbatch", "bad.sh", check=False)
    assert p.returncode == 2 and "#!" in p.stderr
    with open(tq.path("badtime.sh"), "w") as f:
        f.write("#!/bin/sh\n#SBATCH --time=soon\necho\n")
    p = tq.run("sbatch", "badtime.sh", check=False)
    assert p.returncode == 2 and "#SBATCH line 2: --time 'soon'" in p.stderr


# --- notifications ---

class Receiver:
    """A local HTTP server that records the JSON POSTed to it; fails while `down`."""

    def __init__(self):
        self.got = []
        self.arrived = {}  # job id -> time.time() its webhook came
        self.down = False
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if outer.down:
                    self.send_response(503)
                else:
                    doc = json.loads(body)
                    if isinstance(doc, dict) and "id" in doc:
                        outer.arrived.setdefault(doc["id"], time.time())
                    outer.got.append((self.path, doc))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


class Silent:
    """A TCP listener that takes every connection and never answers: a hung webhook."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def silent():
    s = Silent()
    yield s
    s.close()


def test_a_webhook_gets_each_end_and_one_pending_survives_a_restart(tq, receiver):
    url = f"http://127.0.0.1:{receiver.port}/hooks/trainq?x=1"
    job = tq.submit("--gpus", "0", "--notify", url, "--name", "nightly",
                    cmd=["sh", "-c", "echo last words; exit 3"])
    tq.wait_state(job, "failed")
    path, body = wait_for(lambda: receiver.got, what="the webhook")[0]
    assert path == "/hooks/trainq?x=1"
    assert body["id"] == job and body["state"] == "failed" and body["exit_code"] == 3
    assert body["name"] == "nightly" and "last words" in body["log_tail"]

    receiver.down = True
    second = tq.submit("--gpus", "0", "--notify", url, cmd=["true"])
    tq.wait_state(second, "succeeded")
    notify_dir = os.path.join(tq.state_dir, "notify")
    wait_for(lambda: os.listdir(notify_dir), what="the pending notification's file")
    tq.run("daemon", "stop")
    receiver.down = False
    tq.run("daemon", "start")
    got = wait_for(lambda: [b for _, b in receiver.got if b["id"] == second], timeout=30,
                   what="the pending webhook after the restart")
    assert got[0]["state"] == "succeeded"
    wait_for(lambda: not os.listdir(notify_dir), what="the notification to be forgotten")


def test_slack_format_and_mail_without_sendmail(make_trainq, receiver):
    tq = make_trainq(notify_url=f"http://127.0.0.1:{receiver.port}/slack",
                     notify_format="slack", sendmail="/nonexistent/sendmail")
    job = tq.submit("--gpus", "0", "--name", "every", cmd=["true"])
    tq.wait_state(job, "succeeded")
    _, body = wait_for(lambda: receiver.got, what="the slack webhook")[0]
    assert list(body) == ["text"]
    assert f"job {job} (every) succeeded" in body["text"]
    p = tq.run("submit", "--mail", ME, "--", "true", check=False)
    assert p.returncode == 2
    assert "--mail: this machine has no /nonexistent/sendmail" in p.stderr
    bad = tq.run("submit", "--notify", "ftp://x/y", "--", "true", check=False)
    assert bad.returncode == 2 and "--notify" in bad.stderr


def test_a_receiver_that_never_answers_delays_no_one_else(tq, receiver, silent):
    """Twenty ends notify a listener that takes the connection and never answers; another
    job's webhook still comes within seconds of its end, and stopping does not wait."""
    dead = f"http://127.0.0.1:{silent.port}/hook"
    out = tq.run("submit", "--json", "--gpus", "0", "--array", "0-19", "--notify", dead,
                 "--", "true").stdout
    group = json.loads(out)["group"]
    assert tq.run("wait", "--group", str(group), timeout=120).returncode == 0
    wait_for(lambda: len(silent.conns) >= 2, what="deliveries hanging on the silent listener")
    job = tq.submit("--gpus", "0", "--notify", f"http://127.0.0.1:{receiver.port}/ok",
                    cmd=["true"])
    body = wait_for(lambda: [b for _, b in receiver.got if b["id"] == job], timeout=60,
                    what="the other job's webhook")[0]
    ended = datetime.datetime.fromisoformat(body["ended_at"].replace("Z", "+00:00"))
    late = receiver.arrived[job] - ended.timestamp()
    # One delivery at a time, 10 s each, made it wait 200 s behind the silent listener's.
    assert late < 5, f"the webhook came {late:.1f}s after the job's end"
    notify_dir = os.path.join(tq.state_dir, "notify")
    started = time.monotonic()
    tq.run("daemon", "stop")
    took = time.monotonic() - started
    assert took < 5, f"daemon stop took {took:.1f}s"
    # The silent listener's twenty wait on disk for the next start.
    assert len([n for n in os.listdir(notify_dir) if n.endswith(".json")]) == 20
    log = tq.daemon_log()
    assert f"notification to {dead} failed" in log or "left unfinished" in log, log[-2000:]


def test_mail_goes_only_to_the_submitters_own_address(make_trainq):
    root = make_trainq().root  # a scratch dir for the stand-in sendmail
    sendmail = os.path.join(root, "sendmail")
    with open(sendmail, "w") as f:
        f.write(f'#!/bin/sh\ncat >> {os.path.join(root, "inbox")}\n')
    os.chmod(sendmail, 0o755)
    tq = make_trainq(sendmail=sendmail)
    other = "nobody" if ME != "nobody" else "root"
    for address in (other, "someone@evil.example", f"{ME}@evil.example"):
        p = tq.run("submit", "--mail", address, "--", "true", check=False)
        assert p.returncode == 2, p.stderr
        assert f"--mail: '{address}' is not your address; use '{ME}'" in p.stderr
        assert "mail_domains" in p.stderr  # none set: says where USER@DOMAIN comes from
    with open(tq.path("mail.sh"), "w") as f:
        f.write("#!/bin/sh\n#SBATCH --mail-user=someone@evil.example\ntrue\n")
    p = tq.run("sbatch", "mail.sh", check=False)
    assert p.returncode == 2 and "--mail: 'someone@evil.example'" in p.stderr
    assert tq.ls("--all") == []
    job = tq.submit("--gpus", "0", "--mail", ME, cmd=["true"])
    tq.wait_state(job, "succeeded")
    inbox = os.path.join(root, "inbox")
    wait_for(lambda: os.path.exists(inbox) and f"To: {ME}\n" in open(inbox).read(),
             what="the mail to the submitter")


# --- snapshots and run records ---

def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def make_repo(tq):
    repo = tq.path("repo")
    os.makedirs(os.path.join(repo, "lib"))
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("print('version one')\n")
    with open(os.path.join(repo, "lib", "copy.py"), "w") as f:
        f.write("print('version one')\n")  # the same bytes: stored once
    with open(os.path.join(repo, ".gitignore"), "w") as f:
        f.write("data/\n")
    os.makedirs(os.path.join(repo, "data"))
    with open(os.path.join(repo, "data", "big.bin"), "wb") as f:
        f.write(b"\0" * 4096)
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    return repo


def test_a_snapshot_job_runs_the_code_as_submitted_and_records_it(tq):
    repo = make_repo(tq)
    go = tq.path("go")
    cmd = ["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done; python3 train.py', go]
    p = tq.run("submit", "--snapshot", "--gpus", "0", "--", *cmd, cwd=repo)
    job = int(p.stdout)
    assert "trainq: snapshot " in p.stderr
    # The tree moves on while the job waits: a new commit and an uncommitted edit.
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("print('version two')\n")
    git(repo, "commit", "-q", "-am", "two")
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("print('version three')\n")
    later = int(tq.run("submit", "--snapshot", "--gpus", "0", "--", *cmd, cwd=repo).stdout)
    open(go, "w").close()
    tq.wait_state(job, "succeeded")
    tq.wait_state(later, "succeeded")
    assert tq.run("logs", str(job)).stdout == "version one\n"
    assert tq.run("logs", str(later)).stdout == "version three\n"

    first, second = tq.show(job), tq.show(later)
    head_one = first["record"]["git"]["commit"]
    assert len(head_one) == 40 and first["record"]["git"]["dirty"] is False
    assert second["record"]["git"]["dirty"] is True and second["record"]["git"]["diff_sha256"]
    assert second["record"]["git"]["commit"] != head_one
    assert first["record"]["gpu_models"] == ["Simulated A100 80GB"]
    snap = first["record"]["snapshot"]["dir"]
    assert first["cwd"] == snap and os.path.isfile(os.path.join(snap, "train.py"))
    # Ignored by git: not copied, but a link to the work tree's (docs/workflow.md).
    assert os.readlink(os.path.join(snap, "data")) == os.path.join(repo, "data")
    # Identical files are one stored object: the same inode in both places.
    assert os.stat(os.path.join(snap, "lib", "copy.py")).st_ino == \
        os.stat(os.path.join(snap, "train.py")).st_ino
    shown = tq.run("show", str(job)).stdout
    assert f"commit:      {head_one} on main" in shown

    diff = tq.run("diff", str(job), str(later)).stdout
    assert "commit:" in diff and head_one[:12] in diff and head_one not in diff  # short
    assert "uncommitted changes" in diff
    assert "+print('version three')" in diff  # how their uncommitted changes differ
    # The files that differ, then the code diff, with paths as in the tree.
    assert "files that differ:\nM\ttrain.py\n" in diff, diff
    assert "--- a/train.py\n+++ b/train.py\n" in diff, diff
    as_json = json.loads(tq.run("diff", "--json", str(job), str(later)).stdout)
    commit = next(d for d in as_json["differences"] if d["what"] == "commit")
    assert commit["first"] == head_one and "train.py" in as_json["files"]
    same = tq.run("diff", str(job), str(job)).stdout
    assert same == "the two runs ran the same code, command and environment\n"


def test_a_second_snapshot_of_the_same_tree_stores_nothing_new(tq):
    repo = make_repo(tq)
    objects = os.path.join(tq.state_dir, "snapshots", "objects")
    tq.run("submit", "--snapshot", "--gpus", "0", "--", "true", cwd=repo)
    stored = sorted(os.listdir(objects))
    p = tq.run("submit", "--snapshot", "--gpus", "0", "--", "true", cwd=repo)
    assert "(0 B new)" in p.stderr
    assert sorted(os.listdir(objects)) == stored


def test_a_snapshot_job_reads_the_data_and_writes_its_outputs_in_the_project(make_trainq):
    """docs/workflow.md, "Code snapshots": git-ignored top-level directories and the config's
    snapshot_link paths are the work tree's own, and TRAINQ_SUBMIT_DIR names where the submit
    ran."""
    tq = make_trainq(snapshot_link=["outputs/runs"])
    tq.start_daemon()
    repo = make_repo(tq)
    script = ("import os; print(len(open('../data/big.bin', 'rb').read())); "
              "os.makedirs('../outputs/runs', exist_ok=True); "
              "open('../outputs/runs/ckpt.pt', 'w').write('weights'); open('scratch.txt', 'w'); "
              "print('submit dir', os.environ['TRAINQ_SUBMIT_DIR'])")
    p = tq.run("submit", "--snapshot", "--gpus", "0", "--", "python3", "-c", script,
               cwd=os.path.join(repo, "lib"))
    assert "linked to the work tree: data, outputs/runs" in p.stderr, p.stderr
    job = int(p.stdout)
    done = tq.wait_state(job, ("succeeded", "failed"))
    log = tq.run("logs", str(job)).stdout
    assert done["state"] == "succeeded", log
    assert "4096" in log and f"submit dir {os.path.join(repo, 'lib')}" in log, log
    # The checkpoint is in the project; the job's other files stay in its copy.
    assert open(os.path.join(repo, "outputs", "runs", "ckpt.pt")).read() == "weights"
    assert not os.path.exists(os.path.join(repo, "lib", "scratch.txt"))
    snap = done["record"]["snapshot"]
    assert os.path.exists(os.path.join(snap["dir"], "lib", "scratch.txt"))
    assert snap["links"] == [{"path": "data", "to": os.path.join(repo, "data")},
                             {"path": "outputs/runs", "to": os.path.join(repo, "outputs/runs")}]
    shown = tq.run("show", str(job)).stdout
    assert (f"linked:      data -> {repo}/data, outputs/runs -> {repo}/outputs/runs"
            in shown), shown
    assert "outputs:     in the linked paths go to the work tree" in shown, shown
    bad = make_trainq(snapshot_link=["../elsewhere"])
    p = bad.run("daemon", "start", check=False)
    assert p.returncode != 0 and "'../elsewhere' is not a path inside the work tree" in (
        p.stderr + bad.daemon_log()), p.stderr


def test_snapshot_refusals_name_the_problem(make_trainq):
    tq = make_trainq(snapshot_max_size="1KiB")
    repo = make_repo(tq)
    with open(os.path.join(repo, "weights.pt"), "wb") as f:
        f.write(b"w" * 8192)
    p = tq.run("submit", "--snapshot", "--", "true", cwd=repo, check=False)
    assert p.returncode == 2
    assert "more than snapshot_max_size" in p.stderr and "weights.pt (8.0 KiB)" in p.stderr
    outside = tq.run("submit", "--snapshot", "--", "true", check=False)
    assert outside.returncode == 2 and "not in a git work tree" in outside.stderr
    assert tq.ls("--all") == []


def test_mail_goes_through_the_configured_sendmail(make_trainq):
    root = make_trainq().root  # a scratch dir for the stand-in sendmail
    inbox = os.path.join(root, "inbox")
    sendmail = os.path.join(root, "sendmail")
    with open(sendmail, "w") as f:
        f.write(f'#!/bin/sh\necho "$@" > {inbox}.args\ncat > {inbox}\n')
    os.chmod(sendmail, 0o755)
    tq = make_trainq(sendmail=sendmail, mail_domains=["example.org"])
    job = tq.submit("--gpus", "0", "--mail", f"{ME}@example.org", "--name", "mailed",
                    cmd=["sh", "-c", "echo the end; exit 2"])
    tq.wait_state(job, "failed")
    wait_for(lambda: os.path.exists(inbox) and "the end" in open(inbox).read(),
             what="the mail")
    message = open(inbox).read()
    assert message.startswith(f"To: {ME}@example.org\nSubject: trainq: job ")
    assert f"job {job} (mailed) failed: exit code 2" in message
    assert open(inbox + ".args").read().split() == ["-t", "-oi"]
