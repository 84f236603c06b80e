"""`make install` (cmake --install) of this test's build into a temporary prefix: the binaries
and the systemd units, whose ExecStart points into that prefix and whose KillMode leaves the
jobs running when the unit stops (docs/operations.md, "Running trainqd under systemd")."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import free_port, trainq_binary

UNITS = {
    "system": ("lib/systemd/system/trainqd.service", "/bin/trainqd --shared"),
    "user": ("lib/systemd/user/trainqd.service", "/bin/trainqd"),
}


@pytest.fixture(scope="module")
def prefix():
    build = os.path.dirname(os.path.realpath(trainq_binary()))
    assert os.path.exists(os.path.join(build, "cmake_install.cmake")), build
    with tempfile.TemporaryDirectory(prefix="tq-install-", dir="/tmp") as d:
        proc = subprocess.run(["cmake", "--install", build, "--prefix", d],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield d


def unit_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def test_binaries_and_docs_are_installed(prefix):
    for name in ("bin/trainq", "bin/trainqd", "lib/trainq/trainq-shim"):
        assert os.access(os.path.join(prefix, name), os.X_OK), name
    assert os.path.exists(os.path.join(prefix, "lib/trainq/trainq-tls.so"))
    assert os.path.exists(os.path.join(prefix, "share/doc/trainq/operations.md"))


def test_the_installed_tree_finds_its_shim_and_tls_module(prefix):
    """bin/trainqd starts jobs through lib/trainq/trainq-shim, and bin/trainq loads https from
    lib/trainq/trainq-tls.so (a missing module would be named instead of the refused
    connection)."""
    trainq = os.path.join(prefix, "bin/trainq")
    with tempfile.TemporaryDirectory(prefix="tq-inst-", dir="/tmp") as state:
        env = dict(os.environ, TRAINQ_STATE_DIR=state, PATH="/usr/bin:/bin")

        def run(*args):
            return subprocess.run([trainq, *args], env=env, capture_output=True, text=True,
                                  timeout=60)
        try:
            job = run("submit", "--gpus", "0", "--", "true")
            assert job.returncode == 0, job.stderr
            wait = run("wait", job.stdout.strip())
            assert wait.returncode == 0, wait.stdout + wait.stderr
        finally:
            run("daemon", "stop")
        log = open(os.path.join(state, "daemon.log")).read()
        assert "trainqd shim" not in log, log
        port = free_port()
        https = run("--server", f"https://127.0.0.1:{port}", "ls")
        assert https.returncode != 0
        assert "does not answer" in https.stderr and "TLS module" not in https.stderr, \
            https.stderr


def test_python_client_is_installed_and_importable(prefix):
    site = os.path.join(prefix, "lib/python3/dist-packages")
    proc = subprocess.run(["/usr/bin/python3", "-c", "import trainq; print(trainq.__file__)"],
                          env=dict(os.environ, PYTHONPATH=site), cwd=prefix,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == os.path.join(site, "trainq", "__init__.py")


@pytest.mark.parametrize("kind", sorted(UNITS))
def test_units_start_the_installed_daemon_and_never_kill_jobs(prefix, kind):
    rel, command = UNITS[kind]
    path = os.path.join(prefix, rel)
    assert os.path.exists(path), f"{rel} not installed"
    lines = unit_lines(path)
    assert f"ExecStart={prefix}{command}" in lines, lines
    assert "KillMode=process" in lines, lines
    assert "Restart=on-failure" in lines, lines
    assert not any("@PREFIX@" in line for line in lines), lines
    if kind == "system":
        for want in ("RuntimeDirectory=trainq", "RuntimeDirectoryMode=0755",
                     "StateDirectory=trainq", "StateDirectoryMode=0711"):
            assert want in lines, (want, lines)


@pytest.mark.parametrize("kind", sorted(UNITS))
def test_systemd_accepts_the_units(prefix, kind):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # it needs no running systemd, only the package
        pytest.fail("systemd-analyze is not installed; scripts/deps.sh test installs it "
                    "(package systemd)")
    path = os.path.join(prefix, UNITS[kind][0])
    with tempfile.TemporaryDirectory(prefix="tq-xdg-", dir="/tmp") as runtime:
        # --user needs a runtime dir to set up its manager, even just to verify.
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        argv = [analyze, "verify"] + (["--user"] if kind == "user" else []) + [path]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    output = proc.stdout + proc.stderr
    # Unknown keys and bad values are warnings (exit 0) naming the file: none may appear.
    problems = [line for line in output.splitlines() if "trainqd.service" in line]
    assert proc.returncode == 0 and not problems, output
