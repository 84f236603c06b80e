"""The Debian package as an admin meets it (docs/operations.md, "Installing the package"):
`make deb` from this tree, its files and lintian's verdict, `apt-get install` on this machine,
a job that runs across an upgrade to a second build of the tree (one that differs in its
version), a downgrade that meets a newer database, and `apt-get purge`.

The package is installed on this machine and purged at the end, so this file runs alone,
after the integration tests (`make package-test`), as root."""
import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time

import pytest

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# The version a second build of the tree reports: dpkg orders it after the tree's own.
NEXT_SUFFIX = "+next1"
APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
SYSTEMD_UNIT = "/usr/lib/systemd/system/trainqd.service"


def sh(*args, check=True, timeout=600, **kw):
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def project_version():
    text = open(os.path.join(SRC, "CMakeLists.txt")).read()
    return re.search(r"project\(trainq VERSION ([0-9.]+)", text).group(1)


def make_deb(out_dir, version=None):
    """`make deb` (with VERSION= for the second build); the package, copied to out_dir."""
    args = ["make", "-C", SRC, "-s", "deb"] + ([f"VERSION={version}"] if version else [])
    sh(*args, timeout=900)
    want = version or project_version()
    debs = glob.glob(os.path.join(SRC, "build", "deb", f"trainq_{want}_*.deb"))
    assert len(debs) == 1, (want, os.listdir(os.path.join(SRC, "build", "deb")))
    return shutil.copy(debs[0], out_dir)


def installed_version():
    proc = sh("dpkg-query", "-W", "-f=${Status} ${Version}", "trainq", check=False)
    if proc.returncode != 0 or "install ok installed" not in proc.stdout:
        return None
    return proc.stdout.split()[-1]


def contents(deb):
    """Path -> (mode string, link target or None) of every entry of the package."""
    out = {}
    for line in sh("dpkg-deb", "--contents", deb).stdout.splitlines():
        fields = line.split(None, 5)
        name = fields[5]
        target = None
        if " -> " in name:
            name, target = name.split(" -> ", 1)
        out[name.lstrip(".").rstrip("/") or "/"] = (fields[0], target)
    return out


@pytest.fixture(scope="module")
def debs():
    if installed_version() is not None:
        pytest.fail("a trainq package is already installed on this machine; this test installs "
                    "and purges its own, so remove that one first (apt-get purge trainq)")
    if os.path.exists("/var/lib/trainq"):
        pytest.fail("/var/lib/trainq exists: a shared daemon's queue, which this test's purge "
                    "would remove; run the test on a machine without one")
    base = project_version()
    with tempfile.TemporaryDirectory(prefix="tq-deb-") as d:
        try:
            first = make_deb(d)
            second = make_deb(d, base + NEXT_SUFFIX)
        finally:
            sh("make", "-C", SRC, "-s", "release", timeout=900)  # the tree's own version again
        yield {"first": first, "second": second, "base": base, "next": base + NEXT_SUFFIX,
               "dir": d}
        if installed_version() is not None:
            sh("apt-get", "purge", "-y", "-q", "trainq", env=APT_ENV, check=False)


def test_the_package_has_every_file_and_only_runtime_dependencies(debs):
    files = contents(debs["first"])
    expected = [
        "/usr/bin/trainq", "/usr/bin/trainqd", "/usr/lib/trainq/trainq-shim",
        "/usr/lib/trainq/trainq-tls.so", SYSTEMD_UNIT, "/usr/lib/systemd/user/trainqd.service",
        "/usr/share/man/man1/trainq.1.gz", "/usr/share/man/man8/trainqd.8.gz",
        "/usr/share/man/man5/trainq.toml.5.gz",
        "/usr/share/bash-completion/completions/trainq", "/usr/share/zsh/vendor-completions/_trainq",
        "/usr/share/fish/vendor_completions.d/trainq.fish",
        "/usr/share/doc/trainq/README.md", "/usr/share/doc/trainq/operations.md",
        "/usr/share/doc/trainq/copyright", "/usr/share/doc/trainq/changelog.gz",
        "/usr/lib/python3/dist-packages/trainq/__init__.py",
    ]
    missing = [f for f in expected if f not in files]
    assert not missing, (missing, sorted(files))
    # The Slurm look-alikes where docs/workflow.md puts them: links to the client.
    for tool in ("srun", "sbatch", "salloc", "squeue", "scancel", "scontrol", "sinfo", "sacct"):
        mode, target = files[f"/usr/lib/trainq/slurm/{tool}"]
        assert mode.startswith("l") and target == "../../../bin/trainq", (tool, mode, target)
    # The copyright file carries the dashboard's licence notice (uPlot's, MIT).
    with tempfile.TemporaryDirectory() as x:
        sh("dpkg-deb", "-x", debs["first"], x)
        copyright_text = open(os.path.join(x, "usr/share/doc/trainq/copyright")).read()
        assert "uPlot" in copyright_text or "Leon Sorokin" in copyright_text
        assert "Permission is hereby granted" in copyright_text
        unit = open(os.path.join(x, SYSTEMD_UNIT.lstrip("/"))).read()
        assert "ExecStart=/usr/bin/trainqd --shared" in unit, unit
    control = sh("dpkg-deb", "-f", debs["first"], "Package", "Version", "Architecture",
                 "Depends", "Installed-Size").stdout
    print(control)
    print("package size:", os.path.getsize(debs["first"]), "bytes")
    # What apt says the package will use: the files as installed, links as links.
    installed_kib = int(re.search(r"^Installed-Size: (\d+)$", control, re.M).group(1))
    with tempfile.TemporaryDirectory() as x:
        sh("dpkg-deb", "-x", debs["first"], x)
        on_disk = int(sh("du", "-sk", "--apparent-size", x).stdout.split()[0])
    assert abs(installed_kib - on_disk) <= on_disk // 20, (installed_kib, on_disk)
    depends = re.search(r"^Depends: (.*)$", control, re.M).group(1)
    assert "libc6" in depends and "libsqlite3-0" in depends, depends
    for dep in re.split(r",\s*", depends):
        name = dep.split()[0]
        assert not name.endswith("-dev") and name not in ("cmake", "g++", "dpkg-dev"), depends
    scripts = sh("dpkg-deb", "--ctrl-tarfile", debs["first"])
    assert scripts.returncode == 0


def test_lintian_reports_no_errors(debs):
    proc = sh("lintian", "--no-tag-display-limit", debs["first"], check=False, timeout=600)
    print(proc.stdout, proc.stderr)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("E:")]
    assert not errors, proc.stdout
    assert proc.returncode in (0, 2), proc.stderr  # 2: warnings or info only


def fake_systemd(bin_dir, log):
    """systemctl, deb-systemd-invoke and py3compile/py3clean that only record their words."""
    os.makedirs(bin_dir, exist_ok=True)
    for name in ("systemctl", "deb-systemd-invoke", "py3compile", "py3clean"):
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
        os.chmod(path, 0o755)


def run_script(script, args, bin_dir, with_systemd):
    """Runs a maintainer script with the fakes first on PATH; under systemd means in a mount
    namespace whose /run has systemd's marker (/run/systemd/system), as a booted systemd's
    has."""
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin")
    quoted = " ".join(f"'{a}'" for a in args)
    if with_systemd:
        cmd = ["unshare", "-m", "sh", "-c",
               f"mount -t tmpfs none /run && mkdir -p /run/systemd/system && sh {script} {quoted}"]
    else:
        assert not os.path.isdir("/run/systemd/system"), "this machine runs systemd"
        cmd = ["sh", script, *args]
    sh(*cmd, env=env)


def test_maintainer_scripts_restart_on_upgrade_and_never_start_on_install(debs):
    with tempfile.TemporaryDirectory() as d:
        control = os.path.join(d, "control")
        sh("dpkg-deb", "-e", debs["second"], control)
        bin_dir, log = os.path.join(d, "bin"), os.path.join(d, "calls")
        fake_systemd(bin_dir, log)

        def calls(script, args, with_systemd=True):
            if os.path.exists(log):
                os.remove(log)
            run_script(os.path.join(control, script), args, bin_dir, with_systemd)
            return open(log).read().splitlines() if os.path.exists(log) else []

        upgrade = calls("postinst", ["configure", debs["base"]])
        assert "deb-systemd-invoke try-restart trainqd.service" in upgrade, upgrade
        fresh = calls("postinst", ["configure"])
        assert not [c for c in fresh if "deb-systemd-invoke" in c or "enable" in c], fresh
        assert "py3compile -p trainq" in fresh, fresh
        # No systemd (a container, this machine): the scripts touch no service.
        plain = calls("postinst", ["configure", debs["base"]], with_systemd=False)
        assert not [c for c in plain if c.startswith(("systemctl", "deb-systemd"))], plain
        assert "deb-systemd-invoke stop trainqd.service" in calls("prerm", ["remove"])
        assert not [c for c in calls("prerm", ["upgrade", debs["next"]])
                    if c.startswith("deb-systemd")]


class Installed:
    """The installed client, with a personal state dir of the test's own."""

    def __init__(self, state):
        self.state = state
        self.env = dict(os.environ, TRAINQ_STATE_DIR=state, PATH="/usr/bin:/bin")
        self.env.pop("TRAINQ_SERVER", None)

    def run(self, *args, check=True):
        proc = subprocess.run(["/usr/bin/trainq", *args], env=self.env, capture_output=True,
                              text=True, timeout=120, cwd="/")
        if check:
            assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc

    def job(self, job_id):
        return json.loads(self.run("show", str(job_id), "--json").stdout)

    def wait_for(self, predicate, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")


def zsh_completes(typed):
    """What an interactive zsh (compinit from its default $fpath, as a user's .zshrc runs it)
    shows after `typed` and a Tab, driven through zsh's own pseudo-terminal module."""
    script = (
        "zmodload zsh/zpty\n"
        "zpty z 'PATH=/usr/bin:/bin zsh -f -i'\n"
        "zpty -w z 'autoload -U compinit; compinit -u -D'\n"
        "sleep 0.5\n"
        f"zpty -w -n z $'{typed}\\t'\n"
        "sleep 2\n"
        "out=''; while zpty -r -t z chunk; do out+=$chunk; done\n"
        "print -r -- \"$out\"; zpty -d z\n")
    out = sh("zsh", "-f", "-c", script, timeout=60).stdout
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out)


def apt_install(deb, *extra):
    sh("apt-get", "install", "-y", "-q", "--no-install-recommends", *extra, deb, env=APT_ENV,
       timeout=600)


def test_install_upgrade_under_a_running_job_downgrade_and_purge(debs):
    apt_install(debs["first"])
    assert installed_version() == debs["base"]
    assert sh("trainq", "--version", env=dict(os.environ, PATH="/usr/bin:/bin")).stdout.strip() \
        == f"trainq {debs['base']}"
    assert sh("man", "-w", "trainq").stdout.strip() == "/usr/share/man/man1/trainq.1.gz"
    assert sh("man", "-w", "8", "trainqd").stdout.strip() == "/usr/share/man/man8/trainqd.8.gz"
    assert sh("man", "-w", "5", "trainq.toml").stdout.strip().endswith("trainq.toml.5.gz")
    # bash-completion loads the script on demand from its folder, as for any command.
    loaded = sh("bash", "-c", "source /usr/share/bash-completion/bash_completion; "
                "_completion_loader trainq; complete -p trainq").stdout
    assert "trainq" in loaded, loaded
    # fish and zsh find theirs in their vendor folders: a completion typed in each.
    fish = sh("fish", "-c", "complete -C'trainq subm'").stdout
    assert fish.startswith("submit\t"), fish
    assert "trainq submit" in zsh_completes("trainq subm"), "zsh did not complete"
    if shutil.which("systemd-analyze"):
        for unit in (SYSTEMD_UNIT, "/usr/lib/systemd/user/trainqd.service"):
            proc = sh("systemd-analyze", "verify", unit, check=False)
            assert proc.returncode == 0, (unit, proc.stdout, proc.stderr)
    imported = sh("/usr/bin/python3", "-c", "import trainq; print(trainq.__file__)", cwd="/").stdout
    assert imported.startswith("/usr/lib/python3/dist-packages/trainq/"), imported

    # A job of the installed daemon that runs until the test says so.
    state = tempfile.mkdtemp(prefix="tq-pkg-state-")
    go = os.path.join(state, "go")
    client = Installed(state)
    try:
        job = int(client.run("submit", "--gpus", "0", "--name", "across-upgrade", "--", "sh",
                             "-c", f"while [ ! -e {go} ]; do sleep 0.2; done; exit 7")
                  .stdout.strip())
        running = client.wait_for(lambda: client.job(job)["state"] == "running" and
                                  client.job(job), "the job to run")
        status = json.loads(client.run("daemon", "status", "--json").stdout)
        assert status["version"] == debs["base"], status

        apt_install(debs["second"])
        assert installed_version() == debs["next"]
        # What systemd's try-restart does to the shared daemon: stop it, start the new one.
        client.run("daemon", "stop")
        client.run("daemon", "start")
        status = json.loads(client.run("daemon", "status", "--json").stdout)
        assert status["version"] == debs["next"], status
        adopted = client.job(job)
        assert adopted["state"] == "running", adopted
        assert adopted["attempts"][-1]["pid"] == running["attempts"][-1]["pid"], adopted
        open(go, "w").close()
        done = client.wait_for(lambda: client.job(job)["state"] == "failed" and client.job(job),
                               "the job's exit to be recorded")
        assert done["attempts"][-1]["exit_code"] == 7, done
        client.run("daemon", "stop")
        # The schema was migrated once, by the first daemon; the second found nothing to do.
        db = sqlite3.connect(os.path.join(state, "trainq.db"))
        assert db.execute("SELECT value FROM schema_info WHERE key = 'written_by'") \
            .fetchone()[0] == debs["base"]
        schema = db.execute("PRAGMA user_version").fetchone()[0]

        # A downgrade meets a database from a newer trainq (as a newer build with one more
        # schema step leaves it): the older daemon refuses it, naming both versions.
        db.execute(f"PRAGMA user_version = {schema + 1}")
        db.execute("UPDATE schema_info SET value = ? WHERE key = 'written_by'", (debs["next"],))
        db.commit()
        db.close()
        apt_install(debs["first"], "--allow-downgrades")
        refused = sh("/usr/bin/trainqd", "--state-dir", state, check=False, timeout=60)
        assert refused.returncode != 0, refused.stderr
        assert f"written by trainq {debs['next']}" in refused.stderr, refused.stderr
        assert f"this trainq ({debs['base']})" in refused.stderr, refused.stderr
    finally:
        client.run("daemon", "stop", check=False)

    # Purge: no file of the package is left; the user's own state dir is.
    os.makedirs("/var/lib/trainq", exist_ok=True)  # as a shared daemon leaves its queue
    open("/var/lib/trainq/trainq.db", "w").close()
    packaged = contents(debs["first"])
    sh("apt-get", "purge", "-y", "-q", "trainq", env=APT_ENV)
    assert installed_version() is None
    left = [p for p, (mode, _) in packaged.items()
            if not mode.startswith("d") and os.path.lexists(p)]
    assert not left, left
    for folder in ("/usr/lib/trainq", "/usr/share/doc/trainq",
                   "/usr/lib/python3/dist-packages/trainq", "/var/lib/trainq"):
        assert not os.path.exists(folder), (folder, os.listdir(folder))
    assert os.path.exists(os.path.join(state, "trainq.db"))
    shutil.rmtree(state)
