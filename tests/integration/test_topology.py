"""GPU topology from the simulated GPU file (docs/simulated-gpus.md): read by the daemon,
shown by `trainq gpus --topo`, and used to give multi-GPU jobs GPUs that are close."""
import json

from conftest import gpu, wait_for

# GPUs 0 and 2 are NVLinked; 1 and 3 share a PCIe switch; the rest go across sockets.
TOPOLOGY = [["X", "SYS", "NV12", "SYS"],
            ["SYS", "X", "SYS", "PIX"],
            ["NV12", "SYS", "X", "SYS"],
            ["SYS", "PIX", "SYS", "X"]]
LEVELS = [[0, 50, 0, 50], [50, 0, 50, 10], [0, 50, 0, 50], [50, 10, 50, 0]]


def four(make_trainq):
    tq = make_trainq([gpu(i) for i in range(4)])
    tq.set_gpus([gpu(i) for i in range(4)], topology=TOPOLOGY)
    return tq


def topo(tq):
    return json.loads(tq.run("gpus", "--topo", "--json").stdout)


def test_the_daemon_reads_the_topology_and_shows_it(make_trainq):
    tq = four(make_trainq)
    assert topo(tq)["topology"] == LEVELS
    assert topo(tq)["gpus"] == [0, 1, 2, 3]
    assert tq.gpus()["topology"] == LEVELS
    lines = tq.run("gpus", "--topo").stdout.splitlines()
    assert lines[0].split() == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert lines[1].split() == ["GPU0", "X", "SYS", "BRD", "SYS"]
    assert lines[4].split() == ["GPU3", "SYS", "PIX", "SYS", "X"]
    assert any(line.startswith("Legend:") for line in lines)


def test_without_topology_it_is_unknown(tq):
    assert topo(tq)["topology"] == []
    assert "GPU topology unknown" in tq.run("gpus", "--topo").stdout


def test_a_bad_topology_is_refused_at_start_naming_the_entry(make_trainq):
    tq = make_trainq([gpu(0), gpu(1)])
    tq.set_gpus([gpu(0), gpu(1)], topology=[["X", "PIX"], ["SYS", "X"]])
    proc = tq.run("daemon", "--foreground", check=False)
    assert proc.returncode == 2
    assert "topology[1][0]: must equal topology[0][1]" in proc.stderr


def test_a_topology_change_while_running_is_seen(make_trainq):
    tq = four(make_trainq)
    tq.start_daemon()
    tq.set_gpus([gpu(i) for i in range(4)])  # the file lost its topology: unknown now
    wait_for(lambda: topo(tq)["topology"] == [], what="the topology to be dropped")


# --- closest GPUs for a multi-GPU job: implemented by the placement policy ---

def test_a_two_gpu_job_gets_the_nvlinked_pair(make_trainq):
    tq = four(make_trainq)
    done = tq.path("done")
    job = tq.submit("--gpus", "2", cmd=tq.fake_job("--wait-file", done))
    assert tq.wait_state(job, "running")["attempts"][-1]["gpu_indices"] == [0, 2]
    other = tq.submit("--gpus", "2", cmd=tq.fake_job("--wait-file", done))
    assert tq.wait_state(other, "running")["attempts"][-1]["gpu_indices"] == [1, 3]
    open(done, "w").close()
    tq.wait_state(job, "succeeded")
    tq.wait_state(other, "succeeded")
