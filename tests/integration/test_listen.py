"""The API over TCP (`listen`), plain and TLS: the daemon serves a loopback address, serves
TLS with a certificate made here by openssl, refuses to serve tokens in clear to the network
unless told the network is trusted, names a bad key file, and keeps serving past 1,000 idle
TCP connections, which it closes when they stay silent (docs/operations.md, "Remote access").
What a request over TCP is answered (a token is needed) is not this file's business: only
that it reaches the daemon's HTTP server."""
import http.client
import os
import resource
import socket
import ssl
import subprocess
import time

import pytest

from conftest import check_no_sanitizer_report, free_port, trainqd_binary, wait_for


@pytest.fixture
def cert(tmp_path):
    """A self-signed certificate for localhost and 127.0.0.1: (cert, key) paths."""
    c, k = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", k, "-out", c],
                   check=True, capture_output=True)
    return c, k


def trainqd(tq, *args, timeout=30):
    """trainqd in the foreground for tq's state dir; returns once it exits."""
    proc = subprocess.run([trainqd_binary(), "--state-dir", tq.state_dir, *args], env=tq.env,
                          capture_output=True, text=True, timeout=timeout)
    check_no_sanitizer_report(proc.stderr, "trainqd")
    return proc


def served_by_trainq(conn):
    """A GET over `conn` got an HTTP answer from trainq's server, whatever its status."""
    conn.request("GET", "/v1/status", headers={"Authorization": "Bearer x"})
    res = conn.getresponse()
    res.read()
    return res.getheader("Server") == "trainq" and \
        res.getheader("Content-Type") == "application/json"


def test_tls_with_the_tests_ca(make_trainq, cert):
    port = free_port()
    tq = make_trainq(listen=[f"127.0.0.1:{port}"], tls_cert=cert[0], tls_key=cert[1])
    tq.start_daemon()
    assert f"listening on tcp 127.0.0.1:{port} (tls)" in tq.daemon_log()
    trusting = ssl.create_default_context(cafile=cert[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with trusting.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            assert dict(x[0] for x in tls.getpeercert()["subject"])["commonName"] == "localhost"
    conn = http.client.HTTPSConnection("localhost", port, context=trusting, timeout=10)
    assert served_by_trainq(conn)
    conn.close()
    # A client that does not trust the CA stops at the handshake.
    with pytest.raises(ssl.SSLCertVerificationError):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            ssl.create_default_context().wrap_socket(raw, server_hostname="localhost")
    assert tq.api("GET", "/v1/status").status == 200  # the Unix socket as before


def test_a_plain_loopback_address_is_served(make_trainq):
    port = free_port()
    tq = make_trainq(listen=[f"127.0.0.1:{port}"])
    tq.start_daemon()
    assert f"listening on tcp 127.0.0.1:{port} (plaintext)" in tq.daemon_log()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    assert served_by_trainq(conn)
    conn.close()


def test_an_exposed_address_without_tls_needs_allow_plaintext(make_trainq):
    port = free_port()
    tq = make_trainq(listen=[f"0.0.0.0:{port}"])
    for args in ([], ["--check-config"]):
        proc = trainqd(tq, *args)
        assert proc.returncode == 2, proc.stderr
        assert "allow_plaintext = true" in proc.stderr and "in clear" in proc.stderr
        assert f"0.0.0.0:{port}" in proc.stderr
    assert not os.path.exists(tq.socket_path)
    tq.write_config({"listen": [f"0.0.0.0:{port}"], "allow_plaintext": True,
                     "cpu_slots": 16, "sample_interval": "100ms"})
    assert trainqd(tq, "--check-config").returncode == 0
    tq.start_daemon()
    assert f"listening on tcp 0.0.0.0:{port} (plaintext)" in tq.daemon_log()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    assert served_by_trainq(conn)
    conn.close()


def test_unusable_tls_files_are_named(make_trainq, cert, tmp_path):
    port = free_port()
    missing = str(tmp_path / "nokey.pem")
    tq = make_trainq(listen=[f"127.0.0.1:{port}"], tls_cert=cert[0], tls_key=missing)
    for args in ([], ["--check-config"]):
        proc = trainqd(tq, *args)
        assert proc.returncode == 2, proc.stderr
        assert "tls_key" in proc.stderr and missing in proc.stderr
    tq.write_config({"listen": [f"127.0.0.1:{port}"], "tls_cert": cert[0]})
    proc = trainqd(tq, "--check-config")
    assert proc.returncode == 2
    assert "tls_cert is set but tls_key is not" in proc.stderr


def test_a_thousand_idle_tcp_connections(make_trainq):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        if hard != resource.RLIM_INFINITY and hard < 4096:
            pytest.skip(f"the fd limit is {hard}; 1,000 connections need more")
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))

    def daemon_fd_limit():  # room for 1,000 connections beside the daemon's reserve
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, max(4096, hard)
                                                    if hard != resource.RLIM_INFINITY else hard))

    port = free_port()
    tq = make_trainq(listen=[f"127.0.0.1:{port}"], idle_timeout="2s", request_timeout="2s")
    tq.run("daemon", preexec_fn=daemon_fd_limit)
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        opened = time.monotonic()
        assert tq.api("GET", "/v1/status").status == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        assert served_by_trainq(conn)
        conn.close()
        assert time.monotonic() - opened < 2, "too slow to tell idle connections held"

        def all_closed():
            for s in idle:
                s.setblocking(False)
                try:
                    if s.recv(1) != b"":
                        return False
                except BlockingIOError:
                    return False
                except ConnectionResetError:
                    pass
            return True

        wait_for(all_closed, timeout=20, interval=0.2, what="the idle connections to close")
        assert time.monotonic() - opened >= 1.5
    finally:
        for s in idle:
            s.close()
