"""A lost or damaged database, and a submit whose answer was lost: trainq says what happened
and how to recover, never starts an empty queue over old run dirs, and stores a request sent
twice once."""
import os
import shutil
import time

from conftest import wait_for


def done_jobs(t, n):
    ids = [t.submit("--gpus", "0", "--name", f"job{i}", cmd=["echo", f"out{i}"]) for i in range(n)]
    for i in ids:
        t.wait_state(i, ["succeeded"])
    return ids


def stop(t):
    t.run("daemon", "stop")
    wait_for(lambda: t.daemon_pid() is None, what="the daemon to stop")


def test_a_lost_database_with_run_dirs_is_refused_and_no_log_is_appended_to(tq):
    ids = done_jobs(tq, 2)
    log = os.path.join(tq.run_dir(ids[0]), "output.log")
    before = open(log).read()
    stop(tq)
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(tq.state_dir, "trainq.db" + suffix)
        if os.path.exists(path):
            os.remove(path)
    started = time.monotonic()
    r = tq.run("submit", "--gpus", "0", "--", "echo", "new", check=False)
    assert time.monotonic() - started < 10  # said at once, not after the start timeout
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "trainq.db is missing" in r.stderr and f"jobs up to {ids[-1]}" in r.stderr, r.stderr
    assert "trainq daemon backup" in r.stderr and "mv " in r.stderr, r.stderr
    assert tq.daemon_pid() is None
    assert not os.path.exists(os.path.join(tq.state_dir, "trainq.db"))
    assert open(log).read() == before
    # The way out it names: move the old run dirs away, and a new queue starts from id 1.
    runs = os.path.join(tq.state_dir, "runs")
    os.rename(runs, runs + ".old")
    assert tq.submit("--gpus", "0", cmd=["echo", "new"]) == 1
    assert open(os.path.join(runs + ".old", str(ids[0]), "1", "output.log")).read() == before


def fill(t, jobs):
    lines = [f"echo {i} {'x' * 400}" for i in range(jobs)]
    path = t.path("jobs.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    # They wait behind a job that holds the one GPU: a queue of many rows, nothing running.
    t.submit("--gpus", "1", cmd=["sleep", "1000"])
    t.run("submit", "--gpus", "1", "--from", path)


def damage(db, offset, length=4096):
    with open(db, "r+b") as f:
        f.seek(offset)
        f.write(b"\xa5" * length)


def test_a_damaged_database_is_named_with_the_way_back_and_a_backup_restores_it(tq):
    fill(tq, 300)
    backup = tq.path("queue-backup.db")
    r = tq.run("daemon", "backup", "queue-backup.db")  # relative to the caller's directory
    assert backup in r.stdout and os.stat(backup).st_mode & 0o777 == 0o600, r.stdout
    stop(tq)
    db = os.path.join(tq.state_dir, "trainq.db")
    assert not os.path.exists(db + "-wal") or os.path.getsize(db + "-wal") == 0
    assert os.path.getsize(db) > 40 * 4096
    damage(db, 20 * 4096)
    started = time.monotonic()
    r = tq.run("ls", check=False)
    assert time.monotonic() - started < 10
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"database {db} is damaged" in r.stderr, r.stderr
    assert "trainq daemon backup" in r.stderr and "SELECT" not in r.stderr, r.stderr
    assert tq.daemon_pid() is None
    # The restore docs/operations.md describes.
    shutil.copy(backup, db)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    jobs = tq.ls("--all")
    assert len(jobs) == 301


def test_a_truncated_database_is_named(tq):
    fill(tq, 300)
    stop(tq)
    db = os.path.join(tq.state_dir, "trainq.db")
    with open(db, "r+b") as f:
        f.truncate(os.path.getsize(db) // 3)
    r = tq.run("ls", check=False, timeout=30)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert db in r.stderr and "is damaged" in r.stderr, r.stderr


def test_backup_refuses_what_cannot_work(tq):
    tq.run("ls")
    for target, mentions in ((os.path.join(tq.state_dir, "trainq.db"), "the database itself"),
                             (tq.work, "is a directory"),
                             ("/nonexistent/dir/b.db", "/nonexistent/dir/b.db")):
        r = tq.run("daemon", "backup", target, check=False)
        assert r.returncode != 0 and mentions in r.stderr, (target, r.stderr)
    answer = tq.api("POST", "/v1/daemon/backup", {"path": "relative.db"})
    assert answer.status == 400 and "path" in answer.body["error"]["message"]


def test_a_request_sent_again_with_its_key_is_stored_once(tq):
    tq.run("ls")
    body = {"command": ["true"], "gpus": 0, "cwd": tq.work}
    first = tq.api("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k-123"})
    assert first.status == 201, first.raw
    again = tq.api("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k-123"})
    assert again.status == 200, again.raw
    assert again.body == {"ids": first.body["ids"], "repeated": True}
    other = tq.api("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k-456"})
    assert other.status == 201 and other.body["ids"] != first.body["ids"]
    assert len(tq.ls("--all")) == 2
    bad = tq.api("POST", "/v1/jobs", body, headers={"Idempotency-Key": "has space"})
    assert bad.status == 400 and "Idempotency-Key" in bad.body["error"]["message"]
    assert len(tq.ls("--all")) == 2
    # The key outlives the daemon: a repeat after a restart still finds the ids.
    tq.kill_daemon()
    tq.run("ls")
    after = tq.api("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k-123"})
    assert after.status == 200 and after.body["ids"] == first.body["ids"]
