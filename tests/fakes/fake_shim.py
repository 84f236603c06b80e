#!/usr/bin/python3 -I
# Stands in for `trainq-shim RUN_DIR` in the SpawnShim tests (src/os/process_test.cc). Records
# what SpawnShim gave it in RUN_DIR/fake_shim.txt (argv, the lock variable, signal mask and
# ignored signals, inherited fds), says hello on stdout and stderr, then, as the real shim does,
# reads a stop request from the signals SpawnShim left blocked (one sent before it got here
# included) and exits 128 + its number, holding the inherited lock fd until then. Python, not
# sh: dash clears its signal mask at startup, which would hide the mask SpawnShim left.
import os
import signal
import sys

status = open("/proc/self/status").read()  # first: before Python changes anything further
lines = ["arg " + a for a in sys.argv[1:]]
lines.append("lockfd " + os.environ.get("TRAINQ_SHIM_LOCK_FD", "none"))
lines += [l for l in status.splitlines() if l.startswith(("SigBlk:", "SigIgn:", "ShdPnd:"))]
for name in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        lines.append("fd %s %s" % (name, os.readlink("/proc/self/fd/" + name)))
    except FileNotFoundError:
        pass  # the descriptor listdir used, closed by now
run_dir = sys.argv[1]
with open(run_dir + "/fake_shim.tmp", "w") as f:
    f.write("\n".join(lines) + "\n")
os.rename(run_dir + "/fake_shim.tmp", run_dir + "/fake_shim.txt")
print("fake shim stdout", flush=True)
print("fake shim stderr", file=sys.stderr, flush=True)
stop = signal.sigwait({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
sys.exit(128 + stop)
