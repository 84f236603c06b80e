"""What a container costs a job's start: `trainq run` of a command that touches a file and
exits, on the host and in a container (podman, an image of busybox-static made here, no registry; then the
same image from a `podman save` archive), median and best of ROUNDS each, in one run on one
machine; run as root, also on a shared daemon for a local user (rootless podman as that user).
Real trainq and trainqd, no GPU. "submit to command" is from just before `trainq run` to the
file's mtime, written by the command's first act (the host's clock in both: the directory is
mounted). Usage: container_start.py BUILD/trainq [ROUNDS]"""
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROUNDS = 10
# What this machine's kind needs (docs/containers.md, "Settings").
RUNTIME_ARGS = '["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]'


def make_image(work):
    rootfs = os.path.join(work, "rootfs")
    os.makedirs(os.path.join(rootfs, "bin"))
    shutil.copy(shutil.which("busybox"), os.path.join(rootfs, "bin", "busybox"))
    for tool in ("sh", "true", "touch"):
        os.symlink("busybox", os.path.join(rootfs, "bin", tool))
    tar = os.path.join(work, "rootfs.tar")
    subprocess.run(["tar", "-C", rootfs, "-cf", tar, "."], check=True)
    name = f"localhost/trainq-bench:{uuid.uuid4().hex[:8]}"
    subprocess.run(["podman", "import", tar, name], check=True, capture_output=True)
    archive = os.path.join(work, "image.tar")
    subprocess.run(["podman", "save", "-o", archive, name], check=True, capture_output=True)
    return name, archive


def iso_ms(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def timed_run(trainq, env, cwd, *opts, **as_user):
    """The wall time of `trainq run` (what the user waits, in the CLI's polling steps), the
    attempt's own time from its start to its end, from submit to its end, and from submit to
    the command running."""
    marker = os.path.join(cwd, f"started-{uuid.uuid4().hex[:8]}")
    submitted = time.time()
    start = time.monotonic()
    p = subprocess.run([trainq, "run", "--gpus", "0", *opts, "--", "touch",
                        os.path.basename(marker)], env=env, cwd=cwd,
                       check=True, capture_output=True, text=True, **as_user)
    wall = (time.monotonic() - start) * 1000
    ran = (os.stat(marker).st_mtime - submitted) * 1000
    os.unlink(marker)
    job = p.stderr.split("job ")[1].split()[0]
    shown = json.loads(subprocess.run([trainq, "show", job, "--json"], env=env, check=True,
                                      capture_output=True, text=True, **as_user).stdout)
    a = shown["attempts"][-1]
    return wall, iso_ms(a["ended_at"]) - iso_ms(a["started_at"]), \
        iso_ms(a["ended_at"]) - iso_ms(shown["submitted_at"]), ran


def row(label, runs):
    """label, then the medians of the wall time, submit to end and submit to command; the
    attempt's median and best."""
    return (label, statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            min(r[1] for r in runs), statistics.median(r[2] for r in runs),
            statistics.median(r[3] for r in runs))


def shared_rows(trainq, archive, work, rounds):
    """The same on a shared daemon (trainqd --shared, as root): a user's host job, and their
    container job, which runs with rootless podman as that user (docs/containers.md)."""
    user = f"tqbench{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "-m", "-U", "-s", "/bin/sh", user], check=True)
    daemon = None
    try:
        import pwd
        pw = pwd.getpwnam(user)
        state, sock = os.path.join(work, "shared-state"), os.path.join(work, "shared.sock")
        os.makedirs(state, mode=0o700)
        with open(os.path.join(state, "config.toml"), "w") as f:
            f.write(f'container_runtime = "podman"\ncontainer_runtime_args = {RUNTIME_ARGS}\n'
                    'cpu_slots = 8\n')
        home_work = os.path.join(pw.pw_dir, "work")
        os.makedirs(home_work)
        mine = os.path.join(home_work, "image.tar")
        shutil.copy(archive, mine)
        for path in (home_work, mine):
            os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(work, 0o755)
        daemon = subprocess.Popen([os.path.join(os.path.dirname(trainq), "trainqd"), "--shared",
                                   "--state-dir", state, "--socket", sock],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        env = {"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "USER": user,
               "TRAINQ_SERVER": "unix:" + sock}

        def as_user(*opts):
            return timed_run(trainq, env, home_work, *opts, user=pw.pw_uid, group=pw.pw_gid)
        rows = []
        for label, opts in (("shared daemon: host", ()),
                            ("shared daemon: rootless podman as the user (archive)",
                             ("--image", mine))):
            as_user(*opts)
            runs = [as_user(*opts) for _ in range(rounds)]
            rows.append(row(label, runs))
        return rows
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=30)
        subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
        subprocess.run(["userdel", "-r", user], capture_output=True)


def main():
    trainq = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else ROUNDS
    work = tempfile.mkdtemp(prefix="tq-bench-ctr-", dir="/tmp")
    name = None
    try:
        name, archive = make_image(work)
        state = os.path.join(work, "state")
        os.makedirs(state)
        with open(os.path.join(state, "config.toml"), "w") as f:
            f.write(f'container_runtime = "podman"\ncontainer_runtime_args = {RUNTIME_ARGS}\n'
                    'cpu_slots = 8\n')
        env = dict(os.environ, TRAINQ_STATE_DIR=state)
        subprocess.run([trainq, "daemon", "start"], env=env, check=True, capture_output=True)
        rows = []
        for label, opts in (("host", ()), ("container (image in the store)", ("--image", name)),
                            ("container (from the archive)", ("--image", archive))):
            timed_run(trainq, env, work, *opts)  # warm: the first start loads what it needs
            runs = [timed_run(trainq, env, work, *opts) for _ in range(rounds)]
            rows.append(row(label, runs))
        subprocess.run([trainq, "daemon", "stop"], env=env, capture_output=True)
        if os.geteuid() == 0:
            rows += shared_rows(trainq, archive, work, rounds)
        podman = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout
        print(f"`trainq run --gpus 0 -- touch FILE`, {rounds} rounds each; machine: {os.cpu_count()} "
              f"cores; {podman.strip()}; trainq: {trainq}")
        print("| job | submit to command, median ms | over the host's | `trainq run`, median "
              "ms | submit to end, median ms | attempt start to end, median ms | best ms |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        host = rows[0][5]
        for label, wall, median, best, whole, ran in rows:
            if label.startswith("shared daemon: host"):
                host = ran  # the shared rows against the shared daemon's host job
            print(f"| {label} | {ran:.0f} | {ran - host:+.0f} ms | {wall:.0f} | {whole:.0f} | "
                  f"{median:.0f} | {best:.0f} |")
    finally:
        if name:
            subprocess.run(["podman", "rmi", "--force", name], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
