"""API tokens through the real CLI and daemon over the Unix socket (docs/operations.md,
"Tokens"): a token is printed once, listed without its secret, revoked; only its SHA-256 is
on disk; bad input is refused with exit 2 naming the option."""
import json
import os
import re
import stat

import pytest


@pytest.fixture
def tq(make_trainq):
    return make_trainq()


def state_files(tq):
    for root, _, files in os.walk(tq.state_dir):
        for name in files:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                yield path


def test_create_prints_the_token_once_and_keeps_only_its_hash(tq):
    proc = tq.run("token", "create", "laptop", "--role", "read")
    token = proc.stdout.strip()
    assert re.fullmatch(r"tq_[0-9a-f]{64}", token), proc.stdout
    assert "shown only once" in proc.stderr
    assert "TRAINQ_TOKEN" in proc.stderr and "~/.config/trainq/token" in proc.stderr

    listing = tq.run("token", "ls").stdout
    assert re.search(r"^laptop\s+read\s+\S+\s+.*never\s+active$", listing, re.M), listing
    as_json = tq.run("token", "ls", "--json").stdout
    doc = json.loads(as_json)
    assert [t["name"] for t in doc["tokens"]] == ["laptop"]
    assert "hash" not in doc["tokens"][0] and "token" not in doc["tokens"][0]
    for text in (listing, as_json):
        assert token[3:] not in text

    # Nothing on disk holds the token, the daemon's log included; the database is 0600.
    tq.run("daemon", "stop")
    for path in state_files(tq):
        with open(path, "rb") as f:
            assert token[3:].encode() not in f.read(), path
    db = os.path.join(tq.state_dir, "trainq.db")
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600


def test_create_with_expiry_as_json(tq):
    doc = json.loads(tq.run("token", "create", "ci", "--role", "submit", "--expires", "30d",
                            "--json").stdout)
    assert doc["name"] == "ci" and doc["role"] == "submit"
    assert doc["expires_at"] is not None
    assert re.fullmatch(r"tq_[0-9a-f]{64}", doc["token"])
    again = tq.run("token", "create", "ci", "--role", "read", check=False)
    assert again.returncode == 1
    assert "'ci'" in again.stderr


def test_revoke(tq):
    tq.run("token", "create", "laptop", "--role", "admin")
    out = tq.run("token", "revoke", "laptop").stdout
    assert "revoked" in out
    assert re.search(r"^laptop\s+admin\s.*\srevoked$", tq.run("token", "ls").stdout, re.M)
    again = tq.run("token", "revoke", "laptop", check=False)
    assert again.returncode == 3
    assert "'laptop'" in again.stderr
    # The name is free again: a rotated token takes it.
    tq.run("token", "create", "laptop", "--role", "admin")


@pytest.mark.parametrize("args, field", [
    (["create", "x", "--role", "owner"], "--role"),
    (["create", "x"], "--role"),
    (["create", "a b", "--role", "read"], "name"),
    (["create", "x", "--role", "read", "--expires", "soon"], "--expires"),
    (["create", "x", "--role", "read", "--expires", "0s"], "--expires"),
    (["revoke", "a/b"], "name"),
])
def test_bad_input_exits_2_naming_the_field(tq, args, field):
    proc = tq.run("token", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr
    assert json.loads(tq.run("token", "ls", "--json").stdout)["tokens"] == []
