"""`trainq explain`: a waiting job's reason and the numbers behind it (its GPUs' usable
memory, who holds them, its place in line, its user's fair-share standing), through the real
daemon on simulated GPUs."""
import json
import os

from conftest import GIB, gpu


def explain(tq, job_id):
    return json.loads(tq.run("explain", str(job_id), "--json").stdout)


def test_explain_a_waiting_job_names_its_gpus_line_and_standing(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1, total="40GiB")])
    stop = os.path.join(tq.root, "stop")
    long_job = tq.fake_job("--mem-gib", "30", "--wait-file", stop)
    a = tq.submit("--mem", "30GiB", cmd=long_job)
    b = tq.submit("--mem", "30GiB", cmd=long_job)
    tq.wait_state(a, "running")
    tq.wait_state(b, "running")
    big = tq.submit("--mem", "60GiB", cmd=long_job)
    after = tq.submit("--mem", "60GiB", cmd=long_job)
    tq.wait_state(big, "queued")

    doc = explain(tq, after)
    assert doc["job"] == after and doc["state"] == "queued" and doc["waiting"] is True
    assert doc["would_start"] is False
    assert doc["reason"].startswith("needs 1 GPU with 60.0 GiB usable; best: GPU 0 with"), doc
    assert doc["position"] == 2 and doc["ahead"] == 1
    share = doc["fair_share"]
    assert share["user"] == tq.show(after)["user"]
    assert share["rank"] == 1 and share["users_waiting"] == 1
    assert share["gpu_hours"] >= 0
    gpus = {g["index"]: g for g in doc["gpus"]}
    assert set(gpus) == {0, 1}
    assert gpus[0]["memory_total"] == 80 * GIB and gpus[1]["memory_total"] == 40 * GIB
    running = {a, b}
    assert set(gpus[0]["jobs"]) | set(gpus[1]["jobs"]) == running
    for g in gpus.values():
        assert g["fits"] is False
        assert g["memory_usable"] < 60 * GIB
        assert g["held_for"] is None and g["closed"] == ""
    assert doc["holds"] == []

    text = tq.run("explain", str(after)).stdout
    assert f"job {after}: queued" in text
    assert "reason: needs 1 GPU with 60.0 GiB usable" in text
    assert "position: 2 in line (1 ahead)" in text
    assert "rank 1 of 1 users waiting" in text
    assert "USABLE" in text and "80.0 GiB" in text and "40.0 GiB" in text

    open(stop, "w").close()
    tq.wait_state(big, ("running", "succeeded"))
    tq.wait_state(after, ("running", "succeeded"))


def test_explain_a_job_that_is_not_waiting_says_its_state(tq):
    job = tq.submit("--mem", "1GiB", cmd=tq.fake_job("--duration", "0"))
    tq.wait_state(job, "succeeded")
    doc = explain(tq, job)
    assert doc == {"job": job, "state": "succeeded", "waiting": False,
                   "reason": tq.show(job)["reason"]}
    text = tq.run("explain", str(job)).stdout
    assert text.startswith(f"job {job}: succeeded\n")


def test_explain_unknown_or_bad_ids(tq):
    tq.start_daemon()
    answer = tq.api("GET", "/v1/jobs/424242/explain")
    assert answer.status == 404 and answer.error_code == "not_found"
    r = tq.run("explain", "424242", check=False)
    assert r.returncode != 0 and "424242" in r.stderr
    r = tq.run("explain", "abc", check=False)
    assert r.returncode == 2 and "job id: 'abc' is not a job id" in r.stderr
