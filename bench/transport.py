"""What a submit costs over each way to reach the daemon: the Unix socket, TCP on loopback and
TCP+TLS on loopback (token-authenticated). Whole `trainq submit` processes, as a user pays
them, interleaved so that drift hits all alike. Usage: transport.py BUILD/trainq [RUNS]"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Instance:
    def __init__(self, binary, tls):
        self.binary = binary
        self.root = tempfile.mkdtemp(prefix="tqb-transport-", dir="/tmp")
        self.state = os.path.join(self.root, "state")
        os.makedirs(self.state)
        self.port = free_port()
        config = {"cpu_slots": 64, "listen": [f"127.0.0.1:{self.port}"]}
        lines = [f"{k} = {json.dumps(v)}" for k, v in config.items()]
        self.ca = None
        if tls:
            cert, key = os.path.join(self.root, "cert.pem"), os.path.join(self.root, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                            "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                            key, "-out", cert], check=True, capture_output=True)
            lines += [f'tls_cert = "{cert}"', f'tls_key = "{key}"']
            self.ca = cert
        with open(os.path.join(self.state, "config.toml"), "w") as f:
            f.write("\n".join(lines) + "\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINQ_")}
        self.env["TRAINQ_STATE_DIR"] = self.state
        self.run(self.env, "daemon")
        self.token = self.run(self.env, "token", "create", "bench", "--role", "submit").strip()
        scheme = "https" if tls else "http"
        self.tcp_env = dict(self.env, TRAINQ_SERVER=f"{scheme}://127.0.0.1:{self.port}",
                            TRAINQ_TOKEN=self.token)
        if self.ca:
            self.tcp_env["TRAINQ_CA"] = self.ca

    def run(self, env, *args):
        return subprocess.run([self.binary, *args], env=env, cwd=self.root, check=True,
                              capture_output=True, text=True).stdout

    def stop(self):
        subprocess.run([self.binary, "daemon", "stop"], env=self.env, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def measure(binary, runs):
    plain, tls = Instance(binary, False), Instance(binary, True)
    ways = {"Unix socket": (plain, plain.env), "TCP, loopback": (plain, plain.tcp_env),
            "TCP + TLS, loopback": (tls, tls.tcp_env)}
    samples = {name: [] for name in ways}
    try:
        for _ in range(runs):
            for name, (inst, env) in ways.items():
                t0 = time.perf_counter()
                inst.run(env, "submit", "--gpus", "0", "--", "true")
                samples[name].append(time.perf_counter() - t0)
    finally:
        plain.stop()
        tls.stop()
    return samples


def render(samples, runs):
    """The table as Markdown lines."""
    base = statistics.median(samples["Unix socket"])
    out = [f"`trainq submit --gpus 0 -- true`, whole process, median of {runs} runs each "
           "(interleaved); the submit is durable (synced) in every case.\n",
           "| way to the daemon | median ms | p90 ms | ÷ Unix socket |", "| --- | --- | --- | --- |"]
    for name, v in samples.items():
        v = sorted(v)
        p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
        out.append(f"| {name} | {statistics.median(v) * 1000:.2f} | {p90 * 1000:.2f} | "
                   f"{statistics.median(v) / base:.2f}× |")
    return out


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release/trainq")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    print("\n".join(render(measure(binary, runs), runs)))


if __name__ == "__main__":
    main()
