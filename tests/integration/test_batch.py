"""`submit --from FILE` (one request, one transaction), `ls --limit` and `daemon status`."""
import json
import os


def write(tq, name, text):
    path = os.path.join(tq.work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_from_file_queues_every_line_in_order_with_defaults(tq):
    path = write(tq, "jobs.txt", "\n".join([
        "# a sweep",
        "echo 'lr 1e-4' $HOME",
        "",
        '{"command": ["echo", "json"], "name": "from-json", "priority": 5}',
        "   echo \"quoted \\\"word\\\"\"",
    ]) + "\n")
    out = tq.run("submit", "--from", path, "--gpus", "0", "--name", "sweep").stdout.split()
    ids = [int(x) for x in out]
    assert ids == [1, 2, 3]
    jobs = [tq.show(i) for i in ids]
    assert jobs[0]["command"] == ["echo", "lr 1e-4", "$HOME"]  # quoted, never expanded
    # One --name for several jobs is numbered in file order; a JSON line's own name stands.
    assert jobs[0]["name"] == "sweep-1" and jobs[0]["gpus"] == 0
    assert jobs[2]["name"] == "sweep-3"
    assert jobs[1]["command"] == ["echo", "json"]
    assert (jobs[1]["name"], jobs[1]["priority"], jobs[1]["gpus"]) == ("from-json", 5, 0)
    assert jobs[2]["command"] == ["echo", 'quoted "word"']
    for i in ids:
        assert tq.wait_state(i, "succeeded")["cwd"] == tq.work


def test_one_bad_line_stores_nothing(tq):
    tq.submit("--gpus", "0", cmd=["true"])  # id 1
    for text, needle in [
        ("true\n{\"command\": [\"true\"], \"mem\": \"20XB\", \"gpus\": 1}\n", "jobs.txt line 2: --mem"),
        ("true\necho 'unterminated\n", "jobs.txt line 2"),
        ("true\n{not json\n", "jobs.txt line 2"),
        ("# only a comment\n", "no jobs"),
    ]:
        path = write(tq, "jobs.txt", text)
        r = tq.run("submit", "--from", path, "--gpus", "0", check=False)
        assert r.returncode == 2, (text, r.stderr)
        assert needle in r.stderr and r.stderr.count("\n") == 1, (text, r.stderr)
    assert [j["id"] for j in tq.ls("--all")] == [1]
    assert tq.submit("--gpus", "0", cmd=["true"]) == 2  # nothing was stored in between


def test_from_file_and_a_command_are_refused_together(tq):
    path = write(tq, "jobs.txt", "true\n")
    r = tq.run("submit", "--from", path, "--gpus", "0", "--", "true", check=False)
    assert r.returncode == 2 and "--from" in r.stderr
    r = tq.run("submit", "--from", os.path.join(tq.work, "absent.txt"), check=False)
    assert r.returncode == 2 and "absent.txt" in r.stderr


def test_ls_limit_pages_oldest_first(tq):
    path = write(tq, "jobs.txt", "sleep 30\n" * 5)
    tq.run("submit", "--from", path, "--gpus", "0", "--cpus", "16")
    jobs = tq.ls("--limit", "2")
    assert [j["id"] for j in jobs] == [1, 2]
    assert tq.run("ls", "--limit", "-1", check=False).returncode == 2
    tq.run("cancel", "1", "2", "3", "4", "5")


def test_daemon_status_reports_pid_and_absence(tq):
    tq.start_daemon()
    st = json.loads(tq.run("daemon", "status", "--json").stdout)
    assert st["running"] is True and st["pid"] == tq.daemon_pid()
    assert st["state_dir"] == tq.state_dir
    assert "trainq daemon pid" in tq.run("daemon", "status").stdout
    assert tq.run("daemon", "status").returncode == 0
    tq.run("daemon", "stop")
    # None answers: exit 3, as an init script's `status` says "not running".
    r = tq.run("daemon", "status", "--json", check=False)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["running"] is False
    r = tq.run("daemon", "status", check=False)
    assert r.returncode == 3 and r.stdout.startswith("no trainq daemon runs"), r.stdout
    assert tq.daemon_pid() is None  # status does not start a daemon


def test_node_options_reach_the_job_and_are_batch_defaults(tq):
    """--node (repeatable, comma lists), --exclude-node and --nodes are stored and shown; with
    --from they are every line's defaults, and a JSON line may override them."""
    one = tq.submit("--gpus", "0", "--node", "gpu1,gpu2", "--node", "gpu3",
                    "--exclude-node", "gpu9", cmd=["true"])
    job = tq.show(one)
    assert (job["nodes"], job["exclude_nodes"], job["num_nodes"]) == (
        ["gpu1", "gpu2", "gpu3"], ["gpu9"], 1)
    plain = tq.show(tq.submit("--gpus", "0", cmd=["true"]))
    assert (plain["nodes"], plain["exclude_nodes"], plain["num_nodes"]) == ([], [], 1)
    path = write(tq, "jobs.txt", 'true\n{"command": ["true"], "nodes": ["b"]}\n')
    ids = [int(x) for x in tq.run("submit", "--from", path, "--gpus", "0",
                                  "--node", "a").stdout.split()]
    assert [tq.show(i)["nodes"] for i in ids] == [["a"], ["b"]]
    text = tq.run("show", str(one)).stdout
    assert "gpu1,gpu2,gpu3" in text and "gpu9" in text
