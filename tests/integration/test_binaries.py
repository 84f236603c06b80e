"""The programs: trainq, the client; trainqd, the daemon; trainq-shim, which supervises each
attempt; and trainq-tls.so, the client's https, loaded only when a URL needs it. The client
starts the daemon it finds beside itself, never links the server's libraries or OpenSSL, and
leaves the config to trainqd."""
import json
import os
import re
import shutil
import subprocess
import time
import tempfile

import pytest

from conftest import check_no_sanitizer_report, free_port, trainq_binary, trainqd_binary

# Never linked by the client or the shim. OpenSSL and fmt neither: loading them was most of
# what every command paid at start (docs/benchmarks.md, "Start-up").
SERVER_LIBRARIES = ("libsqlite3", "libspdlog", "libnvidia-ml", "libhiredis")
START_UP_LIBRARIES = ("libssl", "libcrypto", "libfmt")


def shim_binary():
    return os.path.join(os.path.dirname(trainqd_binary()), "trainq-shim")


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
    status = run([trainq_binary(), "daemon", "status"], env)
    assert status.returncode == 3 and status.stdout.startswith("no trainq daemon"), status.stdout


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
    for binary in (trainq_binary(), shim_binary()):
        linked = needed_libraries(binary)
        assert not [lib for lib in linked if lib.startswith(SERVER_LIBRARIES)], (binary, linked)
        assert not [lib for lib in linked if lib.startswith(START_UP_LIBRARIES)], (binary, linked)
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


def test_https_loads_the_tls_module_only_then(root):
    """No daemon listens there: the answer is that none answers, which the client can only
    give once the module is loaded and has tried; a missing module says so instead."""
    env = env_for(os.path.join(root, "state"))
    port = free_port()
    proc = run([trainq_binary(), "--server", f"https://127.0.0.1:{port}", "ls"], env)
    assert proc.returncode != 0
    assert "does not answer" in proc.stderr and "TLS module" not in proc.stderr, proc.stderr
    bin_dir = os.path.join(root, "bin")
    os.makedirs(bin_dir)
    shutil.copy2(trainq_binary(), bin_dir)  # without trainq-tls.so
    alone = run([os.path.join(bin_dir, "trainq"), "--server", f"https://127.0.0.1:{port}", "ls"],
                env)
    assert alone.returncode != 0
    assert "https needs trainq's TLS module, trainq-tls.so, which could not be loaded" \
        in alone.stderr, alone.stderr
    assert "nothing was sent" in alone.stderr


def shim_of_job(trainq, env, job_id):
    """The executable and argv of the process supervising the job (an attempt's pid is its
    shim's)."""
    show = json.loads(run([trainq, "show", str(job_id), "--json"], env, check=True).stdout)
    shim = show["attempts"][0]["pid"]
    return os.readlink(f"/proc/{shim}/exe"), open(f"/proc/{shim}/cmdline").read().split("\0")


@pytest.mark.parametrize("with_shim", [True, False])
def test_jobs_start_through_trainq_shim_or_trainqd_without_it(root, with_shim):
    bin_dir = os.path.join(root, "bin")
    os.makedirs(bin_dir)
    for b in (trainq_binary(), trainqd_binary()) + ((shim_binary(),) if with_shim else ()):
        shutil.copy2(b, bin_dir)
    state = os.path.join(root, "state")
    env = env_for(state)
    trainq = os.path.join(bin_dir, "trainq")
    try:
        job = int(run([trainq, "submit", "--gpus", "0", "--", "sleep", "30"], env,
                      check=True).stdout)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            state_now = run([trainq, "show", str(job), "--json"], env, check=True).stdout
            if '"state":"running"' in state_now.replace(" ", ""):
                break
            time.sleep(0.05)
        exe, argv = shim_of_job(trainq, env, job)
        if with_shim:
            assert exe == os.path.join(bin_dir, "trainq-shim")
            assert argv[:1] == ["trainq-shim"], argv
        else:
            assert exe == os.path.join(bin_dir, "trainqd")
            assert argv[:2] == ["trainqd", "shim"], argv
        run([trainq, "cancel", str(job)], env, check=True)
    finally:
        run([trainq, "daemon", "stop"], env)
    log = open(os.path.join(state, "daemon.log")).read()
    check_no_sanitizer_report(log, "daemon.log")
    assert ("jobs start through `trainqd shim` instead" in log) == (not with_shim), log
