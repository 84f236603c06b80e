"""`trainq sim`: the real binary on small files (always), and on the shared traces when they
are there (TRAINQ_TRACES, else ../shared/traces next to the repository), where only sane
ranges are asserted: BestFit near its published allocation ratio, the replay policies in order,
a window of the whole Philly file equal to its week slice, and the preempting policies' figures."""
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


def test_replay_preempts_and_reports_what_it_cost(files):
    # One GPU: a runs 10 h; b, of a user with no hours yet, arrives at 1 h and preempts it.
    trace = files("t.csv", HEADER + "A,0,36000,1,1,,a\nB,3600,600,1,1,,b\n")
    out = sim_json("replay", "--trace", trace, "--nodes", "1x1", "--preempt",
                   "--preempt-fair-share", "--half-life", "0s")
    assert out["preemptions"] == 1 and out["preempted_jobs"] == 1
    # A stops 70 s after the decision, keeps two 30-minute checkpoints and pays 60 s to restart.
    assert out["lost_gpu_hours"] == pytest.approx((70 + 60) / 3600)
    assert out["mean_jct_s"] == pytest.approx((36730 + 670) / 2)
    assert out["mean_queue_s"] == pytest.approx((600 + 70) / 2)
    assert out["knobs"]["preempt"] is True and out["knobs"]["min_runtime_s"] == 600
    assert out["knobs"]["ckpt_interval_s"] == 1800 and out["knobs"]["restart_cost_s"] == 60
    assert out["knobs"]["stop_s"] == 70
    slower = sim_json("replay", "--trace", trace, "--nodes", "1x1", "--preempt",
                      "--preempt-fair-share", "--half-life", "0s", "--ckpt-interval", "2h",
                      "--restart-cost", "0s", "--stop-time", "10s")
    assert slower["lost_gpu_hours"] == pytest.approx(3610 / 3600)  # no checkpoint yet: all lost
    tiresias = sim_json("replay", "--trace", trace, "--nodes", "1x1", "--policy", "tiresias")
    # A drops to the second queue at 3250 GPU-seconds: B, waiting since 3600, preempts it.
    assert tiresias["preemptions"] == 1
    assert tiresias["mean_first_queue_s"] == pytest.approx(70 / 2)
    assert tiresias["knobs"]["threshold_gpu_seconds"] == 3250
    assert tiresias["knobs"]["queues"] == 2


BAD = [
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--policy", "sjf"], "--policy"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--preempt"], "--preempt-fair-share"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--policy", "fifo", "--preempt",
      "--preempt-aging"], "--preempt: not read by --policy fifo"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--las-threshold", "100"],
     "--las-threshold: not read by --policy trainq"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--ckpt-interval", "30m"],
     "--ckpt-interval: not read"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--policy", "tiresias",
      "--attained-service", "1h"], "--attained-service: not read by --policy tiresias"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--preempt",
      "--preempt-attained-service"], "--preempt-attained-service: needs --attained-service"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--attained-service", "soon"],
     "--attained-service"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--elastic-fraction", "0"],
     "--elastic-fraction: 0 is not valid"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--elastic-fraction", "1.5"],
     "--elastic-fraction: 1.5 is not valid"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--policy", "tiresias",
      "--elastic-fraction", "0.5"], "--elastic-fraction: not read by --policy tiresias"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--seed", "3"],
     "--seed: needs --elastic-fraction"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--elastic-fraction", "0.5",
      "--scaling-exponent", "1.2"], "--scaling-exponent: 1.2 is not valid"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--window", "9..3"], "--window: '9..3'"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--warmup", "7d"],
     "--warmup: needs --window"),
    (["replay", "--trace", "{trace}", "--nodes", "1x2", "--window", "2017-11-01..2017-11-08"],
     "submit_time"),
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


def test_a_window_of_the_whole_philly_file_is_its_week_slice():
    everything = shared("philly_sia_all.csv")
    week = shared("philly_sia_week_2017-10-01.csv")
    cut = sim_json("replay", "--trace", everything, "--window", "2017-10-01..2017-10-08",
                   "--nodes", "64x8:32GiB", "--policy", "naive")
    whole = sim_json("replay", "--trace", week, "--nodes", "64x8:32GiB", "--policy", "naive")
    assert cut.pop("window") == {"text": "2017-10-01..2017-10-08", "start_s": 2294959,
                                 "end_s": 2899759, "warmup_s": 0}
    assert cut == whole


NEW_FIELDS = ["preemptions", "preempted_jobs", "lost_gpu_hours", "mean_first_queue_s",
              "fairness", "fairness_equal_split", "fairness_users", "fairness_per_user"]


def test_philly_day_with_preemption_and_tiresias():
    trace = shared("philly_sia_all.csv")
    day = ["--trace", trace, "--window", "2017-11-01..2017-11-02", "--nodes", "20x8:32GiB"]
    ours = sim_json("replay", *day, "--preempt", "--preempt-fair-share", "--preempt-aging")
    las = sim_json("replay", *day, "--policy", "tiresias")
    plain = sim_json("replay", *day)
    for m in (ours, las, plain):
        assert m["jobs"] == 1246 and m["stuck"] == 0, m
        for field in NEW_FIELDS:
            assert field in m, field
        assert m["fairness"] is None or m["fairness"] >= 1
        assert m["fairness_users"] > 1
        assert m["window"]["start_s"] == 4973359
    assert ours["preemptions"] > 0 and ours["lost_gpu_hours"] > 0
    assert las["preemptions"] > 0 and las["lost_gpu_hours"] > 0
    assert plain["preemptions"] == 0 and plain["lost_gpu_hours"] == 0
    assert las["knobs"]["threshold_gpu_seconds"] == 3250
    warm = sim_json("replay", *day, "--warmup", "1d")
    assert warm["jobs"] == 1246 and warm["window"]["warmup_s"] == 86400  # only the day measured
    assert warm["mean_queue_s"] > plain["mean_queue_s"]  # the day before still holds GPUs
    assert ours["knobs"]["preempt_fair_share"] and ours["knobs"]["preempt_aging"]
