"""The cluster as docs/cluster.md sets it up — shared nodes with TLS, each with its own
certificate and the nodes' CA in `tls_ca`, the cluster key, the docs' ACL — used by ordinary
users: code and data shipped to another node, what a node does when it cannot verify the node
that holds a job's files, and what other users may read."""
import json
import os
import re
import stat
import subprocess
import time

from conftest import trainq_binary, wait_for
from doc_cluster import doc_cluster  # noqa: F401 (the fixture)
from test_cluster_docs import DOC, block_after


def run_as(node, name, *args, cwd=None, home=None):
    """`trainq ARGS` as the person `name`, in `cwd` (default: the node's work dir), with
    `home` as HOME (default: the node's work dir)."""
    user = node.people[name]
    env = node.env_of(user)
    if home:
        env["HOME"] = home
    return subprocess.run([trainq_binary(), *args], env=env, cwd=cwd or node.work,
                          capture_output=True, text=True, timeout=60, umask=0o022,
                          user=user.pw_uid, group=user.pw_gid)


def as_user(user, *argv, cwd):
    subprocess.run(list(argv), cwd=cwd, check=True, capture_output=True, user=user.pw_uid,
                   group=user.pw_gid, env={"PATH": "/usr/bin:/bin", "HOME": cwd})


def private_project(node, user):
    """A git work tree of `user`'s that no one else may enter, and a dataset beside it."""
    root = os.path.join(node.work, f"{user.pw_name}-home")
    os.mkdir(root, 0o700)
    os.chown(root, user.pw_uid, user.pw_gid)
    repo = os.path.join(root, "proj")
    as_user(user, "mkdir", "-p", repo, os.path.join(root, "dataset"), cwd=root)
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("import os\n"
                "print('read', open('data/set/part0').read().strip())\n"
                "print('cwd', os.getcwd())\n"
                "print('data at', os.path.realpath('data/set'))\n"
                "open('out.txt', 'w').write('trained\\n')\n")
    with open(os.path.join(root, "dataset", "part0"), "w") as f:
        f.write("the dataset's first part\n")
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", root], check=True)
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    as_user(user, *git, "init", "-q", cwd=repo)
    as_user(user, *git, "add", ".", cwd=repo)
    as_user(user, *git, "commit", "-q", "-m", "first", cwd=repo)
    return repo, os.path.join(root, "dataset")


def test_an_ordinary_user_ships_code_and_data_to_another_shared_node(doc_cluster):
    c = doc_cluster()
    c.start()
    gpu1, gpu2 = c.nodes["gpu1"], c.nodes["gpu2"]
    ada = gpu1.people["ada"]
    repo, dataset = private_project(gpu1, ada)
    results = os.path.join(os.path.dirname(repo), "results")
    sub = run_as(gpu1, "ada", "submit", "--snapshot", "--node", "gpu2", "--stage",
                 f"{dataset}:data/set", "--collect", "out.txt", "--collect-to", results, "--",
                 "python3", "train.py", cwd=repo, home=os.path.dirname(repo))
    assert sub.returncode == 0, sub
    job_id = int(sub.stdout.strip())
    job = gpu1.wait_state(job_id, ("succeeded", "failed"))
    log = run_as(gpu1, "ada", "logs", str(job_id)).stdout
    assert job["state"] == "succeeded", (job, log, c.logs())
    assert job["attempts"][-1]["node"] == "gpu2"
    assert "read the dataset's first part" in log, log
    staged = os.path.join(gpu2.state_dir, "staged")
    cwd = re.search(r"^cwd (\S+)$", log, re.M).group(1)
    data = re.search(r"^data at (\S+)$", log, re.M).group(1)
    assert cwd.startswith(f"{staged}/{job_id}/"), log
    assert data.startswith(f"{staged}/shared/{ada.pw_uid}/"), log
    # What the job wrote came back, as the user's (through collected/, which the user passes
    # through to, too).
    out = os.path.join(results, "out.txt")
    wait_for(lambda: os.path.exists(out), what="out.txt to be collected")
    assert os.stat(out).st_uid == ada.pw_uid
    # Users pass through the state dir to their trees; everything else in it is root's alone.
    for node in (gpu1, gpu2):
        assert stat.S_IMODE(os.stat(node.state_dir).st_mode) == 0o711
        for entry in os.listdir(node.state_dir):
            st = os.lstat(os.path.join(node.state_dir, entry))
            if entry in ("staged", "collected") or stat.S_ISLNK(st.st_mode):
                continue
            if entry == "sessions":  # users pass through to their sessions' sockets (0600 each)
                assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o711, 0), (node.name, entry)
                continue
            assert st.st_mode & 0o077 == 0, (node.name, entry, oct(st.st_mode))
    # Another user can reach neither ada's tree nor her data.
    bob = gpu1.people["bob"]
    peek = subprocess.run(["cat", os.path.join(data, "part0")], capture_output=True,
                          user=bob.pw_uid, group=bob.pw_gid)
    assert peek.returncode != 0, peek


def test_the_nodes_trust_each_other_through_tls_ca_in_their_config(doc_cluster):
    c = doc_cluster()
    for n in c.nodes.values():
        text = open(os.path.join(n.state_dir, "config.toml")).read()
        assert f'tls_ca = "{c.ca_file}"' in text, text
        assert "TRAINQ_CA" not in n.extra_env
    c.start()
    gpu1, gpu2 = c.nodes["gpu1"], c.nodes["gpu2"]
    # A node's log read through another node is a peer call that verifies the other's
    # certificate against tls_ca.
    job_id = gpu1.submit_as("ada", "--gpus", "0", "--node", "gpu2", cmd=["echo", "from gpu2"])
    gpu1.wait_state(job_id, "succeeded")
    logs = gpu1.trainq_as("ada", "logs", str(job_id), check=0)
    assert "from gpu2" in logs.stdout, (logs, c.logs())


def test_check_config_names_a_tls_ca_it_cannot_use(doc_cluster):
    c = doc_cluster()
    gpu1 = c.nodes["gpu1"]
    path = os.path.join(gpu1.state_dir, "config.toml")
    text = open(path).read()
    for bad, why in [(os.path.join(gpu1.root, "missing.pem"), "missing.pem"),
                     (gpu1.key, "no certificate")]:
        with open(path, "w") as f:
            f.write(text.replace(f'tls_ca = "{c.ca_file}"', f'tls_ca = "{bad}"'))
        check = subprocess.run([trainq_binary().replace("/trainq", "/trainqd"), "--check-config",
                                "--shared", "--state-dir", gpu1.state_dir],
                               capture_output=True, text=True, timeout=30)
        assert check.returncode != 0 and "tls_ca" in check.stderr and why in check.stderr, check


def test_a_node_that_cannot_verify_the_holder_ends_the_attempt_at_once(doc_cluster):
    """The setup without tls_ca: per-node self-signed certificates the nodes cannot verify.
    The node the job must run on refuses the holder's certificate: a refusal is not retried,
    the attempt ends naming tls_ca, and, with no other node the job may use, it fails."""
    c = doc_cluster()
    for n in c.nodes.values():
        n.ca_file = ""
        n.write_config()
    c.start()
    gpu1 = c.nodes["gpu1"]
    dataset = os.path.join(gpu1.work, "dataset.txt")
    with open(dataset, "w") as f:
        f.write("bytes\n")
    os.chmod(dataset, 0o644)
    started = time.monotonic()
    job_id = gpu1.submit_as("ada", "--gpus", "0", "--stage", f"{dataset}:d.txt",
                            "--node", "gpu2", cmd=["cat", "d.txt"])
    job = gpu1.wait_state(job_id, ("succeeded", "failed"))
    took = time.monotonic() - started
    first = job["attempts"][0]
    assert job["state"] == "failed" and first["node"] == "gpu2", job
    assert "does not verify" in first["end_reason"] and "tls_ca" in first["end_reason"], first
    assert "no other node it may use is left" in job["reason"], job
    assert took < 30, took


def test_a_batch_script_is_read_by_its_owner_and_admins_only(doc_cluster):
    c = doc_cluster()
    c.start()
    gpu1 = c.nodes["gpu1"]
    ada = gpu1.people["ada"]
    home = os.path.join(gpu1.work, f"{ada.pw_name}-scripts")
    os.mkdir(home, 0o700)
    script = os.path.join(home, "train.sbatch")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n#SBATCH -J secretive\nexport WANDB_API_KEY=wandb-secret-0042\n"
                "echo ran\n")
    os.chmod(script, 0o700)
    subprocess.run(["chown", "-R", f"{ada.pw_uid}:{ada.pw_gid}", home], check=True)
    sub = run_as(gpu1, "ada", "sbatch", "--parsable", script, cwd=home)
    assert sub.returncode == 0, sub
    job_id = int(sub.stdout.strip().split(";")[0])
    gpu1.wait_state(job_id, "succeeded")
    secret = "wandb-secret-0042"

    def seen_by(name, *args):
        proc = gpu1.trainq_as(name, *args, check=0)
        return secret in proc.stdout

    for args in (("show", "--json", str(job_id)), ("ls", "--all", "--json")):
        assert seen_by("ada", *args), args        # the owner
        assert seen_by("carol", *args), args      # an admin
        assert not seen_by("bob", *args), args    # anyone else
    shown = json.loads(gpu1.trainq_as("bob", "show", "--json", str(job_id), check=0).stdout)
    assert shown["command"][4] == "(hidden)" and shown["record"]["sbatch"]["script"] == script
    # A read token of bob's (the dashboard's way in) gets the same answer over TLS.
    token = gpu1.trainq_as("root", "token", "create", "bob-view", "--role", "read", "--user",
                           gpu1.people["bob"].pw_name, check=0).stdout.strip()
    env = {"PATH": "/usr/bin:/bin", "HOME": gpu1.work, "TRAINQ_TOKEN": token,
           "TRAINQ_SERVER": f"https://127.0.0.1:{gpu1.port}", "TRAINQ_CA": c.ca_file}
    remote = gpu1.trainq_as("root", "show", "--json", str(job_id), env=env, check=0)
    assert json.loads(remote.stdout)["user"] == ada.pw_name and secret not in remote.stdout


def test_an_admins_cancel_is_recorded_as_the_admins(doc_cluster):
    c = doc_cluster()
    c.start()
    gpu1, gpu2 = c.nodes["gpu1"], c.nodes["gpu2"]
    carol = gpu1.people["carol"].pw_name
    here = gpu1.submit_as("ada", "--gpus", "0", "--node", "gpu1", cmd=["sleep", "60"])
    waiting = gpu1.submit_as("ada", "--gpus", "0", "--after", str(here), cmd=["true"])
    there = gpu1.submit_as("ada", "--gpus", "0", "--node", "gpu2", cmd=["sleep", "60"])
    for job_id in (here, there):
        gpu1.wait_state(job_id, "running")
    for job_id in (waiting, here, there):
        gpu1.trainq_as("carol", "cancel", str(job_id), check=0)
    assert gpu1.wait_state(waiting, "cancelled")["reason"] == f"cancelled by {carol}"
    for job_id in (here, there):  # one on the node asked, one on another node
        job = gpu1.wait_state(job_id, "cancelled")
        assert job["attempts"][-1]["end_reason"] == f"cancelled by {carol}", job
    # The owner's own cancel names the owner.
    mine = gpu2.submit_as("ada", "--gpus", "0", "--node", "gpu2", cmd=["sleep", "60"])
    gpu2.wait_state(mine, "running")
    gpu2.trainq_as("ada", "cancel", str(mine), check=0)
    ada = gpu1.people["ada"].pw_name
    assert gpu2.wait_state(mine, "cancelled")["attempts"][-1]["end_reason"] == f"cancelled by {ada}"


def test_hold_of_another_users_job_is_refused_naming_hold(doc_cluster):
    c = doc_cluster(names=("gpu1",))
    c.start()
    gpu1 = c.nodes["gpu1"]
    first = gpu1.submit_as("ada", "--gpus", "0", cmd=["sleep", "30"])
    job_id = gpu1.submit_as("ada", "--gpus", "0", "--after-any", str(first), cmd=["true"])
    refused = gpu1.trainq_as("bob", "hold", str(job_id))
    assert refused.returncode != 0, refused
    assert "may update, hold or release it" in refused.stderr, refused.stderr
    # An admin's hold names the admin, and keeps doing so once the job waits to start.
    gpu1.trainq_as("carol", "hold", str(job_id), check=0)
    gpu1.trainq_as("ada", "cancel", str(first), check=0)
    carol = gpu1.people["carol"].pw_name
    wait_for(lambda: gpu1.show(job_id)["state"] == "queued", what="the job to wait to start")
    time.sleep(1)  # a few passes
    reason = gpu1.show(job_id)["reason"]
    assert reason.startswith(f"held by {carol}: no pass starts it"), \
        reason


def test_a_lost_node_is_removed_by_an_admin_and_not_while_up(doc_cluster):
    c = doc_cluster(names=("gpu1", "gpu2", "gpu3"))
    c.start()
    gpu1, gpu3 = c.nodes["gpu1"], c.nodes["gpu3"]
    up = gpu1.trainq_as("root", "node", "remove", "gpu3")
    assert up.returncode != 0 and "is up; only a lost node can be removed" in up.stderr, up
    assert gpu1.trainq_as("ada", "node", "remove", "gpu3").returncode != 0  # admins only
    gpu3.daemon.kill()
    gpu3.daemon.wait()
    wait_for(lambda: {n["name"]: n["state"] for n in c.listing(gpu1)["nodes"]}.get("gpu3")
             == "lost", timeout=40, what="gpu3 judged lost")
    gone = gpu1.trainq_as("carol", "node", "remove", "gpu3", check=0)
    assert "node gpu3 removed" in gone.stdout, gone
    assert sorted(n["name"] for n in c.listing(gpu1)["nodes"]) == ["gpu1", "gpu2"]
    unknown = gpu1.trainq_as("root", "node", "remove", "gpu9")
    assert unknown.returncode != 0 and "no node gpu9" in unknown.stderr, unknown


def documented_slurm_script():
    """docs/workflow.md's two-node script ("srun and scontrol"): torchrun's c10d rendezvous on
    the first node's name."""
    with open(os.path.join(os.path.dirname(DOC), "workflow.md")) as f:
        text = f.read()
    start = text.index("### srun and scontrol")
    m = re.compile(r"^```sh\n(.*?)^```", re.M | re.S).search(text, start)
    return m.group(1)


def test_two_nodes_on_one_machine_as_the_recipe_says(doc_cluster):
    """docs/cluster.md, "Two nodes on one machine": each node's daemon with the node's name as
    its host name and /etc/hosts naming both; the docs' Slurm script rendezvouses on the first
    node's name (torch's c10d store is hosted where that name is the host name)."""
    c = doc_cluster()
    hosts = os.path.join(c.root, "hosts")
    recipe = block_after("### Two nodes on one machine", "console")
    line = next(l for l in recipe if "/etc/hosts" in l)
    entry = re.search(r"'([^']*)'", line).group(1)
    assert entry == "127.0.0.1 gpu1 gpu2", line
    assert any("unshare --uts" in l for l in recipe), recipe
    with open("/etc/hosts") as f, open(hosts, "w") as out:
        out.write(f.read() + entry + "\n")
    os.chmod(hosts, 0o644)
    for n in c.nodes.values():
        n.own_host_name(hosts)
    c.start()
    gpu1 = c.nodes["gpu1"]
    ada = gpu1.people["ada"]
    work = os.path.join(gpu1.work, "ddp")
    os.mkdir(work)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write("import os, socket, torch, torch.distributed as dist\n"
                "dist.init_process_group('gloo')\n"
                "x = torch.tensor([float(dist.get_rank() + 1)])\n"
                "dist.all_reduce(x)\n"
                "print('rank', os.environ['RANK'], 'on', socket.gethostname(), 'sum', x.item(),"
                " flush=True)\n"
                "dist.destroy_process_group()\n")
    script = documented_slurm_script()
    # One simulated GPU per node here; Debian's torch 1.13 needs its --redirects workaround
    # (docs/cluster.md, "Gang jobs across nodes").
    old = "#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-task=4 --cpus-per-task=8"
    assert old in script, script
    script = script.replace(old, "#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-task=1 "
                                 "--cpus-per-task=1\nexport PET_REDIRECTS=9:1 PET_TEE=9:1")
    with open(os.path.join(work, "job.sbatch"), "w") as f:
        f.write(script)
    subprocess.run(["chown", "-R", f"{ada.pw_uid}:{ada.pw_gid}", work], check=True)
    sub = run_as(gpu1, "ada", "sbatch", "--parsable", "job.sbatch", cwd=work)
    assert sub.returncode == 0, sub
    job_id = int(sub.stdout.strip().split(";")[0])
    job = wait_for(lambda: (lambda j: j if j["state"] in ("succeeded", "failed") else None)(
        gpu1.show(job_id)), timeout=180, what="the two-node job to end")
    logs = gpu1.trainq_as("ada", "logs", str(job_id), check=0).stdout
    assert job["state"] == "succeeded", (job, logs, c.logs())
    assert "rank 0 on gpu1 sum 3.0" in logs or "rank 0 on gpu2 sum 3.0" in logs, logs
    assert re.search(r"rank 1 on gpu\d sum 3\.0", logs), logs
    assert sorted(p["node"] for p in job["attempts"][-1]["parts"]) == ["gpu1", "gpu2"], job
