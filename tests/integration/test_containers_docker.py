"""Container jobs with Debian's docker (docs/containers.md): a dockerd of the test's own on a
private socket, the busybox image loaded from a `podman save` archive, and what the podman
tests check that differs with a daemon-run container: the exit code, the log, a read-only
mount, a time limit's signal, cancel and kill -9 of the shim leaving no container, kill -9 of
trainqd and re-adoption, an archive refused at submit, a CPU job seeing no GPU."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import gpu, wait_for
from test_containers import ended_with, image, log_of  # noqa: F401 (image: a fixture)


@pytest.fixture(scope="module")
def dockerd():
    """A dockerd as this machine kind allows it (no iptables, no bridge, vfs), or a skip that
    says why it cannot run here."""
    assert shutil.which("dockerd"), "dockerd is missing: scripts/deps.sh test installs docker.io"
    root = tempfile.mkdtemp(prefix="tq-dockerd-", dir="/tmp")
    sock = os.path.join(root, "docker.sock")
    log = open(os.path.join(root, "dockerd.log"), "w")
    proc = subprocess.Popen(
        ["dockerd", "--data-root", os.path.join(root, "data"), "--exec-root",
         os.path.join(root, "exec"), "--pidfile", os.path.join(root, "docker.pid"),
         "-H", "unix://" + sock, "--iptables=false", "--ip6tables=false", "--bridge=none",
         "--storage-driver=vfs"], stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, DOCKER_HOST="unix://" + sock)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        said = open(os.path.join(root, "dockerd.log")).read()[-500:]
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"dockerd cannot run on this machine: {said}")
    yield env
    proc.terminate()
    proc.wait(timeout=30)
    subprocess.run(["umount", "-R", os.path.join(root, "exec")], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def docker(env, *args):
    return subprocess.run(["docker", *args], env=env, capture_output=True, text=True, timeout=120)


def containers_of(env, job_id):
    out = docker(env, "ps", "-a", "--format", "{{.Names}}").stdout.split()
    return [n for n in out if n.startswith(f"trainq-{job_id}-")]


@pytest.fixture
def dtq(make_trainq, dockerd, image):
    name, archive = image
    loaded = docker(dockerd, "load", "-i", archive)
    assert loaded.returncode == 0, loaded.stderr
    # docker 20.10 has no CDI: GPUs go by NVIDIA_VISIBLE_DEVICES to its NVIDIA runtime.
    t = make_trainq(gpus=[gpu(i) for i in range(2)], container_runtime="docker",
                    container_runtime_args=["--ulimit", "nofile=1024:1024"],
                    container_gpu_kind="",
                    # TERM goes from the runtime's client through docker-init to the command;
                    # on a loaded machine that takes longer than the tests' usual 1s grace.
                    grace_period="10s")
    t.env["DOCKER_HOST"] = dockerd["DOCKER_HOST"]  # the client's, passed to the job's
    t.start_daemon()
    return t, dockerd


def test_a_docker_job_is_its_container_from_exit_code_to_cleanup(dtq, image):
    t, env = dtq
    name, archive = image
    data = t.path("data")
    os.makedirs(data)
    with open(os.path.join(data, "f.txt"), "w") as f:
        f.write("mounted\n")
    script = ("cat /data/f.txt; touch out.txt; touch /data/x 2>/dev/null || echo read-only; "
              "echo cuda=[$CUDA_VISIBLE_DEVICES] nv=$NVIDIA_VISIBLE_DEVICES; exit 3")
    job = t.submit("--gpus", "0", "--image", name, "--mount", f"{data}:/data:ro",
                   cmd=["sh", "-c", script])
    _, log = ended_with(t, job, 3)
    assert "mounted" in log and "read-only" in log and "cuda=[] nv=void" in log, log
    assert os.path.exists(t.path("out.txt"))
    wait_for(lambda: containers_of(env, job) == [], timeout=30, what="the container removed")
    # A time limit's SIGTERM reaches the command inside; cancel leaves no container.
    trap = "trap 'echo got TERM; exit 3' TERM; echo up; while true; do sleep 1 & wait; done"
    job = t.submit("--gpus", "0", "--time", "3s", "--image", name, cmd=["sh", "-c", trap])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    assert "got TERM" in log_of(t, job) and "time limit" in done["attempts"][0]["end_reason"]
    wait_for(lambda: containers_of(env, job) == [], timeout=30, what="the container removed")
    job = t.submit("--gpus", "0", "--image", name, cmd=["sleep", "300"])
    wait_for(lambda: containers_of(env, job), timeout=30, what="the container to exist")
    t.run("cancel", str(job))
    t.wait_state(job, "cancelled", timeout=60)
    wait_for(lambda: containers_of(env, job) == [], timeout=30, what="the container removed")
    # docker reads no archive: refused at submit, saying what to do.
    p = t.run("submit", "--gpus", "0", "--image", archive, "--", "true", check=False)
    assert p.returncode == 2 and "with docker, load it first (docker load -i" in p.stderr


def test_kill_9_of_trainqd_or_of_the_shim_with_a_docker_container(dtq, image):
    t, env = dtq
    name, _ = image
    job = t.submit("--gpus", "0", "--image", name,
                   cmd=["sh", "-c", "echo up; sleep 4; echo done"])
    wait_for(lambda: "up" in log_of(t, job), timeout=30, what="the container's first line")
    t.kill_daemon()
    assert containers_of(env, job), "the container runs on while trainqd is down"
    t.start_daemon()
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    assert done["state"] == "succeeded" and "done" in log_of(t, job), done
    wait_for(lambda: containers_of(env, job) == [], timeout=30, what="the container removed")
    # The shim killed: the container, a child of docker's daemon, is found by the attempt's
    # marker, stopped and removed.
    trap = "trap 'echo got TERM > term.txt; exit 3' TERM; echo up; while true; do sleep 1; done"
    job = t.submit("--gpus", "0", "--image", name, cmd=["sh", "-c", trap])
    wait_for(lambda: "up" in log_of(t, job), timeout=30, what="the container's first line")
    os.kill(t.show(job)["attempts"][0]["pid"], signal.SIGKILL)
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    assert "stopped" in done["attempts"][0]["end_reason"], done
    assert open(t.path("term.txt")).read() == "got TERM\n"
    wait_for(lambda: containers_of(env, job) == [], timeout=30, what="the container removed")
