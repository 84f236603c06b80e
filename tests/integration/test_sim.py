"""`trainq sim`: the real binary on small files (always), and on the shared traces when they
are there (TRAINQ_TRACES, else ../shared/traces next to the repository), where only sane
ranges are asserted: BestFit near its published allocation ratio, the replay policies in order."""
import json
import os
import subprocess
import tempfile

import pytest

from conftest import trainq_binary

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = os.environ.get("TRAINQ_TRACES") or os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "traces"))
HEADER = "job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user\n"


def sim(*args):
    return subprocess.run([trainq_binary(), "sim", *args], capture_output=True, text=True,
                          timeout=280)


def sim_json(*args):
    done = sim(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture()
def files():
    root = tempfile.mkdtemp(prefix="tq-sim-", dir="/tmp")

    def write(name, text):
        path = os.path.join(root, name)
        with open(path, "w") as f:
            f.write(text)
        return path
    return write


def test_replay_fifo_blocks_where_trainq_backfills(files):
    trace = files("t.csv", HEADER + "A,0,100,1,1,,\nB,1,10,2,1,,\nC,2,10,1,1,,\n")
    fifo = sim_json("replay", "--trace", trace, "--nodes", "1x2", "--policy", "fifo")
    ours = sim_json("replay", "--trace", trace, "--nodes", "1x2")
    assert fifo["jobs"] == ours["jobs"] == 3
    assert fifo["mean_queue_s"] == pytest.approx((0 + 99 + 108) / 3)
    assert ours["mean_queue_s"] == pytest.approx((0 + 99 + 0) / 3)
    assert fifo["makespan_s"] == 120 and ours["makespan_s"] == 110
    assert ours["policy"] == "trainq" and ours["knobs"]["aging_s"] == 7200
    assert ours["cluster"] == {"nodes": 1, "gpus": 2}


def test_replay_reads_node_csv_and_json(files):
    trace = files("t.csv", HEADER + "a,0,10,1,0.5,,u\nb,0,10,1,0.5,,v\n")
    csv = files("n.csv", "node_id,gpus,gpu_model,gpu_mem_gib,cpu_milli,memory_mib\nx,1,T4,16,,\n")
    js = files("n.json", '{"nodes": [{"name": "x", "gpus": 1, "gpu_mem_gib": 16}]}')
    for nodes in (csv, js):
        m = sim_json("replay", "--trace", trace, "--nodes", nodes)
        assert m["makespan_s"] == 10 and m["mean_queue_s"] == 0  # both halves share the GPU
    naive = sim_json("replay", "--trace", trace, "--nodes", csv, "--policy", "naive")
    assert naive["makespan_s"] == 20  # one job per GPU


def test_placement_small(files):
    trace = files("p.csv", HEADER + "a,0,1,1,1,,\n")
    out = sim_json("placement", "--trace", trace, "--nodes", "1x10", "--policy", "bestfit",
                   "--seeds", "1-3")
    assert out["allocation_ratio"] == {"50": 50, "80": 80, "90": 90, "100": 100, "110": 100,
                                       "120": 100, "130": 100}
    assert out["seeds"] == [1, 2, 3] and len(out["per_seed"]) == 3
    assert out["failed_pods"] == 3


BAD = [
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--policy", "sjf"], "--policy"),
    (["replay", "--trace", "{trace}", "--nodes", "1y2"], "--nodes"),
    (["replay", "--trace", "{missing}", "--nodes", "1x2"], "--trace"),
    (["replay", "--trace", "{bad}", "--nodes", "1x2"], "bad.csv:3: gpus: 'two'"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--aging", "soon"], "--aging"),
    (["placement", "--trace", "{trace}", "--nodes", "1x2", "--seeds", "9-1"], "--seeds"),
    (["placement", "--trace", "{trace}", "--nodes", "1x2", "--inflate", "0"], "--inflate"),
    (["placement", "--trace", "{trace}", "--nodes", "1x2", "--policy", "fifo"], "--policy"),
    (["placement", "--trace", "{trace}", "--nodes", "{badnodes}"], "n.csv:2: gpus: '-1'"),
]


@pytest.mark.parametrize("args,expected", BAD)
def test_bad_input_exits_2_naming_the_field(files, args, expected):
    paths = {
        "trace": files("t.csv", HEADER + "a,0,1,1,1,,\n"),
        "bad": files("bad.csv", HEADER + "a,0,1,1,1,,\nb,0,1,two,1,,\n"),
        "badnodes": files("n.csv", "node_id,gpus\nx,-1\n"),
        "missing": "/nonexistent/trace.csv",
    }
    done = sim(*[a.format(**paths) for a in args])
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr
    assert done.stdout == ""


def shared(name):
    path = os.path.join(TRACES, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is absent; set TRAINQ_TRACES to the shared traces folder")
    return path


def test_openb_bestfit_matches_the_published_protocol():
    pods = shared("alibaba_v2023_openb_pods.csv")
    nodes = shared("alibaba_v2023_openb_gpu_nodes.csv")
    out = sim_json("placement", "--trace", pods, "--nodes", nodes, "--policy", "bestfit",
                   "--seeds", "42-44")
    # Published (FGD, ATC'23): BestFit 92.86 at 100 %, 93.08 at 130 %.
    assert abs(out["allocation_ratio"]["100"] - 92.86) < 1.5, out
    assert abs(out["allocation_ratio"]["130"] - 93.08) < 1.5, out
    assert out["allocation_ratio"]["50"] == pytest.approx(50, abs=0.5)


def test_philly_week_replay_policies_side_by_side():
    trace = shared("philly_sia_week_2017-10-01.csv")
    fifo = sim_json("replay", "--trace", trace, "--nodes", "60x8:32GiB", "--policy", "fifo")
    naive = sim_json("replay", "--trace", trace, "--nodes", "60x8:32GiB", "--policy", "naive")
    for m in (fifo, naive):
        assert m["jobs"] == 10650 and m["stuck"] == 0 and m["unplaceable"] == 0
        assert 0 < m["gpu_utilization"] <= 1
    # Strict head of line queues longer than skipping ahead.
    assert fifo["mean_queue_s"] > naive["mean_queue_s"]


def test_a_person_gets_a_table_and_a_node_count_is_explained(files):
    trace = files("t.csv", HEADER + "A,0,100,1,1,,\nB,1,10,2,1,,\nC,2,10,1,1,,\n")
    done = sim("replay", "--trace", trace, "--nodes", "1x2", "--policy", "fifo")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["FIGURE", "VALUE"]
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    assert rows["policy"] == "fifo" and rows["cluster.gpus"] == "2"
    assert rows["mean_queue_s"] == "1m09s (69 s)", rows  # (0 + 99 + 108) / 3 seconds
    ours = sim("replay", "--trace", trace, "--nodes", "1x2")
    knobs = {line.split()[0]: line.split(None, 1)[1] for line in ours.stdout.splitlines()[1:]}
    assert knobs["knobs.aging_s"] == "2h00m (7200 s)", knobs
    assert knobs["knobs.half_life_s"] == "168h00m (604800 s)", knobs
    bad = sim("replay", "--trace", trace, "--nodes", "8")
    assert bad.returncode == 2
    assert "--nodes: '8' is a count, not a node list; give NODESxGPUS[:MEM] like 8x8:80GiB" \
        in bad.stderr, bad.stderr
