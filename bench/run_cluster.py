"""Three-broker benchmark (issue 3): RF=3 produce acks=1 / acks=all, consume, latency at half load.

    .venv/bin/python bench/run_cluster.py [--runs N] [--records N] [--partitions P]
        [--latency-seconds S] [--producer-props k=v ...] [--broker-override k=v ...] [--json]

Starts a ZK-mode cluster as `trioka cluster up` does (Debian's ZooKeeper and 3 broker processes,
data and logs in a temporary directory). Each run creates two RF=3 topics with
min.insync.replicas=2 and P partitions, and runs `trioka perf` as separate client processes (so
the client never shares an event loop with a broker):

1. produce N records of 1 KiB with acks=1 (topic A) and with acks=all (topic B), as fast as
   the producer can offer them (kafka-producer-perf-test's throughput -1); odd runs start with
   acks=1, even runs with acks=all;
2. consume topic B from the beginning (all partitions, one consumer);
3. produce with acks=all at a fixed rate of half the acks=all throughput just measured, for
   `--latency-seconds`, and report p50/p95/p99/max latency from send() to acknowledgement.

The topics are deleted after each run. Every process started (ZooKeeper, brokers, clients) is
SIGKILLed by pid at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import ROOT, BenchCluster, run_json

from client import Admin, NewTopic
from deploy.cli.options import parse_key_values
from deploy.telemetry.logs import configure_logging
from protocol.errors import ErrorCode, KafkaError

RECORD_SIZE = 1024
GOAL_ACKS_ALL_MB_S = 60.0
GOAL_RATIO = 0.6


def perf_command(
    kind: str, bootstrap: str, topic: str, records: int, extra: list[str]
) -> list[str]:
    cmd = [sys.executable, "-m", "deploy.cli", "perf", kind, "-t", topic, "-b", bootstrap,
           "--json", "--no-progress"]  # fmt: skip
    if kind == "produce":
        cmd += ["-n", str(records), "-s", str(RECORD_SIZE)]
    else:
        cmd += ["-n", str(records)]
    return cmd + extra


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    async with Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 60_000}) as admin:
        await admin.create_topics(
            [NewTopic(n, partitions, 3, {"min.insync.replicas": "2"}) for n in names],
            timeout_ms=60_000,
        )
        # Until every partition has a leader and its whole replica set in the ISR.
        with trio.fail_after(120):
            while True:
                try:
                    topics = await admin.describe_topics(names)
                except KafkaError as exc:
                    # The broker asked has not had the controller's UpdateMetadata yet.
                    if exc.code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise
                    topics = []
                parts = [p for t in topics for p in t.partitions]
                if len(parts) == partitions * len(names) and all(
                    p.leader >= 0 and len(p.isr) == 3 for p in parts
                ):
                    return
                await trio.sleep(0.2)  # polling a condition under the deadline above


async def delete_topics(bootstrap: str, names: list[str]) -> None:
    async with Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 60_000}) as admin:
        await admin.delete_topics(names)


def one_run(run: int, args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    producer_x = [f"-X{p}" for p in args.producer_props]
    consumer_x = [f"-X{p}" for p in args.consumer_props]
    topic_1, topic_all = f"bench-r{run}-acks1", f"bench-r{run}-acksall"
    trio.run(create_topics, bootstrap, [topic_1, topic_all], args.partitions)
    timeout = args.client_timeout
    out: dict[str, Any] = {}
    # Odd runs produce acks=1 first, even runs acks=all first: whichever goes first meets a
    # cluster that has been idle (and the other one meets followers still catching up).
    order = [("acks1", topic_1, "1"), ("acksall", topic_all, "all")]
    if run % 2 == 0:
        order.reverse()
    for key, topic, acks in order:
        out[key] = run_json(perf_command("produce", bootstrap, topic, args.records,
                                         ["--acks", acks, *producer_x]), timeout=timeout)  # fmt: skip
        report(run, f"produce acks={acks}", out[key])
    out["consume"] = run_json(perf_command("consume", bootstrap, topic_all, args.records,
                                           consumer_x), timeout=timeout)  # fmt: skip
    report(run, "consume", out["consume"])
    rate = max(1.0, out["acksall"]["records_per_sec"] / 2)
    count = max(1, int(rate * args.latency_seconds))
    out["latency"] = run_json(
        perf_command("produce", bootstrap, topic_all, count,
                     ["--acks", "all", "--throughput", f"{rate:.0f}", *producer_x]),
        timeout=timeout,
    )  # fmt: skip
    out["latency"]["target_rate"] = rate
    report(run, f"acks=all at {rate:,.0f} rec/s", out["latency"])
    trio.run(delete_topics, bootstrap, [topic_1, topic_all])
    return out


def report(run: int, what: str, r: dict[str, Any]) -> None:
    failed = f"  FAILED {r['failed']}" if r.get("failed") else ""
    print(f"run {run} {what:28} {r['records_per_sec']:>10,.0f} rec/s {r['mb_per_sec']:>7.1f} MB/s"
          f"  p50 {r['latency_p50_ms']:6.1f}  p95 {r['latency_p95_ms']:6.1f}"
          f"  p99 {r['latency_p99_ms']:7.1f}  max {r['latency_max_ms']:7.1f} ms{failed}",
          flush=True)  # fmt: skip


def table(runs: list[dict[str, Any]]) -> str:
    rows = ["| run | produce acks=1 | produce acks=all | all/1 | consume | latency at half load "
            "(rate; p50 / p95 / p99 / max) |",
            "|-----|----------------|------------------|-------|---------|"
            "-------------------------------------------------|"]  # fmt: skip

    def cells(r: dict[str, Any]) -> str:
        a1, aa, c, lat = r["acks1"], r["acksall"], r["consume"], r["latency"]
        ratio = aa["mb_per_sec"] / a1["mb_per_sec"] if a1["mb_per_sec"] else 0.0
        return (f"{a1['mb_per_sec']:.1f} MB/s ({a1['records_per_sec']:,.0f} rec/s) | "
                f"{aa['mb_per_sec']:.1f} MB/s ({aa['records_per_sec']:,.0f} rec/s) | "
                f"{ratio:.2f} | {c['mb_per_sec']:.1f} MB/s | "
                f"{lat['target_rate']:,.0f} rec/s; {lat['latency_p50_ms']:.1f} / "
                f"{lat['latency_p95_ms']:.1f} / {lat['latency_p99_ms']:.1f} / "
                f"{lat['latency_max_ms']:.1f} ms |")  # fmt: skip

    for i, r in enumerate(runs, 1):
        rows.append(f"| {i} | {cells(r)}")
    if len(runs) > 1:

        def med(kind: str, field: str) -> float:
            return statistics.median(r[kind][field] for r in runs)

        ratio = statistics.median(
            r["acksall"]["mb_per_sec"] / r["acks1"]["mb_per_sec"] for r in runs
        )
        rows.append(
            f"| **median** | **{med('acks1', 'mb_per_sec'):.1f} MB/s** | "
            f"**{med('acksall', 'mb_per_sec'):.1f} MB/s** | **{ratio:.2f}** | "
            f"**{med('consume', 'mb_per_sec'):.1f} MB/s** | p99 "
            f"**{med('latency', 'latency_p99_ms'):.1f} ms** |"
        )
    return "\n".join(rows)


def verdict(runs: list[dict[str, Any]]) -> str:
    aa = statistics.median(r["acksall"]["mb_per_sec"] for r in runs)
    ratio = statistics.median(r["acksall"]["mb_per_sec"] / r["acks1"]["mb_per_sec"] for r in runs)
    return (
        f"goals: acks=all >= {GOAL_ACKS_ALL_MB_S:g} MB/s: {aa:.1f} "
        f"({'meets' if aa >= GOAL_ACKS_ALL_MB_S else 'below'}); acks=all/acks=1 >= "
        f"{GOAL_RATIO}: {ratio:.2f} ({'meets' if ratio >= GOAL_RATIO else 'below'})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000, help="records per produce")
    parser.add_argument("--partitions", type=int, default=6, help="partitions per topic")
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--consumer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--broker-override", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--client-timeout", type=float, default=900.0,
                        help="seconds a client process may take before it is killed")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    args = parser.parse_args(argv)
    for flag, value in (("--runs", args.runs), ("--records", args.records),
                        ("--partitions", args.partitions)):  # fmt: skip
        if value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    parse_key_values(args.producer_props, "--producer-props")
    parse_key_values(args.consumer_props, "--consumer-props")
    overrides = parse_key_values(args.broker_override, "--broker-override")
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"trioka 3-broker benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC,"
          f" commit {commit}, {platform.node()}, {os.cpu_count()} CPUs, Python"
          f" {platform.python_version()}; RF=3, min.insync.replicas=2, {args.partitions}"
          f" partitions per topic, {args.records:,} x {RECORD_SIZE} B records", flush=True)  # fmt: skip
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    with BenchCluster(brokers=3, session_timeout_ms=args.session_timeout_ms,
                      overrides=overrides, keep=args.keep) as cluster:  # fmt: skip
        cluster.up()
        trio.run(cluster.wait_ready)
        print(f"cluster up: {cluster.bootstrap}", flush=True)
        for run in range(1, args.runs + 1):
            runs.append(one_run(run, args, cluster.bootstrap))
    print()
    print(table(runs))
    print(verdict(runs))
    print(f"done in {time.monotonic() - started:.1f} s")
    if args.json:
        print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
