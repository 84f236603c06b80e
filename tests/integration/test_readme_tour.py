"""README.md's tour, run as written on two simulated 80 GB GPUs: each `$ trainq ...` line is
run, and what the README shows after it must be what trainq prints, but for the columns that
differ on every machine (USER, SUBMITTED), peak memory and the `gpus` table's last line (the
node's name and where its GPUs come from). The README cannot drift from the
code again. Where PyTorch is installed the tour's torchrun is the real one, and its job
runs to the end once the GPUs are free."""
import os
import re
import shutil
import stat
import subprocess
import sys
import time

from conftest import FAKE_TRAIN, gpu

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.normpath(os.path.join(HERE, "..", "..", "README.md"))
VARYING = {"USER", "SUBMITTED"}


def tour():
    """The tour's commands, each with the lines the README shows after it."""
    text = open(README).read()
    block = text.split("## A tour", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    steps = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def cells(lines):
    """A table as rows of {column: text}, cut where the header's words start."""
    header = lines[0]
    names = header.split()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, name in enumerate(names):
            end = starts[i + 1] if i + 1 < len(names) else None
            row[name] = line[starts[i]:end].strip()
        rows.append(row)
    return rows


def normalised(lines):
    lines = [line for line in lines if not line.startswith("node ")]
    if not lines or not lines[0].startswith(("ID ", "GPU ")):
        return lines
    rows = []
    for row in cells(lines):
        for name in VARYING & row.keys():
            row[name] = "*"
        # How long a job has run and its peak vary; the shape of the line does not.
        row["INFO"] = re.sub(r"^running \S+, peak .*", "running *, peak *", row.get("INFO", ""))
        rows.append(row)
    return rows


def real_torchrun():
    """The installed torchrun when its PyTorch imports (it prints its help), else None."""
    path = shutil.which("torchrun")
    if path is None:
        return None
    try:
        ran = subprocess.run([path, "--help"], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    return path if ran.returncode == 0 else None


# What the tour's train.py does under the real torchrun: each worker says who it is.
TRAIN_PY = """import os, sys
# One write of the whole line: the two workers share the log, and print() writes its
# words and the newline separately, so their lines could interleave.
sys.stdout.write(f"worker {os.environ['RANK']} of {os.environ['WORLD_SIZE']}\\n")
sys.stdout.flush()
"""


def stand_ins(tq, torchrun_too):
    """`python` (and `torchrun` where the real one is missing) stand in for training and
    run until cancelled; `python` holds 18.2 GiB of its simulated GPU, as train.py would."""
    bin_dir = tq.path("bin")
    os.makedirs(bin_dir)
    scripts = {
        "python": f'exec {sys.executable} {FAKE_TRAIN} --usage-dir {tq.usage_dir} '
                  '--mem-gib 18.2 --duration 600\n',
    }
    if torchrun_too:
        scripts["torchrun"] = "exec sleep 600\n"
    for name, body in scripts.items():
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return bin_dir


def settled(tq, words, shown, timeout=15.0):
    """What `trainq WORDS` prints once it shows what the README does (a job just started
    has not allocated its memory at once), or its last output after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        printed = tq.run(*words).stdout.splitlines()
        if normalised(printed) == normalised(shown) or time.monotonic() > deadline:
            return printed
        time.sleep(0.2)


def test_the_readme_tour_prints_what_the_readme_shows(make_trainq):
    a100 = {"name": "NVIDIA A100-SXM4-80GB"}
    tq = make_trainq(gpus=[gpu(0, **a100), gpu(1, **a100)])
    torchrun = real_torchrun()
    stand_ins(tq, torchrun_too=torchrun is None)
    with open(tq.path("train.py"), "w") as f:
        f.write(TRAIN_PY)
    tq.env["PATH"] = tq.path("bin") + os.pathsep + tq.env["PATH"]
    steps = tour()
    assert len(steps) >= 8, steps
    for command, shown in steps:
        words = command.split("#", 1)[0].split()
        assert words[0] == "trainq", command
        if words[1:3] == ["logs", "-f"]:
            words.remove("-f")  # the job runs on: followed, it would never end
        r = tq.run(*words[1:])
        printed = r.stdout.splitlines()
        if not shown:
            continue
        if words[1] in ("ls", "gpus"):
            printed = settled(tq, words[1:], shown)
        assert normalised(printed) == normalised(shown), (command, r.stdout)
    if torchrun is not None:
        # The tour's two-GPU job, queued again by its last step, starts once the GPUs are
        # free, and the real torchrun runs it as the README wrote it.
        tq.run("cancel", "1", "2")
        job = tq.wait_state(3, ("succeeded", "failed"), timeout=120)
        log = tq.run("logs", "3").stdout
        assert job["state"] == "succeeded", log
        assert "worker 0 of 2" in log and "worker 1 of 2" in log, log
    tq.run("cancel", "--all-mine", check=False)
