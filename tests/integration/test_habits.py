"""What people bring from pueue and task-spooler: pause and resume, clean, logs --tail, ls
ordering and its PRIORITY column, and cancel/retry of lists, ranges and filters."""
import os
import subprocess

from conftest import gpu, trainq_binary, wait_for


def states(tq):
    return {j["id"]: j["state"] for j in tq.ls("--all")}


def test_cancel_and_retry_take_lists_ranges_and_filters(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    tq.run("pause")  # everything stays queued
    names = ["a", "lr-1", "lr-2", "b", "c", "d", "e"]
    ids = [tq.submit("--gpus", "0", "--name", n, cmd=["true"]) for n in names]
    assert ids == list(range(1, 8))
    out = tq.run("cancel", "1,2", "4-5").stdout
    assert "job 1" in out and "job 5" in out
    assert [s for _, s in sorted(states(tq).items())] == [
        "cancelled", "cancelled", "queued", "cancelled", "cancelled", "queued", "queued"]
    # A filter picks the caller's own jobs that the command can act on.
    tq.run("cancel", "--name", "lr-*")
    assert states(tq)[3] == "cancelled"
    tq.run("retry", "1-3", "--name", "lr-*")  # both narrow: only 2 and 3
    assert (states(tq)[1], states(tq)[2], states(tq)[3]) == ("cancelled", "queued", "queued")
    tq.run("cancel", "--state", "queued", "--name", "lr-?")
    assert (states(tq)[2], states(tq)[3], states(tq)[6]) == ("cancelled", "cancelled", "queued")
    tq.run("cancel", "--all-mine")
    assert set(states(tq).values()) == {"cancelled"}
    r = tq.run("cancel", "--all-mine", check=False)
    assert r.returncode == 0 and "no job of yours matches; nothing to cancel" in r.stderr
    tq.run("retry", "--state", "cancelled")
    assert set(states(tq).values()) == {"queued"}
    for bad, said in [(["10-"], "'10-' is not a job id, list or range"),
                      (["5-3"], "'5-3' runs backwards"),
                      (["1-200000"], "spans more than 100000 ids"),
                      ([], "cancel: give job ids (ids like 12")]:
        r = tq.run("cancel", *bad, check=False)
        assert r.returncode == 2 and said in r.stderr, (bad, r.stderr)
    r = tq.run("cancel", "--state", "done", check=False)
    assert r.returncode == 2 and "--state: 'done' is not a state" in r.stderr
    assert set(states(tq).values()) == {"queued"}, "a refused command changed nothing"


def test_pause_and_resume_the_whole_queue_or_some_gpus(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)])
    go = tq.path("go")
    running = tq.submit("--gpus", "1", cmd=tq.fake_job("--wait-file", go))
    tq.wait_state(running, "running")
    assert "paused: no job starts" in tq.run("pause").stdout
    waiting = tq.submit("--gpus", "1", cmd=["true"])
    reason = wait_for(lambda: tq.show(waiting)["reason"], what="a reason")
    assert reason == "paused: no job starts until trainq resume (running jobs go on)"
    assert tq.state(running) == "running", "running jobs go on"
    assert "paused: no job starts until trainq resume" in tq.run("gpus").stdout
    # A pause is a setting: it outlasts a restart of the daemon.
    tq.run("daemon", "stop")
    assert tq.show(waiting)["state"] == "queued"
    assert tq.gpus()["paused"] is True
    tq.run("resume")
    tq.wait_state(waiting, "succeeded")
    # Pausing one GPU: jobs go to the other, and `gpus` marks it.
    free = [g for g in (0, 1) if g not in tq.show(running)["attempts"][0]["gpu_indices"]][0]
    tq.run("pause", "--gpus", str(free))
    blocked = tq.submit("--gpus", "1", cmd=["true"])
    reason = wait_for(lambda: tq.show(blocked)["reason"], what="a reason")
    assert f"GPU {free} paused" in reason, reason
    table = tq.run("gpus").stdout
    assert f"{free} (paused)" in table, table
    assert [g["closed"] for g in tq.gpus()["gpus"] if g["index"] == free] == ["paused"]
    tq.run("resume", "--gpus", str(free))
    tq.wait_state(blocked, "succeeded")
    # GPUs left out by `devices` are marked too.
    tq.run("config", "set", "devices", str(1 - free))
    assert f"{free} (not in devices)" in tq.run("gpus").stdout
    r = tq.run("pause", "--gpus", "one", check=False)
    assert r.returncode == 2 and "--gpus: 'one' is not a GPU list" in r.stderr
    open(go, "w").close()


def test_clean_forgets_ended_jobs_and_their_logs(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    ok = [tq.submit("--gpus", "0", cmd=["echo", "hi"]) for _ in range(2)]
    bad = tq.submit("--gpus", "0", cmd=["false"])
    kept = tq.submit("--gpus", "0", cmd=["echo", "kept"])
    for job_id in ok + [kept]:
        tq.wait_state(job_id, "succeeded")
    tq.wait_state(bad, "failed")
    tq.run("pause")
    waiting = tq.submit("--gpus", "0", cmd=["true"])
    runs = os.path.join(tq.state_dir, "runs")
    assert tq.run("clean", "--before", "7d").stdout.strip() == "forgot 0 jobs and the logs of 0"
    assert tq.run("clean", "--state", "failed").stdout.strip() == "forgot 1 job and the logs of 1"
    assert not os.path.exists(os.path.join(runs, str(bad)))
    r = tq.run("show", str(bad), check=False)
    assert r.returncode == 3
    assert tq.run("clean", "--state", "running", check=False).returncode == 2
    out = tq.run("clean", "--keep-logs").stdout.strip()
    assert out == "forgot 3 jobs (their logs kept)"
    assert os.path.exists(os.path.join(runs, str(kept)))
    assert [j["id"] for j in tq.ls("--all")] == [waiting], "a job not ended stays"
    tq.run("resume")
    assert tq.submit("--gpus", "0", cmd=["true"]) == waiting + 1, "ids are never given again"


def test_logs_tail_and_ls_ordering_with_priorities(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    job_id = tq.submit("--gpus", "0", cmd=["seq", "1", "100"])
    tq.wait_state(job_id, "succeeded")
    assert tq.run("logs", str(job_id), "--tail", "3").stdout == "98\n99\n100\n"
    assert tq.run("logs", str(job_id), "-n", "0").stdout == ""
    tq.run("pause")
    low = tq.submit("--gpus", "0", "--priority", "-5", cmd=["true"])
    high = tq.submit("--gpus", "0", "--priority", "7", cmd=["true"])
    ids = [j["id"] for j in tq.ls("--all", "--newest", "--limit", "2")]
    assert ids == [high, low]
    assert [j["id"] for j in tq.ls("--all", "--newest", "--limit", "2", "--reverse")] == [low, high]
    # The newest are the newest whatever their state, done ones too (as pueue's status).
    assert [j["id"] for j in tq.ls("--newest", "--limit", "3")] == [high, low, job_id]
    assert [j["id"] for j in tq.ls("--all", "--reverse")] == [high, low, job_id]
    lines = tq.run("ls").stdout.splitlines()
    header = lines[0].split()
    assert header[:4] == ["ID", "NAME", "STATE", "PRIORITY"]
    assert [line.split()[3] for line in lines[1:]] == ["-5", "7"]


def test_ls_shows_a_page_of_a_long_queue_and_says_there_is_more(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    tq.run("pause")
    tq.run("submit", "--gpus", "0", "--array", "0-249", "--", "true")
    table = tq.run("ls")
    rows = table.stdout.splitlines()[1:]
    assert len(rows) == 200, table.stdout[-500:]
    assert rows[0].split()[0] == "1" and rows[-1].split()[0] == "200"
    assert "the 200 oldest shown; there are more: --limit N shows N, --limit 0 all" in \
        table.stderr, table.stderr
    assert len(tq.run("ls", "--limit", "0").stdout.splitlines()) == 251
    quiet = tq.run("ls", "--limit", "20")
    assert len(quiet.stdout.splitlines()) == 21 and quiet.stderr == ""
    assert len(tq.ls()) == 250                         # --json: every job, for scripts
    assert len(tq.run("ls", "-q").stdout.split()) == 250
    assert tq.run("ls", "--limit", "-1", check=False).returncode == 2
    # A queue that fits in a page says nothing more.
    tq.run("cancel", "--all-mine")
    tq.run("submit", "--gpus", "0", "--", "true")
    assert tq.run("ls").stderr == ""


def complete(tq, shell_line, words):
    """What bash's completion offers for `words` (the last one being typed)."""
    script = (f"{shell_line}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
              "_trainq; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "-c", script], env=tq.env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_shell_completion_of_commands_options_and_job_ids(make_trainq):
    tq = make_trainq(gpus=[gpu(0)])
    bin_dir = os.path.dirname(trainq_binary())
    tq.env["PATH"] = bin_dir + os.pathsep + tq.env["PATH"]
    source = f"source <({trainq_binary()} completion bash)"
    r = subprocess.run(["bash", "-c", source + "\ncomplete -p trainq"], env=tq.env,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "complete -o default -F _trainq trainq", r.stdout + r.stderr
    assert complete(tq, source, ["trainq", "su"]) == ["submit"]
    assert set(complete(tq, source, ["trainq", "c"])) == {"cancel", "clean", "completion",
                                                          "config"}
    assert "--gpus" in complete(tq, source, ["trainq", "submit", "--g"])
    assert complete(tq, source, ["trainq", "config", "se"]) == ["set"]
    # A global option's value is not taken for the command.
    assert complete(tq, source, ["trainq", "--state-dir", "/tmp/x", "subm"]) == ["submit"]
    assert complete(tq, source, ["trainq", "--state-dir", "/tmp/x", "logs", "--t"]) == ["--tail"]
    assert "--all-mine" in complete(tq, source, ["trainq", "cancel", "--a"])
    # Job ids come from the daemon.
    tq.run("pause")
    ids = [str(tq.submit("--gpus", "0", cmd=["true"])) for _ in range(3)]
    assert complete(tq, source, ["trainq", "cancel", ""]) == ids
    assert complete(tq, source, ["trainq", "logs", "2"]) == ["2"]
    # After an option that takes a value, no command words are offered.
    assert "submit" not in complete(tq, source, ["trainq", "submit", "--name", "s"])
    # zsh loads the same script through bashcompinit; fish gets its own.
    zsh = subprocess.run(["zsh", "-c", f"autoload -U compinit && compinit -u; "
                          f"source <({trainq_binary()} completion zsh) && echo ok"],
                         env=tq.env, capture_output=True, text=True, timeout=60)
    assert zsh.stdout.strip().endswith("ok"), zsh.stderr
    fish = subprocess.run(["fish", "-c", f"{trainq_binary()} completion fish | source; "
                           "complete -C 'trainq canc'"], env=tq.env, capture_output=True,
                          text=True, timeout=60)
    assert fish.stdout.startswith("cancel\t"), fish.stdout + fish.stderr
    fish = subprocess.run(["fish", "-c", f"{trainq_binary()} completion fish | source; "
                           "complete -C 'trainq cancel '"], env=tq.env, capture_output=True,
                          text=True, timeout=60)
    assert [line.split("\t")[0] for line in fish.stdout.splitlines()] == ids, fish.stdout
    r = tq.run("completion", "tcsh", check=False)
    assert r.returncode == 2 and "use bash, zsh or fish" in r.stderr


def test_the_man_pages_are_made_from_the_parsers_and_tables():
    man = os.path.join(os.path.dirname(trainq_binary()), "man")
    expected = {
        "trainq.1": ["trainq submit", "--gpus", "--mem", "trainq completion", "trainqd(8)",
                     "source <(trainq completion bash)"],
        "trainqd.8": ["--shared", "--check-config", "SIGTERM"],
        "trainq.toml.5": ["config.toml", "headroom", "trainq config set"],
    }
    for name, words in expected.items():
        page = os.path.join(man, name)
        assert open(page).read().startswith(".\\\" Made by trainq-man"), page
        r = subprocess.run(["man", "-l", page], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "80", "LC_ALL": "C"})
        assert r.returncode == 0 and r.stderr == "", (name, r.stderr)
        shown = " ".join(r.stdout.split())  # as one line: a phrase may wrap
        for word in words:
            assert word in shown, (name, word)
    trainqd = open(os.path.join(man, "trainqd.8")).read()  # the hidden `trainqd shim RUN_DIR`
    assert "run_dir" not in trainqd and "fBshim" not in trainqd


def test_daemon_stop_refuses_when_server_and_state_dir_name_two_daemons(make_trainq):
    a, b = make_trainq(), make_trainq()
    a.run("daemon", "start")
    b.run("daemon", "start")
    both = dict(a.env, TRAINQ_SERVER="unix:" + b.socket_path)
    stop = a.run("daemon", "stop", env=both, check=False)
    assert stop.returncode == 2, stop
    assert b.state_dir in stop.stderr and a.state_dir in stop.stderr, stop.stderr
    assert "unset TRAINQ_STATE_DIR" in stop.stderr, stop.stderr
    # Neither was stopped; status says which one answers.
    status = a.run("daemon", "status", env=both)
    assert f"serves the state dir {b.state_dir}, not {a.state_dir}" in status.stderr, status
    assert a.run("daemon", "status").returncode == 0
    # Where they agree, the stop goes ahead.
    same = dict(b.env, TRAINQ_SERVER="unix:" + b.socket_path)
    assert b.run("daemon", "stop", env=same).returncode == 0
