"""What a Redis failover costs a trainq cluster: the time from a SIGKILL of the master to the
first submit accepted again, and how many submits were refused meanwhile; medians of ROUNDS
kills. docs/cluster.md's "Redis with failover" setup on loopback, built as
tests/integration/test_redis_failover.py builds it (its files as written, sentinels at
down-after-milliseconds 1000 and failover-timeout 2000), two trainqd nodes, and
`trainq submit --gpus 0 -- true` in a loop sent to each node in turn. The killed server is
started again once the sentinels have replaced it, as systemd's Restart= would, and the
sentinels make it a replica; with one replica and store_min_replicas_acked = 1, submits are
accepted again only once it is.

Usage: redis_failover.py BUILD/trainq [ROUNDS] [--replicas N]   (ROUNDS 5, N 1)
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import conftest  # noqa: E402  (the integration tests' harness, found on the path above)
from test_redis_failover import (SENTINEL_TIMES, Failover, SentinelStore, refusals,  # noqa: E402
                                 submit_through_a_failover)

KILL_AFTER = 20  # accepted submits before each kill


def parse_args(argv):
    replicas = 1
    if "--replicas" in argv:
        at = argv.index("--replicas")
        replicas = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    if len(argv) < 2:
        sys.exit(__doc__)
    rounds = int(argv[2]) if len(argv) > 2 else 5
    return os.path.abspath(argv[1]), rounds, replicas


def start_nodes(failover, root):
    """Two trainqd nodes on the failover's store, as the integration test makes them."""
    made = []

    def make_trainq(gpus=None, **config):
        cfg = dict(conftest.DEFAULT_CONFIG)
        cfg.update(config)
        t = conftest.Trainq(tempfile.mkdtemp(prefix="tqb-failover-", dir="/tmp"), gpus, cfg)
        made.append(t)
        return t

    cfg = failover.node_config(root)
    cluster = conftest.Cluster(make_trainq, SentinelStore(cfg.pop("store")), 2, [conftest.gpu(0)],
                               dict(cfg, redis_prefix="trainq:", node_timeout="60s"))
    cluster.leader()
    return cluster, made


def one_round(failover, nodes, last_kill):
    # A sentinel starts no second failover of a master within twice failover-timeout.
    pause = 2 * SENTINEL_TIMES["failover-timeout"] / 1000 + 1
    ready = lambda: time.monotonic() - last_kill > pause and failover.settled()  # noqa: E731
    try:
        conftest.wait_for(ready, timeout=90, interval=0.2,
                          what="the old master back as a replica and the sentinels settled")
    except AssertionError as e:
        sys.exit(f"{e}\n{failover.describe()}")
    submits, killed_at, times = submit_through_a_failover(
        nodes, failover, ["true"], total=KILL_AFTER + 1, kill_after=KILL_AFTER)
    refused, recovered = refusals(submits, killed_at)
    unreachable = sum("store unreachable" in s[4] for s in refused)
    return {"accepted_s": recovered - killed_at, "promoted_s": times["promoted"] - killed_at,
            "refused": len(refused), "unreachable": unreachable,
            "unacked": len(refused) - unreachable}, killed_at


def main():
    binary, rounds, replicas = parse_args(sys.argv)
    os.environ["TRAINQ_BIN"] = binary
    os.environ["TRAINQD_BIN"] = os.path.join(os.path.dirname(binary), "trainqd")

    root = tempfile.mkdtemp(prefix="tqb-failover-", dir="/tmp")
    failover, made, cluster = None, [], None
    try:
        failover = Failover(root, replicas)
        cluster, made = start_nodes(failover, root)
        nodes = list(cluster.nodes.values())
        results, last_kill = [], 0.0
        for r in range(rounds):
            result, last_kill = one_round(failover, nodes, last_kill)
            results.append(result)
            print(f"round {r + 1}: two sentinels named the new master after "
                  f"{result['promoted_s']:.2f} s, first submit "
                  f"accepted after {result['accepted_s']:.2f} s, {result['refused']} refused "
                  f"({result['unreachable']} store unreachable, {result['unacked']} not acked)",
                  flush=True)
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(f"{replicas} replica(s), median of {rounds}: new master named after "
              f"{med['promoted_s']:.2f} s; first submit accepted after {med['accepted_s']:.2f} s; "
              f"{med['refused']:.0f} submits refused ({med['unreachable']:.0f} store "
              f"unreachable, {med['unacked']:.0f} not acked by a replica)")
    finally:
        for t in made:
            t.cleanup()
            shutil.rmtree(t.root, ignore_errors=True)
        if cluster:
            shutil.rmtree(cluster.key_dir, ignore_errors=True)
        if failover:
            failover.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
