"""What `trainq submit --snapshot` costs the user: the whole submit (the copy included) of a
work tree of 10,000 files, first into an empty snapshot store, then again with nothing changed,
then after one file changed, beside the same submit without a snapshot; bytes stored each time.
Real trainq and trainqd, a personal daemon, simulated GPUs. Usage: snapshot.py BUILD/trainq [FILES]

The tree is shaped like a research repository: many small source and config files (0.5-8 KiB),
some larger assets (64-512 KiB), a few duplicated files (vendored copies), in nested packages.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

FILES = 10000
ROUNDS = 3


def make_tree(root, files, rng):
    os.makedirs(root)
    total = 0
    shared = rng.randbytes(4096)
    for i in range(files):
        package = f"pkg{i % 40}/mod{(i // 40) % 25}"
        os.makedirs(os.path.join(root, package), exist_ok=True)
        if i % 50 == 0:
            data = shared  # the same file in several places
        elif i % 97 == 0:
            data = rng.randbytes(rng.randint(64 << 10, 512 << 10))
        else:
            data = rng.randbytes(rng.randint(512, 8 << 10))
        with open(os.path.join(root, package, f"f{i}.py"), "wb") as f:
            f.write(data)
        total += len(data)
    git = ["git", "-C", root, "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", "init", "-q", root], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "tree"], check=True)
    return total


def du(path):
    total = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            st = os.lstat(os.path.join(dirpath, n))
            total += st.st_size
    return total


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


def timed_submit(trainq, env, cwd, *opts):
    start = time.monotonic()
    proc = subprocess.run([trainq, "submit", "--gpus", "0", *opts, "--", "true"], env=env,
                          cwd=cwd, capture_output=True, text=True, check=True)
    return time.monotonic() - start, proc.stderr.strip()


def main():
    trainq = os.path.abspath(sys.argv[1])
    files = int(sys.argv[2]) if len(sys.argv) > 2 else FILES
    work = tempfile.mkdtemp(prefix="tq-bench-snap-", dir="/tmp")
    try:
        rng = random.Random(7)
        tree = os.path.join(work, "repo")
        size = make_tree(tree, files, rng)
        state = os.path.join(work, "state")
        os.makedirs(state)
        with open(os.path.join(state, "config.toml"), "w") as f:
            f.write('snapshot_max_size = "1GiB"\ncpu_slots = 64\n')
        env = dict(os.environ, TRAINQ_STATE_DIR=state)
        subprocess.run([trainq, "daemon", "start"], env=env, check=True, capture_output=True)
        objects = os.path.join(state, "snapshots", "objects")
        rows = []
        plain = min(timed_submit(trainq, env, tree, "--no-snapshot")[0] for _ in range(ROUNDS))
        rows.append(("submit without --snapshot", plain, 0, ""))
        t, said = timed_submit(trainq, env, tree, "--snapshot")
        rows.append(("first snapshot (empty store)", t, du(objects), said))
        before = du(objects)
        seconds = []
        for _ in range(ROUNDS):
            t, said = timed_submit(trainq, env, tree, "--snapshot")
            seconds.append(t)
        rows.append(("same tree again (best of 3)", min(seconds), du(objects) - before, said))
        with open(os.path.join(tree, "pkg1/mod0/f1.py"), "ab") as f:  # a tracked file
            f.write(b"# one edit\n")
        before = du(objects)
        t, said = timed_submit(trainq, env, tree, "--snapshot")
        rows.append(("after one file changed", t, du(objects) - before, said))
        subprocess.run([trainq, "daemon", "stop"], env=env, capture_output=True)
        print(f"tree: {files} files, {size / 2**20:.1f} MiB, in git; "
              f"machine: {os.cpu_count()} cores; trainq: {trainq}")
        print("| submit | seconds | bytes stored anew |")
        print("| --- | --- | --- |")
        for name, t, stored, _ in rows:
            print(f"| {name} | {t:.2f} | {human(stored)} |")
        for name, _, _, said in rows:
            if said:
                print(f"{name}: {said}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
