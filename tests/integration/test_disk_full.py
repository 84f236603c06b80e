"""A full disk: the state dir is a small tmpfs that a job's output or a pile of
files fills. No job's end is lost, every wait says "disk full in STATE_DIR", and the daemon
goes on by itself once space is freed."""
import errno
import os
import shutil
import subprocess
import time

import pytest

from conftest import process_gone, read_json, wait_for

MIB = 1 << 20


@pytest.fixture
def small_disk(make_trainq):
    """A trainq instance whose state dir is a 4 MiB tmpfs with few inodes, always unmounted."""
    tq = make_trainq()
    with open(os.path.join(tq.state_dir, "config.toml")) as f:
        config = f.read()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4M,nr_inodes=64,mode=0700", "tmpfs",
                    tq.state_dir], check=True)
    try:
        with open(os.path.join(tq.state_dir, "config.toml"), "w") as f:
            f.write(config)
        yield tq
    finally:
        try:
            tq.cleanup()  # the daemon and the jobs first: they hold files on the tmpfs
        finally:
            subprocess.run(["umount", "--lazy", tq.state_dir], check=True)


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except FileNotFoundError:
        return []  # gone: no children either


def write_filler(path, size):
    with open(path, "wb") as f:
        f.write(b"\0" * size)


@pytest.mark.parametrize("restart", [False, True])
def test_a_job_that_fills_the_disk_keeps_its_exit_code(small_disk, restart):
    tq = small_disk
    tq.start_daemon()
    filler = os.path.join(tq.state_dir, "filler")
    write_filler(filler, 1 * MIB)
    done = tq.path("done")  # outside the full disk
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", f"head -c 8M /dev/zero; touch {done}"])
    wait_for(lambda: os.path.exists(done), what="the job to fill the disk and end")
    job = tq.show(job_id)
    # exit.json cannot be written: the shim must wait for space, alive and cancellable.
    assert job["state"] in ("starting", "running"), job
    shim = read_json(os.path.join(tq.run_dir(job_id), "shim.json"))["pid"]
    wait_for(lambda: not children(shim), what="the job's processes to end")
    time.sleep(0.5)  # what the shim does next takes it milliseconds: it tries exit.json
    assert not process_gone(shim), "the shim must wait for space, not give up"
    assert not os.path.exists(os.path.join(tq.run_dir(job_id), "exit.json"))
    # The database cannot grow either: a submit is refused, saying where space is missing.
    refused = tq.run("submit", "--gpus", "0", "--", "true", check=False)
    assert refused.returncode == 1, refused
    assert f"disk full in {tq.state_dir}" in refused.stderr, refused.stderr
    if restart:
        tq.kill_daemon()
    else:
        tq.run("cancel", str(job_id))  # reaches the live shim; the command had ended already
    assert not process_gone(shim)
    os.remove(filler)
    if restart:
        tq.start_daemon()
    job = tq.wait_state(job_id, "succeeded", timeout=30)
    assert job["attempts"][0]["exit_code"] == 0


def test_a_job_submitted_while_the_disk_is_full_starts_once_space_is_freed(small_disk):
    tq = small_disk
    tq.start_daemon()
    pile = os.path.join(tq.state_dir, "pile")
    os.mkdir(pile)
    for i in range(1000):  # every inode: no run dir can be made; the database still grows
        try:
            open(os.path.join(pile, str(i)), "w").close()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            break
    else:
        pytest.fail("the tmpfs has more inodes than nr_inodes says")
    job_id = tq.submit("--gpus", "0", cmd=["true"])

    def waiting_on_disk():
        job = tq.show(job_id)
        return job if "disk full" in job["reason"] else None

    job = wait_for(waiting_on_disk, timeout=10, what="a reason naming the full disk")
    assert job["state"] == "queued"
    assert f"disk full in {tq.state_dir}" in job["reason"], job["reason"]
    shutil.rmtree(pile)
    tq.wait_state(job_id, "succeeded", timeout=30)
