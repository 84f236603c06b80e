"""Limits changed while the daemon runs (`trainq config set`, docs/config.md): the setting
itself (set, get, show, the API, validation, persistence across stop and kill -9) and its
effect on placement (GPUs outside `devices` never used; a GPU holding `max_jobs_per_gpu`
trainq jobs takes no more)."""
import json
import os
import time

import pytest

from conftest import gpu


def assert_stays(tq, job_id, state, seconds=1.0):
    """The job keeps `state` while several samples (100 ms) and passes go by."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert tq.state(job_id) == state
        time.sleep(0.1)


def config(tq):
    return json.loads(tq.run("config", "show", "--json").stdout)


def option(tq, name):
    return next(o for o in config(tq)["options"] if o["name"] == name)


def get(tq, key):
    return tq.run("config", "get", key).stdout.strip()


def settings_file(tq):
    return os.path.join(tq.state_dir, "settings.json")


def gpus_of(job):
    return job["attempts"][-1]["gpu_indices"]


@pytest.fixture
def two(make_trainq):
    return make_trainq([gpu(0), gpu(1)])


# --- the setting itself: needs nothing from the placement policy ---

def test_set_get_and_show(two):
    assert get(two, "devices") == "all"
    assert get(two, "max-jobs-per-gpu") == "0"
    out = two.run("config", "set", "devices", "1,0").stdout
    assert "devices = 0,1 (was all)" in out
    assert get(two, "devices") == "0,1"
    two.run("config", "set", "max-jobs-per-gpu", "2")
    two.run("config", "set", "max_jobs_per_gpu", "3")  # the option's own name works too
    assert get(two, "max_jobs_per_gpu") == "3"

    doc = config(two)
    assert doc["devices"] == [0, 1] and doc["max_jobs_per_gpu"] == 3
    devices = option(two, "devices")
    assert devices["value"] == "0,1" and devices["source"] == "runtime" and devices["settable"]
    assert devices["file_value"] == "all"
    headroom = option(two, "headroom")
    assert headroom["source"] == "file" and not headroom["settable"]
    assert option(two, "aging_limit")["source"] == "default"
    table = two.run("config", "show").stdout
    assert any(line.split()[:3] == ["devices", "0,1", "runtime"] for line in table.splitlines())
    assert "settings.json" in table

    two.run("config", "set", "devices", "all")
    assert get(two, "devices") == "all"
    assert option(two, "devices")["source"] == "runtime"  # "all" overrides the file too
    two.run("config", "unset", "devices")
    assert option(two, "devices")["source"] == "default"
    assert json.load(open(settings_file(two))) == {"max_jobs_per_gpu": 3}


def test_the_api_sets_and_shows(two):
    two.start_daemon()
    answer = two.api("PUT", "/v1/config", {"devices": [1], "max-jobs-per-gpu": 2})
    assert answer.status == 200, answer.body
    assert answer.body["devices"] == [1] and answer.body["max_jobs_per_gpu"] == 2
    answer = two.api("POST", "/v1/config", {"devices": "all"})
    assert answer.status == 200, answer.body
    answer = two.api("GET", "/v1/config")
    assert answer.status == 200 and answer.body["devices"] == [] and answer.body["max_jobs_per_gpu"] == 2
    answer = two.api("PUT", "/v1/config", {"max_jobs_per_gpu": None})
    assert answer.status == 200 and answer.body["max_jobs_per_gpu"] == 0


BAD = [
    (["devices", "0,x"], "devices: '0,x' is not a GPU list; use GPU indices separated by commas, like 0,1,3, or all"),
    (["devices", "5"], "devices: this node has no GPU 5; its GPUs are 0,1"),
    (["max-jobs-per-gpu", "two"], "max_jobs_per_gpu: 'two' is not a job count; use a whole number from 0"),
    (["max-jobs-per-gpu", "1.5"], "max_jobs_per_gpu: '1.5' is not a job count"),
    (["headroom", "1GiB"], "headroom cannot change while the daemon runs; set it in the config file and restart"),
    (["colour", "blue"], "unknown setting 'colour'; the settings that change at run time are cpu_slots, placement, devices, paused, paused_gpus, max_jobs_per_gpu"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_exit_2_and_change_nothing(two, args, message):
    two.run("config", "set", "devices", "1")
    before = open(settings_file(two)).read()
    proc = two.run("config", "set", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert get(two, "devices") == "1"
    assert get(two, "max-jobs-per-gpu") == "0"
    assert open(settings_file(two)).read() == before


def test_bad_api_requests_are_400_and_change_nothing(two):
    two.start_daemon()
    for body in ({"devices": [0], "max_jobs_per_gpu": -1}, {"devices": [0], "nodes": 2},
                 {"devices": [0, 9]}, {"devices": True}, [], b"not json", {}):
        answer = two.api("PUT", "/v1/config", body)
        assert answer.status == 400, (body, answer.body)
        assert answer.error_code == "invalid"
        assert "devices" in answer.body["error"]["message"] or "max_jobs_per_gpu" in answer.body["error"]["message"]
    assert not os.path.exists(settings_file(two))
    assert two.api("GET", "/v1/config").body["devices"] == []
    assert get(two, "devices") == "all"


def test_get_of_an_unknown_option_exits_2(two):
    proc = two.run("config", "get", "colour", check=False)
    assert proc.returncode == 2
    assert "unknown config option 'colour'" in proc.stderr


def test_settings_survive_stop_and_kill_and_override_the_file(make_trainq):
    tq = make_trainq([gpu(0), gpu(1), gpu(2)], devices="0,1", max_jobs_per_gpu=4)
    assert get(tq, "devices") == "0,1" and option(tq, "devices")["source"] == "file"
    tq.run("config", "set", "devices", "2")
    tq.run("config", "set", "max-jobs-per-gpu", "1")
    first = tq.daemon_pid()

    tq.run("daemon", "stop")
    assert tq.daemon_pid() is None
    assert get(tq, "devices") == "2"  # a new daemon, started by this command
    assert tq.daemon_pid() != first
    assert get(tq, "max-jobs-per-gpu") == "1"
    devices = option(tq, "devices")
    assert devices["source"] == "runtime" and devices["file_value"] == "0,1"
    assert "run-time settings from" in tq.daemon_log()

    tq.run("config", "set", "devices", "0")
    tq.kill_daemon()  # kill -9 right after the answer: the file was already synced
    assert get(tq, "devices") == "0"
    assert get(tq, "max-jobs-per-gpu") == "1"

    tq.run("config", "unset", "devices")
    tq.run("daemon", "stop")
    assert get(tq, "devices") == "0,1"  # back to the file's value, and it stays so


def test_a_malformed_settings_file_stops_the_daemon_naming_it(two):
    with open(settings_file(two), "w") as f:
        f.write('{"devices": "zero"}')
    proc = two.run("daemon", "--foreground", check=False)
    assert proc.returncode == 2
    assert "settings.json: devices: 'zero' is not a GPU list" in proc.stderr
    assert "fix or remove it" in proc.stderr


# --- the effect on placement: implemented by the placement policy (src/core/placement.cc) ---

def test_devices_keeps_new_jobs_on_the_listed_gpus(two):
    done = two.path("done")
    two.run("config", "set", "devices", "0")
    a = two.submit(cmd=two.fake_job("--wait-file", done))  # a whole GPU
    assert gpus_of(two.wait_state(a, "running")) == [0]
    b = two.submit(cmd=two.fake_job("--wait-file", done))
    assert_stays(two, b, "queued")  # GPU 1 is free but not allowed
    assert two.show(b)["reason"]

    two.run("config", "set", "devices", "all")  # takes effect at once: a pass runs
    assert gpus_of(two.wait_state(b, "running")) == [1]
    open(done, "w").close()
    two.wait_state(a, "succeeded")
    two.wait_state(b, "succeeded")


def test_devices_change_never_stops_a_running_job(two):
    done = two.path("done")
    two.run("config", "set", "devices", "1")
    a = two.submit(cmd=two.fake_job("--wait-file", done))
    assert gpus_of(two.wait_state(a, "running")) == [1]
    two.run("config", "set", "devices", "0")
    b = two.submit(cmd=two.fake_job("--wait-file", done))
    assert gpus_of(two.wait_state(b, "running")) == [0]
    assert two.state(a) == "running"
    open(done, "w").close()
    two.wait_state(a, "succeeded")


def test_max_jobs_per_gpu_makes_a_second_small_job_wait(make_trainq):
    tq = make_trainq([gpu(0)])
    done = tq.path("done")
    tq.run("config", "set", "max-jobs-per-gpu", "1")
    a = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--wait-file", done))
    tq.wait_state(a, "running")
    b = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--wait-file", done))
    assert_stays(tq, b, "queued")  # 70 GiB usable, but the GPU holds its one job
    assert tq.show(b)["reason"]

    tq.run("config", "set", "max-jobs-per-gpu", "2")
    tq.wait_state(b, "running")
    open(done, "w").close()
    tq.wait_state(a, "succeeded")
    tq.wait_state(b, "succeeded")


def test_limits_set_before_a_restart_still_apply_after_it(two):
    done = two.path("done")
    two.run("config", "set", "devices", "1")
    two.kill_daemon()
    a = two.submit(cmd=two.fake_job("--wait-file", done))  # starts a fresh daemon
    assert gpus_of(two.wait_state(a, "running")) == [1]
    open(done, "w").close()
    two.wait_state(a, "succeeded")
