"""--json on every command that prints data (README): the test walks `trainq --help` down to
every command, and each one whose help offers --json is run with it and must print JSON."""
import json
import os
import re
import subprocess

from conftest import free_port, gpu, trainq_binary


def subcommands(tq, path):
    """The commands `trainq PATH --help` lists under "Subcommands:"."""
    text = tq.run(*path, "--help", check=False).stdout
    if "Subcommands:" not in text:
        return []
    names = []
    for line in text.split("Subcommands:", 1)[1].splitlines():
        m = re.match(r"^  (\S+?)(?:,.*?)?\s{2,}", line)
        if m:
            names.append(m.group(1))
    return names


def every_command(tq, path=()):
    out = []
    for name in subcommands(tq, path):
        sub = (*path, name)
        out.append(sub)
        out.extend(every_command(tq, sub))
    return out


def test_every_command_that_prints_data_prints_json_with_json(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)], listen=[f"127.0.0.1:{free_port()}"])
    done = tq.submit("--gpus", "0", "--name", "first", cmd=["sh", "-c", "echo hello"])
    tq.wait_state(done, "succeeded", timeout=30)
    other = tq.submit("--gpus", "0", cmd=["sh", "-c", "echo other"])
    tq.wait_state(other, "succeeded", timeout=30)
    failed = tq.submit("--gpus", "0", "--retries", "0", cmd=["sh", "-c", "exit 3"])
    tq.wait_state(failed, "failed", timeout=30)
    blocker = tq.submit("--gpus", "0", cmd=["sleep", "300"])
    tq.wait_state(blocker, "running")  # `requeue --json` stops it and queues it again
    waiting = tq.submit("--gpus", "1", "--after", str(blocker), cmd=["true"])
    edited = tq.submit("--gpus", "1", "--after", str(blocker), cmd=["true"])
    trace = os.path.join(tq.work, "trace.csv")
    with open(trace, "w") as f:
        f.write("job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user\n"
                "1,0,10,1,1,10,ada\n2,5,10,1,0.5,8,bob\n")
    # The arguments each command with --json is run with here. A command that takes --json
    # and is missing from this table fails the test: it must be added, and checked.
    args = {
        ("submit",): ["--gpus", "0", "--", "true"],
        ("wait",): [str(done)],
        ("diff",): [str(done), str(other)],
        ("ls",): ["--all"],
        ("show",): [str(done)],
        ("explain",): [str(waiting)],
        ("acct",): ["--since", "1d"],
        ("logs",): [str(done)],
        ("cancel",): [str(waiting)],
        ("retry",): [str(failed)],
        ("requeue",): [str(blocker)],
        ("update",): [str(edited), "--priority", "3"],
        ("hold",): [str(edited)],
        ("release",): [str(edited)],
        ("pause",): [],
        ("resume",): [],
        ("clean",): ["--state", "succeeded"],
        ("gpus",): [],
        ("daemon", "status"): [],
        ("config", "show"): [],
        ("config", "get"): ["cpu_slots"],
        ("token", "create"): ["walker", "--role", "read"],
        ("token", "ls"): [],
        ("nodes",): [],
        ("dashboard",): ["--no-open"],
        ("sim", "replay"): ["--trace", trace, "--nodes", "1x2:16GiB"],
        ("sim", "placement"): ["--trace", trace, "--nodes", "1x2:16GiB", "--seeds", "1"],
    }
    with_json, checked = [], []
    for path in every_command(tq):
        # sbatch hands its words to the script's parser: its help is sbatch's own.
        help_text = tq.run(*path, "--help", check=False).stdout
        if "Subcommands:" in help_text or "--json" not in help_text:
            continue
        with_json.append(path)
        assert path in args, f"trainq {' '.join(path)} takes --json: add it to this test"
        p = tq.run(*path, "--json", *args[path], check=False)
        assert p.returncode == 0, (path, p.stdout, p.stderr)
        try:
            json.loads(p.stdout)
        except ValueError:
            raise AssertionError(f"trainq {' '.join(path)} --json printed no JSON: {p.stdout!r}"
                                 f"\nstderr: {p.stderr}")
        checked.append(path)
    # The commands the issue named are among them.
    for must in (("diff",), ("cancel",), ("retry",), ("wait",), ("logs",), ("pause",),
                 ("clean",)):
        assert must in checked, must
    assert set(args) == set(with_json), set(args) ^ set(with_json)
    tq.run("cancel", str(blocker))


def test_what_the_json_of_action_commands_holds(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    job = tq.submit("--gpus", "0", cmd=["sh", "-c", "echo one; echo two; echo three"])
    tq.wait_state(job, "succeeded", timeout=30)
    logs = json.loads(tq.run("logs", "--json", "-n", "2", str(job)).stdout)
    assert logs["job"] == job and logs["attempt"] == 1 and logs["text"] == "two\nthree\n"
    p = tq.run("logs", "--json", "-f", str(job), check=False)
    assert p.returncode == 2 and "--json and --follow" in p.stderr
    waited = json.loads(tq.run("wait", "--json", str(job)).stdout)
    assert waited == {"jobs": [{"id": job, "state": "succeeded", "exit_code": 0}],
                      "exit_code": 0}
    sleeper = tq.submit("--gpus", "0", cmd=["sleep", "300"])
    results = json.loads(tq.run("cancel", "--json", str(sleeper), str(job), check=False).stdout)
    by_id = {r["id"]: r for r in results["results"]}
    assert "message" in by_id[sleeper]
    assert by_id[job]["error"]["code"] == "conflict"
    paused = json.loads(tq.run("pause", "--json", "--gpus", "0").stdout)
    assert paused["paused_gpus"] == [0] and paused["paused"] is False
    tq.run("resume")
    tq.wait_state(sleeper, "cancelled", timeout=30)
    cleaned = json.loads(tq.run("clean", "--json").stdout)
    assert sorted(cleaned["ids"]) == sorted([job, sleeper]), cleaned
    assert subprocess.run([trainq_binary(), "--version"], capture_output=True).returncode == 0
