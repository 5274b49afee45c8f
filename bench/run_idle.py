"""Idle cost of partitions (issue 15's scale curve): CPU and RSS of each broker of a quiet
3-broker cluster holding N partitions (RF=3), per partition replica.

    .venv/bin/python bench/run_idle.py [--mode raft|zk] --partitions 1000 3000 10000
        [--measure-s 30] [--settle-s 10]

For each size, a fresh cluster (bench/run_failover.py's: Kafka's default sessions,
`auto.leader.rebalance.enable=false`, telemetry on as shipped): the partitions are created in
topics of 100, every one led with its full ISR, then nothing is produced; after --settle-s the
script reads each broker's CPU time and RSS from /proc/<pid> at the start and end of
--measure-s and prints CPU as a share of one core and RSS per partition replica (every broker
holds every partition at RF=3 on 3 brokers). Goals (issue 15): idle CPU of a 25,000-partition
broker under 10% of a core, RSS <= 20 KB per partition replica. Every process started is
SIGKILLed by pid at the end.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import BenchCluster, cpu_s, rss_bytes
from run_failover import KAFKA_SESSION_TIMEOUT_MS, TOPIC_PREFIX, create_topics, log, wait_all


def measure(mode: str, partitions: int, args: argparse.Namespace) -> list[str]:
    n_topics = math.ceil(partitions / 100)
    names = [f"{TOPIC_PREFIX}-{i:04d}" for i in range(n_topics)]
    per_topic = [partitions // n_topics + (i < partitions % n_topics) for i in range(n_topics)]
    with BenchCluster(mode=mode, brokers=3, session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS[mode],
                      overrides={"auto.leader.rebalance.enable": "false"}) as cluster:  # fmt: skip
        cluster.up()
        trio.run(cluster.wait_ready)
        _, created_s = trio.run(create_topics, cluster.bootstrap, names, per_topic)
        trio.run(lambda: wait_all(cluster, set(names), partitions,
                                  lambda p: p.leader_id >= 0 and len(p.isr_nodes) == 3,
                                  within=900, what="full ISRs"))  # fmt: skip
        log(f"{mode} {partitions:,}: created in {created_s:.1f} s; settling {args.settle_s} s")
        time.sleep(args.settle_s)  # a quiet cluster is what is measured, not a condition
        assert cluster.state is not None
        brokers = [(b.node_id, b.pid) for b in cluster.state.brokers]
        before = {pid: cpu_s(pid) for _, pid in brokers}
        time.sleep(args.measure_s)  # the measurement window itself
        lines = []
        for node_id, pid in brokers:
            share = (cpu_s(pid) - before[pid]) / args.measure_s
            rss = rss_bytes(pid)
            lines.append(
                f"| {mode} | {partitions:,} | broker {node_id} | {100 * share:.1f}% | "
                f"{rss / 2**20:.0f} MiB | {rss / partitions / 1024:.1f} KB |"
            )
        return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("raft", "zk"), default="raft")
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--measure-s", type=float, default=30.0)
    parser.add_argument("--settle-s", type=float, default=10.0)
    args = parser.parse_args()
    rows = ["| mode | partitions | broker | idle CPU (one core) | RSS | RSS per replica |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for n in args.partitions:
        rows += measure(args.mode, n, args)
        print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
