"""`make wheel`: the Python client as a wheel, installed with pip into a virtual environment
with no network (docs/python.md), then used: a job submitted and waited for through it."""
import glob
import os
import re
import subprocess
import sys
import tempfile

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def sh(*args, **kw):
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_the_wheel_installs_without_network_and_runs_a_job():
    version = re.search(r"project\(trainq VERSION ([0-9.]+)",
                        open(os.path.join(SRC, "CMakeLists.txt")).read()).group(1)
    sh("make", "-C", SRC, "-s", "wheel")
    wheels = glob.glob(os.path.join(SRC, "build", "wheel", "trainq-*.whl"))
    assert [os.path.basename(w) for w in wheels] == [f"trainq-{version}-py3-none-any.whl"]
    assert not os.path.exists(os.path.join(SRC, "python", "build")), "built in the source tree"
    with tempfile.TemporaryDirectory(prefix="tq-wheel-") as d:
        venv = os.path.join(d, "venv")
        sh(sys.executable, "-m", "venv", venv)
        # No index and no proxy: a download would fail rather than be used.
        env = dict(os.environ, PIP_NO_INDEX="1", http_proxy="http://127.0.0.1:9",
                   https_proxy="http://127.0.0.1:9")
        sh(os.path.join(venv, "bin", "pip"), "install", "-q", "--no-index", wheels[0], env=env)
        state = os.path.join(d, "state")
        script = (
            "import trainq, os\n"
            "assert trainq.__file__.startswith(os.environ['VENV']), trainq.__file__\n"
            "q = trainq.Client(state_dir=os.environ['STATE'])\n"
            "try:\n"
            "    job = q.wait(q.submit(['sh', '-c', 'exit 0'], gpus=0), timeout=60)\n"
            "    print(trainq.__version__, job['state'])\n"
            "finally:\n"
            "    import subprocess\n"
            "    subprocess.run([os.environ['TRAINQ_BIN'], '--state-dir', os.environ['STATE'],\n"
            "                    'daemon', 'stop'], capture_output=True)\n")
        out = sh(os.path.join(venv, "bin", "python"), "-c", script, cwd=d,
                 env=dict(os.environ, VENV=venv, STATE=state,
                          TRAINQ_BIN=os.path.join(SRC, "build", "release", "trainq"))).stdout
        assert out.split() == [version, "succeeded"], out
