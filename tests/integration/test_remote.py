"""Remote access through the CLI: a shared daemon serving TCP (plain on loopback, and TLS),
tokens with roles, jobs that run as the token's user."""
import json
import os
import pwd
import socket
import subprocess

import pytest

from conftest import wait_for
from test_listen import free_port
from test_shared import Shared


@pytest.fixture
def remote(people):
    made = []

    def make(tls=False, **config):
        port = free_port()
        config["listen"] = [f"127.0.0.1:{port}"]
        s = Shared(people, **config)
        made.append(s)
        s.ca = None
        if tls:
            cert, key = os.path.join(s.root, "cert.pem"), os.path.join(s.root, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                            "/CN=localhost", "-addext",
                            "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out",
                            cert], check=True, capture_output=True)
            with open(os.path.join(s.state_dir, "config.toml"), "a") as f:
                f.write(f'tls_cert = "{cert}"\ntls_key = "{key}"\n')
            s.ca = cert
        s.port = port
        s.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        s.start()
        wait_for(lambda: _connects(port), what="the TCP listener")
        return s

    yield make
    for s in made:
        s.cleanup()


def _connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def token(s, name, role, user):
    r = s.trainq_as("root", "token", "create", name, "--role", role, "--user", user, check=0)
    return r.stdout.strip()


def laptop(s, tok, *args, ca=None):
    """trainq as someone on another machine: no Unix socket, only the URL and a token."""
    env = {"PATH": "/usr/bin:/bin", "HOME": s.work, "TRAINQ_SERVER": s.url,
           "TRAINQ_STATE_DIR": s.state_dir,
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
    if tok is not None:
        env["TRAINQ_TOKEN"] = tok
    if ca:
        env["TRAINQ_CA"] = ca
    return s.trainq_as("root", *args, env=env)


def test_tokens_and_roles_over_tcp(remote, people):
    s = remote()
    ada = people["ada"]
    reader = token(s, "ada-read", "read", ada.pw_name)
    submitter = token(s, "ada-submit", "submit", ada.pw_name)
    assert reader.startswith("tq_") and reader != submitter

    r = laptop(s, None, "ls")
    assert r.returncode == 4 and "Authorization" in r.stderr, r.stderr
    r = laptop(s, "tq_" + "0" * 64, "ls")
    assert r.returncode == 4 and "unknown token" in r.stderr, r.stderr

    assert laptop(s, reader, "ls").returncode == 0
    assert laptop(s, reader, "gpus").returncode == 0
    r = laptop(s, reader, "submit", "--gpus", "0", "--cwd", s.work, "--", "true")
    assert r.returncode == 4 and "read" in r.stderr, r.stderr
    assert json.loads(s.trainq_as("root", "ls", "--all", "--json", check=0).stdout) == []

    # A submit token's job belongs to, and runs as, the token's user.
    r = laptop(s, submitter, "submit", "--gpus", "0", "--cwd", s.work, "--", "id", "-u")
    assert r.returncode == 0, r.stderr
    job = int(r.stdout)
    done = s.wait_state(job, "succeeded")
    assert done["user"] == ada.pw_name
    out = laptop(s, reader, "logs", str(job))  # through the API: another machine's file
    assert out.returncode == 0 and out.stdout.strip() == str(ada.pw_uid), out.stdout + out.stderr

    # Bob's token reads, but neither Ada's log nor her jobs are his to change.
    bobs = token(s, "bob-submit", "submit", people["bob"].pw_name)
    r = laptop(s, bobs, "logs", str(job))
    assert r.returncode == 4 and "belongs to" in r.stderr, r.stderr
    r = laptop(s, bobs, "retry", str(job))
    assert r.returncode == 4, r.stderr

    s.trainq_as("root", "token", "revoke", "ada-submit", check=0)
    r = laptop(s, submitter, "ls")
    assert r.returncode == 4 and "revoked" in r.stderr, r.stderr
    # The secret is nowhere on disk: only its digest.
    for base, _, files in os.walk(s.state_dir):
        for name in files:
            with open(os.path.join(base, name), "rb") as f:
                assert reader[3:].encode() not in f.read(), name


def test_tls_with_the_servers_ca(remote, people):
    s = remote(tls=True)
    tok = token(s, "ada-tls", "submit", people["ada"].pw_name)
    r = laptop(s, tok, "ls")  # a certificate no CA of the system vouches for
    assert r.returncode == 4 and "TRAINQ_CA" in r.stderr, r.stderr
    r = laptop(s, tok, "submit", "--gpus", "0", "--cwd", s.work, "--", "true", ca=s.ca)
    assert r.returncode == 0, r.stderr
    assert s.wait_state(int(r.stdout), "succeeded")["user"] == people["ada"].pw_name


def test_a_token_file_others_may_read_is_refused(remote, people):
    s = remote()
    ada = people["ada"]
    tok = token(s, "ada-file", "read", ada.pw_name)
    home = os.path.join(s.root, "ada-home")
    os.makedirs(os.path.join(home, ".config", "trainq"))
    path = os.path.join(home, ".config", "trainq", "token")
    with open(path, "w") as f:
        f.write(tok + "\n")
    for d in (home, os.path.dirname(os.path.dirname(path)), os.path.dirname(path), path):
        os.chown(d, ada.pw_uid, ada.pw_gid)
    os.chmod(path, 0o644)
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TRAINQ_SERVER": s.url,
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")}
    assert pwd.getpwuid(ada.pw_uid)
    r = s.trainq_as("ada", "ls", env=env)
    assert r.returncode == 4 and "chmod 600" in r.stderr, r.stderr
    os.chmod(path, 0o600)
    r = s.trainq_as("ada", "ls", env=env)
    assert r.returncode == 0, r.stderr
