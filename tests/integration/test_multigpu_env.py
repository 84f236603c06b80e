"""The distributed-training environment of multi-GPU jobs: a job script checks what an
unmodified `torchrun train.py` would read, and MASTER_PORTs are never shared."""
import os
import random
import socket
import sys

from conftest import gpu, read_json, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "check_dist_env.py"))
FIRST_PORT, LAST_PORT = 29500, 29999  # the default master_port_range


def check_job(tq, gpus, name, *extra):
    return [sys.executable, CHECK, "--gpus", str(gpus), "--out", tq.path(name), *extra]


def seen(tq, name):
    return wait_for(lambda: read_json(tq.path(name)), what=f"{name} to be written")


def test_multi_gpu_job_gets_exactly_its_gpus_and_the_torchrun_environment(make_trainq):
    tq = make_trainq(gpus=[gpu(i) for i in range(4)])
    tq.env.update({"WORLD_SIZE": "16", "RANK": "5", "LOCAL_RANK": "5", "MASTER_PORT": "1"})
    job_id = tq.submit("--gpus", "2", cmd=check_job(tq, 2, "env.json"))
    job = tq.wait_state(job_id, "succeeded")
    got = seen(tq, "env.json")
    assert got["problems"] == []
    env = got["env"]
    attempt = job["attempts"][0]
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, attempt["gpu_indices"]))
    assert int(env["MASTER_PORT"]) == attempt["master_port"]
    assert FIRST_PORT <= attempt["master_port"] <= LAST_PORT
    assert env["WORLD_SIZE"] is None
    assert f"MASTER_PORT {attempt['master_port']}" in tq.run("show", str(job_id)).stdout


def test_single_gpu_job_gets_no_master_port(make_trainq):
    tq = make_trainq(gpus=[gpu(0), gpu(1)])
    job_id = tq.submit("--gpus", "1", cmd=[sys.executable, "-c",
                                           "import os, sys; "
                                           "sys.exit(0 if os.environ['TRAINQ_NUM_GPUS'] == '1' "
                                           "and 'PET_MASTER_PORT' not in os.environ else 1)"])
    job = tq.wait_state(job_id, "succeeded")
    assert job["attempts"][0]["master_port"] is None


def own_port_range(size):
    """A master_port_range of ports free now, below the kernel's ephemeral range: tests running
    beside this one (a real torchrun among them) bind ports of the default range, and any
    process's outgoing connection may take an ephemeral port, which the daemon then rightly
    skips. Below it only a program that asks for a port by number takes one."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    rng = random.Random()
    for _ in range(100):
        first = rng.randrange(10000, low - size)
        if 29400 <= first + size and first <= 30100:
            continue  # the default master_port_range, used by the daemons of other tests
        probes = []
        try:
            for port in range(first, first + size):
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                probes.append(probe)
                probe.bind(("0.0.0.0", port))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return first, f"{first}-{first + size - 1}"
    raise AssertionError("no free run of ports below the ephemeral range")


def test_concurrent_multi_gpu_jobs_get_different_ports_and_freed_ones_return(make_trainq):
    first, ports_range = own_port_range(4)
    tq = make_trainq(gpus=[gpu(i) for i in range(4)], master_port_range=ports_range)
    go = tq.path("go")
    a = tq.submit("--gpus", "2", cmd=check_job(tq, 2, "a.json", "--wait-file", go))
    b = tq.submit("--gpus", "2", cmd=check_job(tq, 2, "b.json", "--wait-file", go))
    env_a, env_b = seen(tq, "a.json"), seen(tq, "b.json")
    assert env_a["problems"] == [] and env_b["problems"] == []
    ports = {env_a["env"]["MASTER_PORT"], env_b["env"]["MASTER_PORT"]}
    assert ports == {str(first), str(first + 1)}, ports
    gpus_a = set(env_a["env"]["CUDA_VISIBLE_DEVICES"].split(","))
    gpus_b = set(env_b["env"]["CUDA_VISIBLE_DEVICES"].split(","))
    assert not gpus_a & gpus_b
    open(go, "w").close()
    tq.wait_state(a, "succeeded")
    tq.wait_state(b, "succeeded")
    c = tq.submit("--gpus", "2", cmd=check_job(tq, 2, "c.json"))
    tq.wait_state(c, "succeeded")
    assert seen(tq, "c.json")["env"]["MASTER_PORT"] == str(first), "a freed port is reused"


def test_ports_of_running_jobs_are_not_reissued_after_a_daemon_restart(make_trainq):
    tq = make_trainq(gpus=[gpu(i) for i in range(4)])
    go = tq.path("go")
    a = tq.submit("--gpus", "2", cmd=check_job(tq, 2, "a.json", "--wait-file", go))
    port_a = seen(tq, "a.json")["env"]["MASTER_PORT"]
    tq.kill_daemon()
    b = tq.submit("--gpus", "2", cmd=check_job(tq, 2, "b.json", "--wait-file", go))
    port_b = seen(tq, "b.json")["env"]["MASTER_PORT"]
    assert port_a != port_b, "the restarted daemon handed out a port a running job holds"
    open(go, "w").close()
    tq.wait_state(a, "succeeded")
    tq.wait_state(b, "succeeded")


def test_a_master_port_another_program_listens_on_is_skipped(make_trainq):
    """A rendezvous port in use would kill the job with EADDRINUSE: the daemon skips it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    taken = listener.getsockname()[1]
    try:
        tq = make_trainq(gpus=[gpu(i) for i in range(2)],
                         master_port_range=f"{taken}-{taken + 3}")
        job_id = tq.submit("--gpus", "2", cmd=["true"])
        attempt = tq.wait_state(job_id, "succeeded")["attempts"][0]
        assert taken < attempt["master_port"] <= taken + 3
        # With the whole range in use, the job waits and says why.
        tq.run("daemon", "stop")
        tq.write_config({"master_port_range": f"{taken}-{taken}"})
        job_id = tq.submit("--gpus", "2", cmd=["true"])
        reason = wait_for(lambda: (r := tq.show(job_id)["reason"]) and "MASTER_PORT" in r and r,
                          what="the reason")
        assert "in use by other programs" in reason
        listener.close()
        tq.wait_state(job_id, "succeeded")
    finally:
        listener.close()


PORT_RACE_JOB = r"""
import os, sys, time
port, attempt, d = os.environ["MASTER_PORT"], os.environ["TRAINQ_ATTEMPT"], sys.argv[1]
with open(os.path.join(d, f"port-{attempt}"), "w") as f:
    f.write(port)
if attempt == "1":
    while not os.path.exists(os.path.join(d, "taken")):
        time.sleep(0.05)
    # What torchrun's rendezvous store prints when another program bound its port first.
    print(f"RuntimeError: The server socket has failed to bind to [::]:{port} "
          "(errno: 98 - Address already in use).", flush=True)
    sys.exit(1)
"""


def test_a_rendezvous_port_taken_after_placement_queues_the_job_again_with_another(make_trainq):
    # Ports of its own: the port this test takes must be free when it takes it.
    _, ports_range = own_port_range(4)
    tq = make_trainq(gpus=[gpu(i) for i in range(2)], master_port_range=ports_range)
    job_id = tq.submit("--gpus", "2", "--retries", "0",
                       cmd=[sys.executable, "-c", PORT_RACE_JOB, tq.path("")])
    first = int(wait_for(lambda: open(tq.path("port-1")).read() if os.path.exists(
        tq.path("port-1")) else None, what="the first attempt's port"))
    # Another program takes the port between the daemon's check and the job's bind.
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.bind(("::", first))
    listener.listen()
    try:
        open(tq.path("taken"), "w").close()
        job = tq.wait_state(job_id, "succeeded")
        one, two = job["attempts"]
        assert one["state"] == "failed" and not one["oom"]
        assert one["end_reason"].startswith(f"rendezvous port {first} was taken"), one
        assert two["master_port"] != first, "the port another program holds is skipped"
        assert int(open(tq.path("port-2")).read()) == two["master_port"]
    finally:
        listener.close()
