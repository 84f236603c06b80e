"""The config blocks of docs/operations.md, as written, are what `trainqd --check-config`
accepts: a shared server's config.toml and the TCP listener's keys (paths moved here)."""
import os
import re
import subprocess
import tempfile

from conftest import trainqd_binary

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "operations.md")


def doc_text():
    with open(DOC) as f:
        return f.read()


def check_config(text, *flags):
    with tempfile.TemporaryDirectory(prefix="tq-opsdoc-", dir="/tmp") as root:
        state = os.path.join(root, "state")
        os.makedirs(state, mode=0o700)
        text = text.replace("@ROOT@", root)
        with open(os.path.join(state, "config.toml"), "w") as f:
            f.write(text)
        if "/etc/trainq/cert.pem" in text:
            cert, key = os.path.join(root, "cert.pem"), os.path.join(root, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                            "/CN=gpu1", "-addext", "subjectAltName=DNS:gpu1", "-keyout", key,
                            "-out", cert], check=True, capture_output=True)
            with open(os.path.join(state, "config.toml"), "w") as f:
                f.write(text.replace("/etc/trainq/cert.pem", cert)
                        .replace("/etc/trainq/key.pem", key))
        return subprocess.run([trainqd_binary(), "--check-config", "--state-dir", state, *flags],
                              capture_output=True, text=True, timeout=30)


def test_the_shared_servers_config_is_valid_as_written():
    m = re.search(r"cat > /var/lib/trainq/config.toml <<'TOML'[^\n]*\n(.*?)^TOML$", doc_text(),
                  re.M | re.S)
    assert m, "docs/operations.md has no shared server config.toml"
    # The socket moves out of /run, which this test leaves alone.
    text = m.group(1) + 'socket = "@ROOT@/run/trainq.sock"\n'
    proc = check_config(text, "--shared")
    assert proc.returncode == 0 and "valid (shared)" in proc.stdout, proc


def test_the_remote_access_config_is_valid_as_written():
    m = re.search(r"^```toml\n(listen = .*?)^```", doc_text(), re.M | re.S)
    assert m, "docs/operations.md has no listen block"
    proc = check_config(m.group(1))
    assert proc.returncode == 0 and "valid" in proc.stdout, proc
