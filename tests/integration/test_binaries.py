"""Two binaries: trainq, the client, and trainqd, the daemon and the shim. The client starts
the daemon it finds beside itself, never links the server's libraries, and leaves the
config to trainqd."""
import os
import re
import shutil
import subprocess
import time
import tempfile

import pytest

from conftest import check_no_sanitizer_report, trainq_binary, trainqd_binary

# The client links libssl and libcrypto (https to a remote daemon), never these.
SERVER_LIBRARIES = ("libsqlite3", "libspdlog", "libnvidia-ml", "libhiredis")


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory(prefix="tq-", dir="/tmp") as d:
        yield d


def env_for(state_dir, path="/usr/bin:/bin"):
    env = dict(os.environ, TRAINQ_STATE_DIR=state_dir, PATH=path)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    return env


def run(argv, env, check=False):
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    check_no_sanitizer_report(proc.stderr, " ".join(argv))
    if check:
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    return proc


def needed_libraries(binary):
    proc = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def test_trainq_starts_the_trainqd_beside_it(root):
    bin_dir = os.path.join(root, "bin")
    os.makedirs(bin_dir)
    for b in (trainq_binary(), trainqd_binary()):
        shutil.copy2(b, bin_dir)
    state = os.path.join(root, "state")
    env = env_for(state)  # no trainqd on PATH: only the one beside trainq
    trainq = os.path.join(bin_dir, "trainq")
    try:
        assert run([trainq, "ls"], env, check=True).stdout.startswith("ID")
        status = run([trainq, "daemon", "status", "--json"], env, check=True).stdout
        pid = int(status.split('"pid":')[1].split(",")[0])
        assert os.readlink(f"/proc/{pid}/exe") == os.path.join(bin_dir, "trainqd")
    finally:
        run([trainq, "daemon", "stop"], env)
    log = open(os.path.join(state, "daemon.log")).read()
    check_no_sanitizer_report(log, "daemon.log")


def test_trainq_without_trainqd_says_so(root):
    shutil.copy2(trainq_binary(), root)
    proc = run([os.path.join(root, "trainq"), "ls"], env_for(os.path.join(root, "state")))
    assert proc.returncode != 0
    assert proc.stderr.strip() == (
        "trainq: cannot find trainqd (the trainq daemon) beside trainq or on PATH; install both")


def test_trainqd_is_found_on_path(root):
    bin_dir, path_dir = os.path.join(root, "bin"), os.path.join(root, "path")
    os.makedirs(bin_dir)
    os.makedirs(path_dir)
    shutil.copy2(trainq_binary(), bin_dir)
    shutil.copy2(trainqd_binary(), path_dir)
    env = env_for(os.path.join(root, "state"), f"{path_dir}:/usr/bin:/bin")
    trainq = os.path.join(bin_dir, "trainq")
    try:
        run([trainq, "daemon", "start"], env, check=True)
        assert "running" in run([trainq, "daemon", "status"], env, check=True).stdout
    finally:
        run([trainq, "daemon", "stop"], env)


def test_a_bad_config_exits_2_naming_the_option(root):
    state = os.path.join(root, "state")
    os.makedirs(state)
    with open(os.path.join(state, "config.toml"), "w") as f:
        f.write('headroom = "lots"\n')
    env = env_for(state)
    proc = run([trainqd_binary(), "--check-config", "--state-dir", state], env)
    assert proc.returncode == 2
    assert "headroom" in proc.stderr and "'lots'" in proc.stderr
    # The client asks trainqd, so both say the same, and no daemon is left running.
    for args in (["config", "check"], ["ls"]):
        client = run([trainq_binary(), *args], env)
        assert client.returncode == 2, client.stderr
        assert client.stderr.startswith("trainq: ") and "headroom" in client.stderr
    assert run([trainq_binary(), "daemon", "status"], env).stdout.startswith("no trainq daemon")


def test_a_bad_settings_json_is_reported_at_once(root):
    # It used to make the client wait out its 20 s start timeout before saying anything.
    state = os.path.join(root, "state")
    os.makedirs(state)
    with open(os.path.join(state, "settings.json"), "w") as f:
        f.write('{"devices": ')
    env = env_for(state)
    proc = run([trainqd_binary(), "--check-config", "--state-dir", state], env)
    assert proc.returncode == 2
    assert "settings.json" in proc.stderr
    started = time.monotonic()
    client = run([trainq_binary(), "ls"], env)
    assert time.monotonic() - started < 10
    assert client.returncode == 2, client.stderr
    assert "settings.json" in client.stderr and "fix or remove it" in client.stderr


def test_a_good_config_checks_clean(root):
    state = os.path.join(root, "state")
    os.makedirs(state)
    with open(os.path.join(state, "config.toml"), "w") as f:
        f.write('headroom = "1GiB"\n')
    proc = run([trainqd_binary(), "--check-config", "--state-dir", state], env_for(state))
    assert proc.returncode == 0, proc.stderr
    assert run([trainq_binary(), "config", "check"], env_for(state)).returncode == 0


def test_trainq_links_no_server_library():
    client = needed_libraries(trainq_binary())
    assert not [lib for lib in client if lib.startswith(SERVER_LIBRARIES)], client
    # The check can fail: the daemon does link them.
    daemon = needed_libraries(trainqd_binary())
    assert any(lib.startswith("libsqlite3") for lib in daemon), daemon


SERVER_SYMBOLS = re.compile(r"trainq::(ChooseGpuProbe|OpenSqliteStore|HttpServer::)")


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) is not installed")
def test_trainq_holds_no_server_code():
    def server_symbols(binary):
        out = subprocess.run(["nm", "-C", binary], capture_output=True, text=True,
                             check=True).stdout
        return sorted({m.group(0) for m in SERVER_SYMBOLS.finditer(out)})

    assert server_symbols(trainq_binary()) == []
    assert len(server_symbols(trainqd_binary())) == 3  # the check can fail


def test_trainqd_help_hides_the_shim(root):
    env = env_for(os.path.join(root, "state"))
    proc = run([trainqd_binary(), "--help"], env, check=True)
    assert "--check-config" in proc.stdout and "--state-dir" in proc.stdout
    assert "shim" not in proc.stdout
    assert "shim" not in run([trainq_binary(), "--help"], env, check=True).stdout
    # Hidden, not gone: without its run dir it is refused as a usage error.
    assert run([trainqd_binary(), "shim"], env).returncode == 2


def test_both_binaries_print_their_version(root):
    env = env_for(os.path.join(root, "state"))
    assert run([trainq_binary(), "--version"], env, check=True).stdout.startswith("trainq ")
    assert run([trainqd_binary(), "--version"], env, check=True).stdout.startswith("trainqd ")
