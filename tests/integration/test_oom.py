"""Out-of-memory retries: an attempt that dies with a GPU out-of-memory
message goes back to the queue after the backoff (oom_backoff = 1s here)."""
from datetime import datetime

from conftest import wait_for

CUSTOM = "my_framework: device allocation failed"


def seconds(stamp):
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_oom_attempt_is_retried_after_the_backoff(tq):
    job_id = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--mem-gib", "8",
                                                         "--oom-on-attempts", "1"))
    # Between the attempts the job waits and says why.
    def waiting_for_retry():
        job = tq.show(job_id)
        return job if job["attempt"] == 1 and job["state"] == "queued" else None

    waiting = wait_for(waiting_for_retry, what="the job to wait for its OOM retry")
    assert "out of memory" in waiting["reason"], waiting["reason"]
    assert waiting["not_before"] is not None

    job = tq.wait_state(job_id, "succeeded")
    first, second = job["attempts"]
    assert first["state"] == "failed" and first["oom"] is True and first["exit_code"] == 1
    assert "out of memory" in first["end_reason"]
    assert "torch.OutOfMemoryError" in first["end_reason"] or \
        "CUDA out of memory" in first["end_reason"]
    assert second["state"] == "succeeded" and second["oom"] is False
    assert seconds(second["started_at"]) - seconds(first["ended_at"]) >= 1.0, "no backoff"
    text = tq.run("show", str(job_id)).stdout
    assert "out of memory yes" in text and "out of memory (" in text
    assert "CUDA out of memory" in tq.run("logs", str(job_id), "--attempt", "1").stdout


def test_oom_with_no_retries_left_fails(tq):
    job_id = tq.submit("--mem", "10GiB", "--retries", "1",
                       cmd=tq.fake_job("--oom-on-attempts", "1,2"))
    job = tq.wait_state(job_id, "failed")
    assert [a["oom"] for a in job["attempts"]] == [True, True]
    assert "no retries left" in job["reason"], job["reason"]
    assert "out of memory" in job["reason"]
    assert "no retries left" in tq.run("show", str(job_id)).stdout


def test_other_failures_are_not_retried(tq):
    # The log mentions memory, but not in a known out-of-memory form.
    job_id = tq.submit("--mem", "10GiB", cmd=["sh", "-c", "echo 'memory: fine' >&2; exit 1"])
    job = tq.wait_state(job_id, "failed")
    assert len(job["attempts"]) == 1
    assert job["attempts"][0]["oom"] is False
    assert job["attempts"][0]["exit_code"] == 1
    assert job["reason"] == "exit code 1"
    # The next job runs while the failed one stays failed: no retry was scheduled.
    after = tq.submit("--mem", "10GiB", cmd=["true"])
    tq.wait_state(after, "succeeded")
    assert len(tq.show(job_id)["attempts"]) == 1


def test_custom_oom_pattern_from_config(make_trainq):
    tq = make_trainq(oom_patterns=[CUSTOM])
    job_id = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--oom-on-attempts", "1",
                                                         "--oom-text", f"fatal: {CUSTOM} (5 GiB)"))
    job = tq.wait_state(job_id, "succeeded")
    assert [a["oom"] for a in job["attempts"]] == [True, False]
    assert CUSTOM in job["attempts"][0]["end_reason"]
    # The built-in patterns still apply alongside the custom one.
    builtin = tq.submit("--mem", "10GiB", "--retries", "0",
                        cmd=tq.fake_job("--oom-on-attempts", "1"))
    job = tq.wait_state(builtin, "failed")
    assert job["attempts"][0]["oom"] is True


def test_oom_retry_starts_without_a_sampling_tick(make_trainq):
    # The backoff ends on a timer of its own, not on the next GPU sample.
    tq = make_trainq(sample_interval="1h")
    job_id = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--oom-on-attempts", "1"))
    job = tq.wait_state(job_id, "succeeded")
    assert [a["oom"] for a in job["attempts"]] == [True, False]


def test_oom_backoff_survives_a_daemon_kill(tq):
    job_id = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--oom-on-attempts", "1"))

    def in_backoff():
        job = tq.show(job_id)
        return job if job["state"] == "queued" and job["attempt"] == 1 else None

    wait_for(in_backoff, what="the OOM backoff")
    tq.kill_daemon()
    job = tq.wait_state(job_id, "succeeded")
    first, second = job["attempts"]
    assert first["oom"] and not second["oom"]
    assert seconds(second["started_at"]) - seconds(first["ended_at"]) >= 1.0, "no backoff"


def test_cancel_during_the_oom_backoff(make_trainq):
    tq = make_trainq(oom_backoff="30s")
    job_id = tq.submit("--mem", "10GiB", cmd=tq.fake_job("--oom-on-attempts", "1"))

    def in_backoff():
        job = tq.show(job_id)
        return job if job["state"] == "queued" and job["attempt"] == 1 else None

    assert "out of memory" in wait_for(in_backoff, what="the OOM backoff")["reason"]
    tq.run("cancel", str(job_id))
    job = tq.show(job_id)
    assert job["state"] == "cancelled" and len(job["attempts"]) == 1
