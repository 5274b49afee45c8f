"""Whole-cluster restart benchmark (issue 15): every broker SIGKILLed, then started again; how
long until each partition accepts acks=all writes.

    .venv/bin/python bench/run_restart.py [--mode zk|raft|both] [--partitions 30]
        [--sample 30] [--down-s 5] [--keep] [--json]

For each mode (ZK first): `trioka cluster up --mode zk|raft` (3 brokers; Raft mode with 3
controller processes, ZK mode with ZooKeeper, which both stay up), Kafka's default sessions
(broker.session.timeout.ms 9 s, zookeeper.session.timeout.ms 18 s), `--partitions` partitions
RF=3 min.insync.replicas=2 in topics of 100, and the sampler (bench/failover_sampler.py)
writing acks=all records to `--sample` of them. Once each sampled partition has an
acknowledgement, every broker is SIGKILLed at once; after `--down-s` seconds they are started
again one after the other (each start returns once the broker listens). Reported:

- from the last broker's start: every sampled partition's first acks=all acknowledgement
  (median / max), and every broker's Metadata showing a leader and a full ISR for every
  partition;
- each partition's client-observed gap: its last acknowledgement before the kill to its first
  after the restart (median / max), which includes `--down-s`.

Every process started is SIGKILLed by pid at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import BenchCluster
from run_failover import (
    KAFKA_SESSION_TIMEOUT_MS,
    TOPIC_PREFIX,
    Sampler,
    create_topics,
    log,
    wait_all,
)

from deploy.cluster.supervisor import read_state, start_broker
from deploy.telemetry.logs import configure_logging


def full(p: Any) -> bool:
    return p.leader_id >= 0 and len(p.isr_nodes) == 3


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    n_topics = math.ceil(args.partitions / 100)
    names = [f"{TOPIC_PREFIX}-{i:04d}" for i in range(n_topics)]
    per_topic = [args.partitions // n_topics + (i < args.partitions % n_topics)
                 for i in range(n_topics)]  # fmt: skip
    topics = set(names)
    report: dict[str, Any] = {"mode": mode, "partitions": args.partitions}
    session_ms = KAFKA_SESSION_TIMEOUT_MS[mode]
    with BenchCluster(mode=mode, brokers=3, session_timeout_ms=session_ms, keep=args.keep,
                      overrides={"auto.leader.rebalance.enable": "false"}) as cluster:  # fmt: skip
        cluster.up()
        trio.run(cluster.wait_ready)
        trio.run(create_topics, cluster.bootstrap, names, per_topic)
        trio.run(lambda: wait_all(cluster, topics, args.partitions, full,
                                  within=args.wait_s, what="full ISRs"))  # fmt: skip
        sampled = [(names[i % n_topics], i // n_topics) for i in range(args.sample)]
        sampler = Sampler(cluster, sampled, cluster.dir / "sampler-restart.jsonl")  # type: ignore[operator]
        try:
            trio.run(lambda: sampler.wait(
                lambda ls: len(sampler.acked_after(ls, 0)) == len(sampled),
                within=args.wait_s, what="first acknowledgements"))  # fmt: skip
            brokers = cluster.live_ids()
            log(f"{mode}: SIGKILL brokers {brokers}")
            killed_at = time.time()
            for b in brokers:
                cluster.kill(b)
            time.sleep(args.down_s)  # the outage itself: what the benchmark is about
            for b in brokers:
                started_at = time.time()
                start_broker(cluster.dir / "cluster", b, timeout=args.wait_s)  # type: ignore[operator]
            cluster.state = read_state(cluster.dir / "cluster")  # type: ignore[operator]
            log(f"{mode}: brokers started again; the last {time.time() - started_at:.1f} s ago")
            lines = trio.run(lambda: sampler.wait(
                lambda ls: len(sampler.acked_after(ls, started_at)) == len(sampled),
                within=args.wait_s, what="acknowledgements after the restart"))  # fmt: skip
            first = sampler.acked_after(lines, started_at)
            full_at = trio.run(lambda: wait_all(cluster, topics, args.partitions, full,
                                                within=args.wait_s, what="full ISRs"))  # fmt: skip
        finally:
            sampler.stop()
        before = {}
        for x in lines:
            key = (x["topic"], x["partition"])
            if x["ok"] and x["done"] <= killed_at:
                before[key] = x["done"]
        after_start = sorted(t - started_at for t in first.values())
        gaps = sorted(first[k] - before[k] for k in first if k in before)
        report.update(
            down_s=args.down_s,
            first_ack_after_start_median_s=statistics.median(after_start),
            first_ack_after_start_max_s=after_start[-1],
            gap_median_s=statistics.median(gaps) if gaps else None,
            gap_max_s=gaps[-1] if gaps else None,
            full_isr_after_start_s=max(full_at.values()) - started_at,
        )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("zk", "raft", "both"), default="both")
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--down-s", type=float, default=5.0)
    parser.add_argument("--wait-s", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.sample = min(args.sample, args.partitions)
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)
    modes = ["zk", "raft"] if args.mode == "both" else [args.mode]
    reports = [run_mode(m, args) for m in modes]
    print(f"whole-cluster restart, {args.partitions:,} partitions, brokers down {args.down_s:g} s")
    rows = [
        ("first acks=all after the last start, median", "first_ack_after_start_median_s"),
        ("first acks=all after the last start, max", "first_ack_after_start_max_s"),
        ("full ISRs on every broker after the last start", "full_isr_after_start_s"),
        ("client-observed gap, median (includes the outage)", "gap_median_s"),
        ("client-observed gap, max", "gap_max_s"),
    ]
    print(f"  {'seconds':<52}" + "".join(f"{r['mode']:>8}" for r in reports))
    for label, key in rows:
        cells = "".join(
            f"{r[key]:>8.2f}" if isinstance(r.get(key), float) else f"{'-':>8}" for r in reports
        )
        print(f"  {label:<52}{cells}")
    if args.json:
        print(json.dumps(reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
