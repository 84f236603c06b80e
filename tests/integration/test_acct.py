"""`trainq acct` (Slurm's sacct) on one machine's SQLite and on a cluster's Redis: each job's
wait, run time, GPUs, GPU-hours and end, each user's totals, and the rows of jobs `clean`
forgot (docs/workflow.md, "Accounting")."""
import json
import time

from conftest import gpu


def acct_flow(t, other):
    ran = t.submit("--gpus", "2", cmd=["sleep", "1.5"])
    failed = t.submit("--gpus", "0", "--retries", "0", cmd=["sh", "-c", "exit 4"])
    t.wait_state(ran, "succeeded", timeout=60)
    t.wait_state(failed, "failed", timeout=60)
    doc = json.loads(other.run("acct", "--json").stdout)
    rows = {r["id"]: r for r in doc["jobs"]}
    r = rows[ran]
    assert r["state"] == "succeeded" and r["gpus"] == 2 and r["attempts"] == 1
    assert 1400 <= r["elapsed_ms"] < 30_000, r
    # GPU-hours: its two GPUs for as long as it ran.
    assert abs(r["gpu_hours"] - 2 * r["elapsed_ms"] / 3_600_000) < 1e-9, r
    assert r["wait_ms"] >= 0 and r["end"] == "exit code 0", r
    assert rows[failed]["state"] == "failed" and rows[failed]["end"] == "exit code 4"
    (me,) = [u for u in doc["users"] if u["user"] == r["user"]]
    assert (me["jobs"], me["succeeded"], me["failed"]) == (2, 1, 1), me
    assert abs(me["gpu_hours"] - r["gpu_hours"]) < 1e-9
    # Forgotten by clean, still counted.
    t.run("clean")
    assert t.ls("--all") == []
    after = json.loads(other.run("acct", "--json").stdout)
    assert {x["id"] for x in after["jobs"]} == {ran, failed}
    assert after["users"] == doc["users"]
    table = other.run("acct").stdout
    assert "GPU-HOURS" in table and "exit code 4" in table, table
    # --since: what ended before then is left out.
    time.sleep(1.2)
    recent = json.loads(other.run("acct", "--json", "--since", "1s").stdout)
    assert recent["jobs"] == [], recent
    p = other.run("acct", "--since", "soon", check=False)
    assert p.returncode == 2 and "--since" in p.stderr


def test_acct_on_one_machine(make_trainq):
    t = make_trainq(gpus=[gpu(0), gpu(1)])
    acct_flow(t, t)


def test_acct_in_a_cluster(make_cluster):
    cluster = make_cluster(2, gpus=[gpu(0), gpu(1)])
    nodes = list(cluster.nodes.values())
    acct_flow(nodes[0], nodes[1])
