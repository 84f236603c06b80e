"""`trainq update`, `hold` and `release` as a user types them, on one machine's SQLite and on a
cluster's Redis (docs/workflow.md, "Managing the queue")."""
import json
import os
import pwd

from conftest import gpu, wait_for


def held_flow(t, other=None):
    """Hold, update and release a waiting job through `t`; `other` (a cluster's other node)
    sees what `t` changed."""
    other = other or t
    blocker = t.submit("--gpus", "1", cmd=["sleep", "300"])
    t.wait_state(blocker, "running", timeout=30)
    job = t.submit("--gpus", "1", "--mem", "10GiB", "--name", "first", cmd=["true"])
    # A bad value changes nothing and says which option and what it takes.
    p = t.run("update", str(job), "--mem", "banana", check=False)
    assert p.returncode == 2 and "mem" in p.stderr, p.stderr
    p = t.run("update", str(job), "--gpus", "64", check=False)
    assert p.returncode == 2 and "--gpus" in p.stderr, p.stderr
    assert other.show(job)["mem_bytes"] == 10 << 30
    out = json.loads(t.run("update", str(job), "--mem", "20GiB", "--priority", "5",
                           "--name", "second", "--json").stdout)
    assert out["results"][0]["id"] == job
    shown = other.show(job)
    assert (shown["mem_bytes"], shown["priority"], shown["name"]) == (20 << 30, 5, "second")
    assert t.run("hold", str(job)).stdout.strip() == f"job {job} held"
    assert other.show(job)["held"] is True
    t.run("cancel", str(blocker))
    who = pwd.getpwuid(os.geteuid()).pw_name
    wait_for(lambda: f"held by {who}: no pass starts it until trainq release"
             in other.show(job)["reason"], timeout=20, what="the held reason")
    assert other.state(job) == "queued"
    table = other.run("ls").stdout
    assert f"held by {who}" in table, table
    t.run("release", str(job))
    other.wait_state(job, "succeeded", timeout=30)
    # An ended job changes no more.
    p = t.run("update", str(job), "--priority", "1", check=False)
    assert p.returncode != 0 and "already ended" in p.stderr, p.stderr


def test_update_hold_and_release_on_one_machine(make_trainq):
    held_flow(make_trainq(gpus=[gpu(0)]))


def test_update_hold_and_release_in_a_cluster(make_cluster):
    cluster = make_cluster(2, gpus=[gpu(0)])
    nodes = list(cluster.nodes.values())
    # One GPU a node: the blocker and the job must meet on one node to wait for each other.
    t = nodes[0]
    blocker2 = t.submit("--gpus", "1", "--node", "node1", cmd=["sleep", "300"])
    t.wait_state(blocker2, "running", timeout=30)
    held_flow(t, nodes[1])
    t.run("cancel", str(blocker2))


def test_a_running_jobs_name_changes_and_nothing_it_holds(make_trainq):
    t = make_trainq(gpus=[gpu(0)])
    job = t.submit("--gpus", "1", cmd=["sleep", "300"])
    t.wait_state(job, "running", timeout=30)
    p = t.run("update", str(job), "--mem", "1GiB", check=False)
    assert p.returncode == 2 and "only name and priority change" in p.stderr, p.stderr
    t.run("update", str(job), "--name", "renamed")
    assert t.show(job)["name"] == "renamed"
    p = t.run("hold", str(job), check=False)
    assert p.returncode == 2 and "only a waiting job is held" in p.stderr, p.stderr
    t.run("cancel", str(job))
