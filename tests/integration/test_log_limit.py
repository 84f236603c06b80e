"""log_max_size: a job that writes far more than the limit keeps a log within it, with its
first half, a marker counting the bytes dropped, and its latest output."""
import os
import re

MIB = 1 << 20

def test_a_log_over_the_limit_keeps_head_marker_and_end(make_trainq):
    tq = make_trainq(log_max_size="1MiB")
    # awk writes the lines much faster than a shell loop.
    script = ("awk 'BEGIN { for (i = 0; i < 655360; i++) printf \"line %026d\\n\", i }'; "
              "echo last line")
    job_id = tq.submit("--gpus", "0", cmd=["sh", "-c", script])
    job = tq.wait_state(job_id, "succeeded", timeout=120)
    log_path = job["attempts"][0]["log_path"]
    assert os.path.getsize(log_path) <= MIB

    shown = tq.run("logs", str(job_id)).stdout
    assert shown.startswith("line 00000000000000000000000000\nline 00000000000000000000000001\n")
    marker = re.search(r"\n\[trainq: +(\d+) bytes of output dropped here; log_max_size is "
                       r"1\.0 MiB[^\n]*\]\n", shown)
    assert marker, shown[MIB // 2 - 200:MIB // 2 + 400]
    assert marker.start() == MIB // 2
    assert shown.endswith("line 00000000000000000000655359\nlast line\n")
    kept = len(shown) - marker.end()
    assert MIB // 2 + int(marker.group(1)) + kept == 655360 * 32 + len("last line\n")
