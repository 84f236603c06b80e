"""What people watch the queue through, with the real daemon over TCP (docs/dashboard.md):
/metrics checked by Prometheus's own promtool and against `trainq ls` and `trainq gpus` at the
same moment, the event stream (GET /v1/events) telling a job's life in order, a hundred
followers that never read leaving submits unharmed, and `trainq dashboard`'s URL and token."""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from conftest import free_port, gpu, wait_for

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs")


def token(tq, role="read"):
    return tq.run("token", "create", f"t-{role}", "--role", role).stdout.strip()


def get(port, path, tok):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {tok}"})
    res = conn.getresponse()
    body = res.read().decode()
    conn.close()
    return res, body


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def series(values, name, **want):
    """The values of `name` whose labels include `want`."""
    return [v for (n, labels), v in values.items()
            if n == name and all((k, str(x)) in labels for k, x in want.items())]


@pytest.fixture
def served(make_trainq):
    port = free_port()
    tq = make_trainq(gpus=[gpu(0, others=1 << 30, utilization=37), gpu(1)],
                     listen=[f"127.0.0.1:{port}"])
    tq.start_daemon()
    return tq, port


def test_metrics_pass_promtool_and_agree_with_ls_and_gpus(served):
    tq, port = served
    tok = token(tq)
    running = tq.submit("--gpus", "1", "--mem", "60GiB", cmd=["sleep", "600"])
    second = tq.submit("--gpus", "1", "--mem", "60GiB", cmd=["sleep", "600"])
    waiting = tq.submit("--gpus", "1", "--mem", "70GiB", cmd=["sleep", "600"])
    blocked = tq.submit("--after", str(running), cmd=["true"])
    tq.wait_state(running, "running")
    tq.wait_state(second, "running")
    wait_for(lambda: tq.show(waiting)["reason"], what="the waiting job's reason")

    res, text = get(port, "/metrics", tok)
    assert res.status == 200
    assert res.getheader("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    ls = tq.ls()
    gpus = tq.gpus()

    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package) is installed by scripts/deps.sh test"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "" and check.stderr.strip() == "", check.stdout + check.stderr

    values = samples(text)
    states = {}
    for job in ls:
        states[job["state"]] = states.get(job["state"], 0) + 1
    for state in ("queued", "blocked", "starting", "running"):
        assert series(values, "trainq_jobs", state=state) == [states.get(state, 0)], state
    assert states == {"running": 2, "queued": 1, "blocked": 1}
    assert series(values, "trainq_jobs_waiting", reason="dependency") == [1]
    assert sum(series(values, "trainq_jobs_waiting")) == 2
    assert series(values, "trainq_jobs_submitted_total") == [4]
    for g in gpus["gpus"]:
        at = {"gpu": g["index"], "UUID": g["uuid"]}
        assert series(values, "trainq_gpu_info", model_name=g["name"], **at) == [1]
        assert series(values, "trainq_gpu_memory_total_bytes", **at) == [g["memory_total"]]
        assert series(values, "trainq_gpu_memory_used_bytes", **at) == [g["memory_used"]]
        assert series(values, "trainq_gpu_memory_reserved_bytes", **at) == [g["memory_reserved"]]
        assert series(values, "trainq_gpu_memory_usable_bytes", **at) == [g["memory_usable"]]
    assert series(values, "trainq_gpu_utilization_ratio", gpu=0) == [0.37]
    assert series(values, "trainq_gpu_memory_reserved_bytes", gpu=0)[0] > 50 << 30
    assert series(values, "process_resident_memory_bytes")[0] > 1 << 20
    assert series(values, "trainq_build_info")[0] == 1
    assert "user=" not in text

    # What the docs and the Grafana dashboard name is what is served, and the other way.
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    served_names = {n for (n, _) in values}
    with open(os.path.join(DOCS, "grafana-dashboard.json")) as f:
        grafana = json.load(f)
    exprs = [t["expr"] for p in grafana["panels"] for t in p["targets"]]
    for name in set(re.findall(r"\b((?:trainq|process)_[a-z_]+)", " ".join(exprs))):
        assert name in served_names or name in families, name
    with open(os.path.join(DOCS, "dashboard.md")) as f:
        doc = f.read()
    for family in families:
        short = re.sub(r"^trainq_gpu_memory_(used|reserved|usable)_bytes$", r"_\1_bytes", family)
        assert family in doc or short in doc, f"{family} is not in docs/dashboard.md"

    # A read token reads metrics; nothing is served without one.
    res, _ = get(port, "/metrics", "tq_" + "0" * 64)
    assert res.status == 401
    tq.run("cancel", str(blocked), str(waiting))


def read_events(resp, until, timeout=30):
    """Events off a live SSE response until `until(events)` holds."""
    events, block = [], {}
    resp.fp.raw._sock.settimeout(timeout)
    while not until(events):
        line = resp.fp.readline().decode()
        assert line, "the stream ended"
        line = line.rstrip("\n")
        if line.startswith("event: "):
            block["type"] = line[7:]
        elif line.startswith("data: "):
            block["data"] = json.loads(line[6:])
        elif line == "" and block:
            events.append(block)
            block = {}
    return events


def test_a_follower_hears_a_jobs_whole_life_in_order(served):
    tq, port = served
    tok = token(tq)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {tok}"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    assert resp.getheader("Content-Length") is None
    job = tq.submit("--gpus", "1", "--name", "life", cmd=["sh", "-c", "sleep 1; exit 3"])

    def ended(events):
        return any(e["type"] == "job" and e["data"]["id"] == job and
                   e["data"]["kind"] == "ended" for e in events)

    events = read_events(resp, ended)
    life = [(e["data"]["kind"], e["data"]["state"]) for e in events
            if e["type"] == "job" and e["data"]["id"] == job]
    assert life[0] == ("submitted", "queued")
    assert life[-1] == ("ended", "failed")
    assert ("started", "running") in life or ("started", "starting") in life
    assert [k for k, _ in life].index("started") < len(life) - 1
    end = [e for e in events if e["type"] == "job" and e["data"]["kind"] == "ended"][0]["data"]
    assert end["exit_code"] == 3 and end["name"] == "life" and end["gpus"] == [0]
    assert any(e["type"] == "gpus" for e in events)  # samples come too
    conn.close()


def test_a_hundred_followers_that_never_read_leave_submits_alone(served):
    tq, port = served
    tok = token(tq)
    silent = []
    for i in range(100):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.bind((f"127.0.0.{2 + i // 50}", 0))  # per-address cap: 64 connections
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET /v1/events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {tok}\r\n\r\n"
                  .encode())
        silent.append(s)
    wait_for(lambda: "trainq_event_streams 100\n" in get(port, "/metrics", tok)[1],
             what="100 followers")
    ids = [tq.submit("--gpus", "0", cmd=["true"]) for _ in range(20)]
    for i in ids:
        tq.wait_state(i, "succeeded")
    # The daemon still answers at once, and a follower that reads gets what happens now.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {tok}"})
    resp = conn.getresponse()
    job = tq.submit("--gpus", "0", cmd=["true"])
    read_events(resp, lambda ev: any(e["type"] == "job" and e["data"]["id"] == job and
                                     e["data"]["kind"] == "ended" for e in ev))
    resp.close()
    conn.close()
    for s in silent:
        s.close()
    wait_for(lambda: "trainq_event_streams 0\n" in get(port, "/metrics", tok)[1],
             what="the followers that left to be forgotten")


def test_trainq_dashboard_prints_a_url_with_a_read_token(served, make_trainq):
    tq, port = served
    out = tq.run("dashboard", "--no-open")
    url = out.stdout.strip()
    m = re.fullmatch(rf"http://127\.0\.0\.1:{port}/#token=(tq_[0-9a-f]{{64}})", url)
    assert m, url
    assert "valid until" in out.stderr
    tok = m.group(1)
    res, body = get(port, "/v1/status", tok)
    assert res.status == 200 and json.loads(body)["caller"]["role"] == "read"
    listing = tq.run("token", "ls", "--json").stdout
    assert any(t["name"].startswith("dashboard-") and t["role"] == "read"
               for t in json.loads(listing)["tokens"])
    # The page itself needs no token; its data does.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/")
    res = conn.getresponse()
    page = res.read().decode()
    assert res.status == 200 and "/assets/app.js" in page
    assert "default-src 'self'" in res.getheader("Content-Security-Policy")
    conn.close()
    # Without `listen` there is nothing to open: said so, exit 1.
    plain = make_trainq()
    refused = plain.run("dashboard", "--no-open", check=False)
    assert refused.returncode == 1
    assert "listen" in refused.stderr and refused.stdout == ""


def test_any_node_of_a_cluster_serves_every_nodes_gpu_history_and_the_whole_queues_events(
        make_cluster):
    cluster = make_cluster(2, gpus=[gpu(0)])
    n0, n1 = cluster.node("node0"), cluster.node("node1")
    port0 = int(n0_listen(n0).rsplit(":", 1)[1])
    tok = token(n0)
    conn = http.client.HTTPConnection("127.0.0.1", port0, timeout=30)
    conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {tok}"})
    resp = conn.getresponse()
    assert resp.status == 200
    # Submitted on node1, run wherever the leader puts it: node0's stream tells it all.
    job = n1.submit("--gpus", "1", "--node", "node1", cmd=["sh", "-c", "sleep 1"])
    events = read_events(resp, lambda ev: any(
        e["type"] == "job" and e["data"]["id"] == job and e["data"]["kind"] == "ended"
        for e in ev))
    life = [e["data"] for e in events if e["type"] == "job" and e["data"]["id"] == job]
    assert life[0]["kind"] == "submitted" and life[-1]["state"] == "succeeded"
    assert any(d["kind"] == "started" and d["node"] == "node1" for d in life), life
    resp.close()
    conn.close()
    # node1's hour of GPU samples, asked of node0.
    wait_for(lambda: len(json.loads(get(port0, "/v1/gpus/history?node=node1", tok)[1])["t"]) > 1,
             what="node1's history through node0")
    res, body = get(port0, "/v1/gpus/history?node=node1", tok)
    assert res.status == 200
    assert json.loads(body)["node"] == "node1"
    assert json.loads(get(port0, "/v1/gpus/history", tok)[1])["node"] == "node0"
    res, body = get(port0, "/v1/gpus/history?node=nope", tok)
    assert res.status == 404 and "no node 'nope'" in body


def n0_listen(t):
    with open(os.path.join(t.state_dir, "config.toml")) as f:
        return re.search(r'listen = \["([^"]+)"\]', f.read()).group(1)
