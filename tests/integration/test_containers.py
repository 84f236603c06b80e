"""Jobs in containers with Debian's podman (docs/containers.md), on an image the test makes
itself from Debian's busybox-static with no registry: exit codes, logs, the job's directory
and a read-only mount, a time limit's signal, cancel and kill -9 of the daemon leaving no
container behind, a CPU job seeing no GPU, GPUs isolated by UUID through a test CDI spec, and a
shared daemon running containers with rootless podman as their submitters."""
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import uuid

import pytest

from conftest import free_port, gpu, wait_for

# What this machine's kind needs (cgroup v1 in hybrid mode, a hard RLIMIT_NOFILE): runc, and
# ulimits it may set (docs/containers.md, "Settings").
RUNTIME_ARGS = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit",
                "nproc=1024:1024"]
TOOLS = ["sh", "ls", "cat", "echo", "sleep", "env", "id", "pwd", "touch", "printenv", "trap",
         "true", "false", "mkdir", "sort"]


def podman(*args, check=True):
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120,
                          check=check)


@pytest.fixture(scope="module")
def image():
    """An image made from busybox-static, imported with no registry; its name and a
    `podman save` archive of it."""
    assert shutil.which("podman"), "podman is missing: scripts/deps.sh test installs it"
    busybox = shutil.which("busybox")
    assert busybox, "busybox is missing: scripts/deps.sh test installs busybox-static"
    root = tempfile.mkdtemp(prefix="tq-image-", dir="/tmp")
    rootfs = os.path.join(root, "rootfs")
    os.makedirs(os.path.join(rootfs, "bin"))
    os.makedirs(os.path.join(rootfs, "tmp"))
    shutil.copy(busybox, os.path.join(rootfs, "bin", "busybox"))
    for tool in TOOLS:
        os.symlink("busybox", os.path.join(rootfs, "bin", tool))
    tar = os.path.join(root, "rootfs.tar")
    subprocess.run(["tar", "-C", rootfs, "-cf", tar, "."], check=True)
    name = f"localhost/trainq-test-busybox:{uuid.uuid4().hex[:8]}"
    podman("import", "--change", "ENV PATH=/bin", tar, name)
    archive = os.path.join(root, "busybox.tar")
    podman("save", "-o", archive, name)
    yield name, archive
    podman("rmi", "--force", name, check=False)
    shutil.rmtree(root, ignore_errors=True)


def containers_of(job_id):
    out = podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
    return [n for n in out if n.startswith(f"trainq-{job_id}-")]


@pytest.fixture
def ctq(make_trainq):
    t = make_trainq(gpus=[gpu(i) for i in range(4)], container_runtime="podman",
                    container_runtime_args=RUNTIME_ARGS)
    t.start_daemon()
    return t


def log_of(t, job_id):
    return t.run("logs", str(job_id)).stdout


def ended_with(t, job_id, exit_code):
    """The job's record and log once it ended, having failed with `exit_code`."""
    done = t.wait_state(job_id, ("succeeded", "failed"), timeout=60)
    log = log_of(t, job_id)
    assert done["state"] == "failed" and done["attempts"][0]["exit_code"] == exit_code, (done, log)
    return done, log


def data_dir(t, name, text):
    """A folder of the job's work dir holding f.txt with `text`, to mount."""
    path = t.path(name)
    os.makedirs(path)
    with open(os.path.join(path, "f.txt"), "w") as f:
        f.write(text)
    return path


def test_a_container_job_runs_in_its_directory_with_its_exit_code_and_log(ctq, image):
    name, _ = image
    t = ctq
    data = data_dir(t, "data", "dataset\n")
    script = ("echo hello from $(id -u); pwd; cat /data/f.txt; echo job=$TRAINQ_JOB_ID; "
              "echo cuda=[$CUDA_VISIBLE_DEVICES] nv=$NVIDIA_VISIBLE_DEVICES; "
              "echo path=$PATH; touch out.txt; touch /data/x 2>/dev/null || echo read-only; "
              "exit 7")
    job = t.submit("--gpus", "0", "--image", name, "--mount", f"{data}:/data:ro",
                   cmd=["sh", "-c", script])
    done, log = ended_with(t, job, 7)
    assert "hello from 0" in log and t.work in log, log
    assert "dataset" in log and "read-only" in log, log
    assert f"job={job}" in log, log
    # A CPU job sees no GPU; the host's PATH stays out (the image's is used).
    assert "cuda=[] nv=void" in log, log
    assert "path=/bin" in log, log
    assert os.path.exists(t.path("out.txt")), "the job's directory is mounted writable"
    assert containers_of(job) == [], "a finished job leaves no container"
    shown = t.show(job)
    assert shown["image"] == name and shown["mounts"] == [f"{data}:/data:ro"]
    text = t.run("show", str(job)).stdout
    assert f"image:       {name} (mounts {data}:/data:ro)" in text, text


def test_a_time_limit_signals_the_command_inside_and_cancel_leaves_no_container(ctq, image):
    name, _ = image
    t = ctq
    trap = "trap 'echo got TERM; exit 3' TERM; echo started; while true; do sleep 1; done"
    job = t.submit("--gpus", "0", "--time", "3s", "--image", name, cmd=["sh", "-c", trap])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    log = log_of(t, job)
    assert "started" in log and "got TERM" in log, log
    assert "time limit" in done["attempts"][0]["end_reason"], done
    assert containers_of(job) == []
    job = t.submit("--gpus", "0", "--image", name, cmd=["sleep", "300"])
    t.wait_state(job, "running", timeout=60)
    wait_for(lambda: containers_of(job), timeout=30, what="the container to exist")
    t.run("cancel", str(job))
    t.wait_state(job, "cancelled", timeout=60)
    wait_for(lambda: containers_of(job) == [], timeout=30, what="the container to be removed")


def test_kill_9_of_the_daemon_leaves_the_container_running_and_readopted(ctq, image):
    name, archive = image
    t = ctq
    # An archive too: loaded by the runtime from the file, no registry.
    job = t.submit("--gpus", "0", "--image", archive,
                   cmd=["sh", "-c", "echo up; sleep 4; echo done"])
    t.wait_state(job, "running", timeout=60)
    wait_for(lambda: "up" in log_of(t, job), timeout=30, what="the container's first line")
    t.kill_daemon()
    assert containers_of(job), "the container runs on while the daemon is down"
    t.start_daemon()
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    assert done["state"] == "succeeded", (done, log_of(t, job))
    assert "done" in log_of(t, job)
    assert containers_of(job) == []


# nvidia-smi -L as the NVIDIA toolkit's CDI spec mounts it, over the stand-in GPUs below.
FAKE_NVIDIA_SMI = """#!/bin/sh
i=0
for f in /gpus/*; do echo "GPU $i: Test GPU (UUID: $(cat "$f"))"; i=$((i+1)); done
"""


@pytest.fixture
def cdi_gpus():
    """A test CDI spec whose devices stand in for GPUs: each GPU-sim-I gives a variable and a
    file /gpus/UUID, and nvidia-smi lists the files. `leaky`: every device gives every file,
    as a setup that does not isolate GPUs would. Yields make(leaky) -> the kind."""
    made = []

    def make(leaky=False):
        kind = f"test-{uuid.uuid4().hex[:8]}.trainq.dev/gpu"
        devices_dir = tempfile.mkdtemp(prefix="tq-cdi-", dir="/tmp")
        os.chmod(devices_dir, 0o755)
        smi = os.path.join(devices_dir, "nvidia-smi")
        with open(smi, "w") as f:
            f.write(FAKE_NVIDIA_SMI)
        os.chmod(smi, 0o755)
        paths = []
        for i in range(4):
            paths.append(os.path.join(devices_dir, f"GPU-sim-{i}"))
            with open(paths[-1], "w") as f:
                f.write(f"GPU-sim-{i}\n")
        def mount(path):
            return {"hostPath": path, "containerPath": f"/gpus/{os.path.basename(path)}",
                    "options": ["ro", "bind"]}
        devices = [{"name": f"GPU-sim-{i}", "containerEdits": {
            "env": [f"TEST_GPU_{i}=GPU-sim-{i}"],
            "mounts": [mount(p) for p in paths] if leaky else [mount(paths[i])]}}
            for i in range(4)]
        os.makedirs("/etc/cdi", exist_ok=True)
        spec_path = f"/etc/cdi/{kind.split('/')[0]}.json"
        with open(spec_path, "w") as f:
            json.dump({"cdiVersion": "0.5.0", "kind": kind, "devices": devices,
                       "containerEdits": {"mounts": [{
                           "hostPath": smi, "containerPath": "/usr/bin/nvidia-smi",
                           "options": ["ro", "bind"]}]}}, f)
        made.append((spec_path, devices_dir))
        return kind

    yield make
    for spec_path, devices_dir in made:
        os.unlink(spec_path)
        shutil.rmtree(devices_dir, ignore_errors=True)


def probe_ran(t, job):
    return os.path.exists(os.path.join(t.show(job)["attempts"][0]["run_dir"], "gpu_probe.out"))


def test_kill_9_of_the_shim_stops_and_removes_the_container_like_any_leftover(ctq, image):
    name, _ = image
    t = ctq
    # The log dies with the shim that writes it: the command tells through a file.
    trap = "trap 'echo got TERM > term.txt; exit 3' TERM; echo up; while true; do sleep 1; done"
    job = t.submit("--gpus", "0", "--image", name, cmd=["sh", "-c", trap])
    t.wait_state(job, "running", timeout=60)
    wait_for(lambda: "up" in log_of(t, job), timeout=30, what="the container's first line")
    os.kill(t.show(job)["attempts"][0]["pid"], signal.SIGKILL)
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    reason = done["attempts"][0]["end_reason"]
    # Its processes, outside the attempt's cgroup in the runtime's, were found by the
    # attempt's marker and stopped: SIGTERM reached the command inside.
    assert "shim) died without an exit record" in reason and "stopped" in reason, reason
    assert open(t.path("term.txt")).read() == "got TERM\n"
    wait_for(lambda: containers_of(job) == [], timeout=30, what="the container to be removed")


def test_a_jobs_gpus_are_its_only_ones_by_uuid_through_cdi(make_trainq, image, cdi_gpus):
    name, _ = image
    kind = cdi_gpus()
    t = make_trainq(gpus=[gpu(i) for i in range(4)], container_runtime="podman",
                    container_runtime_args=RUNTIME_ARGS, container_gpu_kind=kind)
    t.start_daemon()
    blocker = t.submit("--gpus", "1", cmd=["sleep", "300"])  # takes GPU 0 on the host
    t.wait_state(blocker, "running", timeout=30)
    job = t.submit("--gpus", "2", "--image", name,
                   cmd=["sh", "-c", "/usr/bin/nvidia-smi -L; ls /gpus; env | sort | grep ^TEST_GPU; "
                                    "echo cuda=$CUDA_VISIBLE_DEVICES"])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    log = log_of(t, job)
    assert done["state"] == "succeeded", log
    uuids = done["attempts"][0]["gpu_uuids"]
    assert len(uuids) == 2 and "GPU-sim-0" not in uuids, uuids
    # nvidia-smi's enumeration, in order, is CUDA's 0 and 1: the job's GPUs by host index.
    listed = [line for line in log.splitlines() if line.startswith("GPU ")]
    assert listed == [f"GPU {i}: Test GPU (UUID: {u})" for i, u in enumerate(sorted(uuids))], log
    assert [line for line in log.splitlines() if line.startswith("GPU-sim-")] == sorted(uuids)
    assert "cuda=0,1" in log, log
    # Each GPU's own variable, and no other GPU's.
    seen = [line.split("=", 1)[1] for line in log.splitlines() if line.startswith("TEST_GPU")]
    assert sorted(seen) == sorted(uuids), log
    # The isolation check ran before this first GPU container job, and not again after.
    assert probe_ran(t, job)
    check = json.load(open(os.path.join(t.state_dir, "container_gpu_check.json")))
    assert check["ok"] is True and kind in check["key"], check
    again = t.submit("--gpus", "1", "--image", name, cmd=["true"])
    assert t.wait_state(again, ("succeeded", "failed"), timeout=60)["state"] == "succeeded"
    assert not probe_ran(t, again)
    t.run("cancel", str(blocker))


def test_simulated_gpus_go_into_a_container_through_trainqs_own_cdi_spec(ctq, image):
    """docs/containers.md, "Without a GPU": on simulated GPUs, with the default
    container_gpu_kind, the daemon writes a CDI spec of its own, so the job's GPU resolves, the
    container holds it and no other, and the isolation check runs for real and passes."""
    name, _ = image
    t = ctq
    blocker = t.submit("--gpus", "1", cmd=["sleep", "300"])  # takes GPU-sim-0 on the host
    t.wait_state(blocker, "running", timeout=30)
    job = t.submit("--gpus", "1", "--image", name,
                   cmd=["sh", "-c", "/usr/bin/nvidia-smi -L; ls /run/trainq-gpus; "
                                    "env | sort | grep ^TRAINQ_SIMULATED_GPU_; "
                                    "echo cuda=$CUDA_VISIBLE_DEVICES"])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    log = log_of(t, job)
    assert done["state"] == "succeeded", (done, log)
    uuids = done["attempts"][0]["gpu_uuids"]
    assert uuids == ["GPU-sim-1"], uuids
    lines = log.splitlines()
    # Exactly its GPU, as nvidia-smi lists it, its one file and its one variable.
    assert [x for x in lines if x.startswith("GPU ")] == [
        "GPU 0: Simulated A100 80GB (UUID: GPU-sim-1)"], log
    assert "0001" in lines and "0000" not in lines, log
    assert [x for x in lines if x.startswith("TRAINQ_SIMULATED_GPU_")] == [
        "TRAINQ_SIMULATED_GPU_1=GPU-sim-1"], log
    assert "cuda=0" in lines, log
    # The check ran before it, in a container given the same device, and passed.
    assert probe_ran(t, job)
    probe = open(os.path.join(t.show(job)["attempts"][0]["run_dir"], "gpu_probe.out")).read()
    assert "(UUID: GPU-sim-1)" in probe and "GPU-sim-0" not in probe, probe
    check = json.load(open(os.path.join(t.state_dir, "container_gpu_check.json")))
    assert check["ok"] is True and ".trainq.dev/gpu" in check["key"], check
    kind = check["key"].split("kind=")[1]
    spec = f"/var/run/cdi/trainq-{kind.split('.')[0]}.json"
    assert json.load(open(spec))["kind"] == kind
    t.run("cancel", str(blocker))
    t.run("daemon", "stop")
    wait_for(lambda: not os.path.exists(spec), timeout=30, what="the daemon to remove its spec")


def test_a_setup_that_does_not_isolate_gpus_is_refused_with_the_reason(make_trainq, image,
                                                                       cdi_gpus):
    name, _ = image
    kind = cdi_gpus(leaky=True)
    t = make_trainq(gpus=[gpu(i) for i in range(4)], container_runtime="podman",
                    container_runtime_args=RUNTIME_ARGS, container_gpu_kind=kind)
    t.start_daemon()
    job = t.submit("--gpus", "1", "--image", name, cmd=["touch", "ran"])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    reason = done["attempts"][0]["end_reason"]
    assert done["state"] == "failed", done
    assert ("GPU isolation failed: a container given GPUs GPU-sim-0 lists GPU-sim-0, GPU-sim-1, "
            "GPU-sim-2, GPU-sim-3 (also GPU-sim-1, GPU-sim-2, GPU-sim-3)") in reason, reason
    assert not os.path.exists(t.path("ran")), "the job's command never ran"
    # Later GPU container jobs are refused with the same reason, without probing again; CPU
    # container jobs and host jobs run.
    later = t.submit("--gpus", "1", "--image", name, cmd=["touch", "ran"])
    done = t.wait_state(later, ("succeeded", "failed"), timeout=60)
    assert done["attempts"][0]["end_reason"] == "container did not start: trainq: " + \
        reason.split("could not start: ", 1)[-1], done
    assert not probe_ran(t, later) and not os.path.exists(t.path("ran"))
    cpu = t.submit("--gpus", "0", "--image", name, cmd=["true"])
    assert t.wait_state(cpu, ("succeeded", "failed"), timeout=60)["state"] == "succeeded"
    host = t.submit("--gpus", "1", cmd=["true"])
    assert t.wait_state(host, ("succeeded", "failed"), timeout=60)["state"] == "succeeded"


def test_a_container_that_cannot_start_says_why_in_the_runtimes_words(ctq, image):
    t = ctq
    missing = f"localhost/trainq-no-such-image:{uuid.uuid4().hex[:8]}"
    job = t.submit("--gpus", "0", "--image", missing, cmd=["true"])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    reason = done["attempts"][0]["end_reason"]
    said = [line for line in log_of(t, job).splitlines() if line.startswith("Error: ")]
    assert said and reason == "container did not start: " + said[-1], (reason, said)
    assert missing in reason, reason  # never pulled: container_pull is "never"
    assert containers_of(job) == []


def test_what_a_container_job_cannot_use_is_refused_at_submit(ctq, image):
    t = ctq
    for opts, says in [
        (["--image", "x y"], "--image: 'x y' is not an image"),
        (["--mount", "/data:/d"], "--image: --mount, --shm-size and --container-workdir are"),
        (["--image", "img", "--mount", "/nonexistent-dir:/d"],
         "--mount: /nonexistent-dir does not exist"),
        (["--image", "img", "--mount", "/tmp:d"], "--mount: '/tmp:d' is not SRC:DST"),
        (["--image", "/etc/hostname"], "is not a tar archive"),
        (["--image", "img", "--shm-size", "lots"], "--shm-size"),
    ]:
        p = t.run("submit", "--gpus", "0", *opts, "--", "true", check=False)
        assert p.returncode == 2 and says in p.stderr, (opts, p.stderr)


SBATCH = """#!/bin/sh
#SBATCH --container-image=IMAGE
#SBATCH --container-mounts=DATA:/data:ro
#SBATCH --container-workdir=/data
#SBATCH --container-mount-home
pwd; cat f.txt
"""


def test_sbatch_takes_pyxis_container_options(ctq, image):
    name, _ = image
    t = ctq
    data = data_dir(t, "d", "from the mount\n")
    with open(t.path("c.sbatch"), "w") as f:
        f.write(SBATCH.replace("IMAGE", name).replace("DATA", data))
    p = t.run("sbatch", "--parsable", "c.sbatch")
    assert "--container-mount-home is not honoured" in p.stderr, p.stderr
    job = int(p.stdout)
    done = t.wait_state(job, ("succeeded", "failed"), timeout=60)
    out = open(t.path(f"slurm-{job}.out")).read()
    assert done["state"] == "succeeded", out
    assert "/data" in out and "from the mount" in out, out


ALL_REDUCE = """import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {t.item()}", flush=True)
dist.destroy_process_group()
"""
TORCH_IMAGE = "localhost/trainq-torch:1"


def test_a_pytorch_gloo_all_reduce_runs_in_a_container(make_trainq):
    """Debian's python3-torch in an image made from this machine's files (scripts/torch-image.sh,
    `make torch-image`: about 35 s and 900 MB here), torchrun with two ranks inside one job."""
    if podman("image", "exists", TORCH_IMAGE, check=False).returncode != 0:
        build = subprocess.run(["scripts/torch-image.sh", TORCH_IMAGE], capture_output=True,
                               text=True, timeout=600,
                               cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                                   os.path.abspath(__file__)))))
        assert build.returncode == 0, build.stderr
    t = make_trainq(gpus=[gpu(0)], container_runtime="podman",
                    container_runtime_args=RUNTIME_ARGS)
    t.start_daemon()
    with open(t.path("ar.py"), "w") as f:
        f.write(ALL_REDUCE)
    # Debian's torch 1.13 on Python 3.11 needs torchrun's --redirects/--tee set (cluster.md).
    job = t.submit("--gpus", "0", "--cpus", "2", "--image", TORCH_IMAGE,
                   "--env", "PET_REDIRECTS=9:1", "--env", "PET_TEE=9:1",
                   cmd=["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2",
                        "--master_port", str(free_port()), "ar.py"])
    done = t.wait_state(job, ("succeeded", "failed"), timeout=180)
    log = log_of(t, job)
    assert done["state"] == "succeeded", log
    assert "rank 0 of 2: sum 3.0" in log and "rank 1 of 2: sum 3.0" in log, log


@pytest.fixture
def rootless_user():
    """A local user with a home (rootless podman keeps its images there) and the subordinate
    ids Debian's useradd gives; removed with its podman processes and storage."""
    name = f"tqk{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-m", "-U", "-s", "/bin/sh", name], check=True)
    yield pwd.getpwnam(name)
    subprocess.run(["pkill", "-KILL", "-u", name], check=False)
    subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


def test_a_shared_daemon_runs_a_container_rootless_as_its_submitter(rootless_user, image):
    """docs/containers.md, "On a shared server": rootless podman as the submitter, so the
    container's root is that user on the host; what the user cannot read is refused."""
    from test_shared import Shared
    name, archive = image
    user = rootless_user
    admins = f"tqadm{uuid.uuid4().hex[:6]}"
    subprocess.run(["groupadd", admins], check=True)
    s = Shared({"ada": user, "admins": admins}, container_runtime="podman",
               container_runtime_args=RUNTIME_ARGS)
    try:
        s.start()
        mine = os.path.join(s.work, "env.tar")  # the user's copy: a file they may read
        shutil.copy(archive, mine)
        data = os.path.join(s.work, "data")
        os.makedirs(data)
        with open(os.path.join(data, "f.txt"), "w") as f:
            f.write("mounted\n")
        job = s.submit_as("ada", "--gpus", "0", "--image", mine, "--mount", f"{data}:/data:ro",
                          cmd=["sh", "-c", "echo inside=$(id -u); cat /data/f.txt; touch made"])
        done = s.wait_state(job, ("succeeded", "failed"))
        log = s.trainq_as("ada", "logs", str(job), check=0).stdout
        assert done["state"] == "succeeded", (done, log)
        assert "inside=0" in log and "mounted" in log, log
        # The container's root is the submitter on the host, never root.
        made = os.stat(os.path.join(s.work, "made"))
        assert (made.st_uid, made.st_gid) == (user.pw_uid, user.pw_gid), made
        # The container lived in the user's podman, and is gone from it and from root's.
        theirs = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"],
                                user=user.pw_uid, group=user.pw_gid, cwd=user.pw_dir,
                                env={"HOME": user.pw_dir, "PATH": "/usr/bin:/bin"},
                                capture_output=True, text=True, timeout=60)
        assert theirs.returncode == 0, theirs.stderr
        assert not [n for n in theirs.stdout.split() if n.startswith(f"trainq-{job}-")]
        assert containers_of(job) == []
        # What the user may not read is refused at submit, naming it; nothing is stored.
        secret = tempfile.mkdtemp(prefix="tq-secret-", dir="/tmp")  # 0700, root's
        hidden = os.path.join(secret, "env.tar")
        shutil.copy(archive, hidden)
        os.chmod(hidden, 0o644)
        before = len(json.loads(s.trainq_as("root", "ls", "--all", "--json", check=0).stdout))
        for opts, says in [
                (["--image", name, "--mount", f"{secret}:/s:ro"],
                 f"--mount: user {user.pw_name} may not read {secret} (drwx------ root root)"),
                (["--image", hidden], f"--image: user {user.pw_name} may not enter {secret}")]:
            r = s.trainq_as("ada", "submit", "--gpus", "0", *opts, "--", "true")
            assert r.returncode == 2 and says in r.stderr, (opts, r.stderr)
        after = len(json.loads(s.trainq_as("root", "ls", "--all", "--json", check=0).stdout))
        assert after == before
        shutil.rmtree(secret, ignore_errors=True)
    finally:
        s.cleanup()
        subprocess.run(["groupdel", admins], check=False)


def test_a_cluster_places_a_job_on_the_node_whose_store_holds_its_image(make_cluster, image):
    """docs/containers.md, "In a cluster": each node reports its store's image names, and a
    job goes to a node that holds its image before one that would load it."""
    name, archive = image
    root = tempfile.mkdtemp(prefix="tq-stores-", dir="/tmp")
    confs = {}
    for node in ("node0", "node1"):  # a store of its own for each node's daemon
        graph, run = os.path.join(root, node, "graph"), os.path.join(root, node, "run")
        confs[node] = os.path.join(root, node, "storage.conf")
        os.makedirs(graph)
        with open(confs[node], "w") as f:
            f.write(f'[storage]\ndriver = "vfs"\ngraphroot = "{graph}"\nrunroot = "{run}"\n')
    podman("--storage-driver", "vfs", "--root", os.path.join(root, "node1", "graph"),
           "--runroot", os.path.join(root, "node1", "run"), "load", "-i", archive)
    try:
        cluster = make_cluster(2, gpus=[gpu(0)], container_runtime="podman",
                               container_runtime_args=RUNTIME_ARGS, container_gpu_check=False,
                               container_gpu_kind="")
        for node in ("node0", "node1"):
            t = cluster.node(node)
            t.env["CONTAINERS_STORAGE_CONF"] = confs[node]
            t.kill_daemon()
            t.start_daemon()
            del t.env["CONTAINERS_STORAGE_CONF"]  # jobs run from the usual store, which has it
        a = cluster.node("node0")

        def images():
            listing = {n["name"]: n for n in cluster.listing(a)["nodes"]}
            return listing if len(listing) == 2 and listing["node1"]["images"] else None
        listing = wait_for(images, timeout=30, what="node1 to report its image")
        assert listing["node1"]["images"] == [name] and listing["node0"]["images"] == [], listing
        # Both nodes are alike otherwise; without the image rule the first by name would win.
        for cmd in (["true"], ["true"]):
            job = a.submit("--gpus", "1", "--image", name, cmd=cmd)
            done = a.wait_state(job, ("succeeded", "failed"), timeout=60)
            assert done["state"] == "succeeded", (done, cluster.logs())
            assert cluster.node_of(done) == "node1", done
        plain = a.submit("--gpus", "1", cmd=["true"])
        assert cluster.node_of(a.wait_state(plain, "succeeded", timeout=60)) == "node0"
        # An archive is known by the names inside it; a node that lacks them loads it first
        # and the job's log says so before anything else.
        job = a.submit("--gpus", "1", "--image", archive, cmd=["echo", "ran"])
        assert cluster.node_of(a.wait_state(job, "succeeded", timeout=60)) == "node1"
        assert a.show(job)["image"] == archive
        job = a.submit("--gpus", "1", "--node", "node0", "--image", archive, cmd=["echo", "ran"])
        a.wait_state(job, "succeeded", timeout=60)
        assert log_of(a, job).splitlines() == [
            f"trainq: node node0 loads {archive} first: its container store holds none of "
            f"{name}", "ran"], log_of(a, job)
    finally:
        podman("--storage-driver", "vfs", "--root", os.path.join(root, "node1", "graph"),
               "--runroot", os.path.join(root, "node1", "run"), "rmi", "--all", "--force",
               check=False)
        shutil.rmtree(root, ignore_errors=True)
