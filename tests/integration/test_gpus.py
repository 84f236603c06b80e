"""GPUs without a GPU: the simulated file, per-attempt peak memory, the
real NVML loader against the fake libnvidia-ml, and a machine without NVML."""
import os

import pytest

from conftest import GIB, MIB, gpu, read_json, wait_for


def test_simulated_file_changes_are_seen(make_trainq, foreign_process):
    tq = make_trainq([gpu(0)])
    doc = tq.gpus()
    assert doc["source"] == "simulated"
    assert [g["name"] for g in doc["gpus"]] == ["Simulated A100 80GB"]
    assert doc["gpus"][0]["memory_total"] == 80 * GIB

    tq.set_gpus([gpu(0, others="10GiB", utilization=55,
                     other_processes=[{"pid": foreign_process, "bytes": "2GiB"}]),
                 gpu(1, total="40GiB", name="Simulated A100 40GB")])

    def changed():
        d = tq.gpus()
        return d if len(d["gpus"]) == 2 else None

    doc = wait_for(changed, what="the daemon to see the new GPU file")
    g0, g1 = doc["gpus"]
    assert g0["memory_used"] == 12 * GIB
    assert g0["utilization"] == 55
    assert g0["other_processes"] == [{"pid": foreign_process, "used_bytes": 2 * GIB}]
    assert g1["name"] == "Simulated A100 40GB" and g1["memory_total"] == 40 * GIB
    assert g1["uuid"] == "GPU-sim-1"
    table = tq.run("gpus").stdout
    assert "Simulated A100 40GB" in table and f"pid {foreign_process}" in table


def test_peak_memory_is_recorded_from_usage_files(tq):
    job_id = tq.submit("--mem", "20GiB",
                       cmd=tq.fake_job("--mem-gib", "12", "--wait-file", tq.path("go")))
    tq.wait_state(job_id, "running")

    def allocated():
        attempts = tq.gpus()["gpus"][0]["attempts"]
        return attempts if attempts and attempts[0]["used_bytes"] == 12 * GIB else None

    attempts = wait_for(allocated, what="the job's usage to be sampled")
    assert attempts[0]["job"] == job_id and attempts[0]["reserved_bytes"] == 20 * GIB
    doc = tq.gpus()["gpus"][0]
    assert doc["memory_used"] == 12 * GIB
    assert doc["memory_reserved"] == 8 * GIB  # what it reserved and has not allocated yet
    assert doc["other_processes"] == []
    assert tq.show(job_id)["attempts"][0]["peak_mem_bytes"] == 12 * GIB
    assert "peak 12.0 GiB" in tq.run("ls").stdout

    open(tq.path("go"), "w").close()
    job = tq.wait_state(job_id, "succeeded")
    assert job["attempts"][0]["peak_mem_bytes"] == 12 * GIB


def nvml_env(tq):
    tq.env.pop("TRAINQ_FAKE_GPUS")
    tq.env.update({"FAKE_NVML_GPUS": "2", "FAKE_NVML_TOTAL_MIB": "81920,40960",
                   "FAKE_NVML_USED_MIB": "1024,0", "FAKE_NVML_NAME": "Fake NVML A100",
                   "FAKE_NVML_UTIL": "37"})


def test_nvml_library_from_config(make_trainq):
    nvml_dir = os.environ.get("TRAINQ_FAKE_NVML_DIR")
    if not nvml_dir:
        pytest.fail("TRAINQ_FAKE_NVML_DIR is not set; run the integration tests through ctest")
    library = os.path.join(nvml_dir, "libnvidia-ml.so.1")
    assert os.path.exists(library), library
    tq = make_trainq(nvml_library=library)
    nvml_env(tq)
    doc = tq.gpus()
    assert doc["source"] == "nvml"
    assert [g["name"] for g in doc["gpus"]] == ["Fake NVML A100", "Fake NVML A100"]
    assert [g["memory_total"] for g in doc["gpus"]] == [80 * GIB, 40 * GIB]
    assert [g["index"] for g in doc["gpus"]] == [0, 1]
    assert doc["gpus"][0]["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert doc["gpus"][0]["memory_used"] >= 1024 * MIB
    assert doc["gpus"][0]["utilization"] == 37

    env_out = tq.path("env.json")
    job_id = tq.submit("--mem", "50GiB", cmd=tq.fake_job("--env-out", env_out))
    job = tq.wait_state(job_id, "succeeded")
    assert job["attempts"][0]["gpu_indices"] == [0]  # only GPU 0 has 50 GiB
    env = read_json(env_out)
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["TRAINQ_GPUS"] == "GPU-00000000-0000-0000-0000-000000000000"


def test_nvml_processes_of_other_users(make_trainq, foreign_process):
    tq = make_trainq(nvml_library=os.path.join(os.environ["TRAINQ_FAKE_NVML_DIR"],
                                               "libnvidia-ml.so.1"))
    nvml_env(tq)
    tq.env["FAKE_NVML_PROCS"] = f"{foreign_process}:2048@0"
    doc = tq.gpus()
    assert doc["gpus"][0]["other_processes"] == [{"pid": foreign_process, "used_bytes": 2 * GIB}]
    assert doc["gpus"][1]["other_processes"] == []
    job_id = tq.submit(cmd=["true"])  # a whole GPU: not the one another user computes on
    assert tq.wait_state(job_id, "succeeded")["attempts"][0]["gpu_indices"] == [1]


def test_missing_nvml_library_means_cpu_only(make_trainq):
    tq = make_trainq(nvml_library="/nonexistent/libnvidia-ml.so.1")
    tq.env.pop("TRAINQ_FAKE_GPUS")
    tq.start_daemon()
    doc = tq.gpus()
    assert doc["gpus"] == [] and doc["source"] == "none"
    lines = [line for line in tq.daemon_log().splitlines() if "NVML" in line]
    assert len(lines) == 1, lines
    assert "/nonexistent/libnvidia-ml.so.1" in lines[0] and "CPU jobs only" in lines[0]

    for opts in (["--gpus", "1"], [], ["--gpus", "1", "--mem", "1GiB"]):
        r = tq.run("submit", *opts, "--", "true", check=False)
        assert r.returncode == 2, r
        assert r.stderr.count("\n") == 1 and "--gpus 0" in r.stderr, r.stderr
    assert tq.ls("--all") == []

    job_id = tq.submit("--gpus", "0", cmd=["true"])
    assert job_id == 1
    tq.wait_state(job_id, "succeeded")


def test_a_failed_sample_makes_the_last_good_one_stale(make_trainq):
    """The last good sample is still shown, with its age and the error; once it is older
    than gpu_stale_after nothing starts on its GPUs, and the waiting job says why. The error
    is logged once, not at every sample."""
    tq = make_trainq(gpu_stale_after="1s")
    assert len(tq.gpus()["gpus"]) == 1
    assert tq.gpus()["sample_error"] is None
    with open(tq.gpu_file + ".tmp", "w") as f:
        f.write('{"gpus": [{"uuid": "GPU-sim-0", "memory_total": "lots"}]')
    os.replace(tq.gpu_file + ".tmp", tq.gpu_file)
    doc = wait_for(lambda: (d := tq.gpus())["gpus"][0]["closed"] == "stale" and d,
                   what="the GPU's facts to turn stale")
    assert [g["uuid"] for g in doc["gpus"]] == ["GPU-sim-0"]
    assert doc["gpus"][0]["memory_total"] == 80 * GIB
    assert "is not a JSON object" in doc["sample_error"]
    assert doc["sample_age_ms"] > 1000
    table = tq.run("gpus").stdout
    assert "0 (stale)" in table
    assert "stale: GPU sampling fails (" in table and "gpu_stale_after" in table, table

    job_id = tq.submit("--mem", "1GiB", cmd=["true"])
    reason = wait_for(lambda: "last sampled" in (r := tq.show(job_id)["reason"] or "") and r,
                      what="the reason to name the stale facts")
    assert "sampling fails: simulated GPU file" in reason, reason
    assert tq.state(job_id) == "queued"
    assert tq.daemon_log().count("GPU sample failed") == 1, tq.daemon_log()

    tq.set_gpus([gpu(0), gpu(1)])
    tq.wait_state(job_id, "succeeded")
    doc = tq.gpus()
    assert len(doc["gpus"]) == 2 and doc["sample_error"] is None
    assert "GPU sampling works again" in tq.daemon_log()
