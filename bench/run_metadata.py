"""Metadata commit benchmark (issue 4): many small metadata writes through the controller.

    .venv/bin/python bench/run_metadata.py [--mode zk|raft|both] [--clients 8]
        [--writes 3000] [--kind configs|topics] [--json]

A cluster as `trioka cluster up --mode zk|raft` starts it (3 brokers; Raft mode 3 controller
processes, ZK mode a ZooKeeper). `--clients` C Admin clients, each its own connection, write
one after the other (a closed loop: C writes in flight) until `--writes` W writes are
acknowledged; reported: writes/s over the run, latency per write (p50/p99/max, from the call
to the acknowledgement). Each run first makes 5 writes per client that are not counted.

What a write is (`--kind`):
- `configs` (default): IncrementalAlterConfigs SET `retention.ms` on a topic of the client's
  own (a new value each time). In Raft mode that is one ConfigRecord through the quorum: the
  broker forwards the request to the active controller, which proposes the record and answers
  once it is committed (replicated to a majority, high watermark past it) and replayed. This
  measures the metadata path alone: no partition, no log directory, no LeaderAndIsr.
- `topics`: CreateTopics of a fresh 1-partition RF=1 topic: the metadata path plus partition
  creation (the forwarding broker answers once its own metadata has the topic).

The clients share one process (trio tasks; the benchmark process is otherwise idle) and the two
cores with the cluster. Every process started is SIGKILLed by pid at the end, also on Ctrl-C
or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
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
from cluster_support import ROOT, BenchCluster

from client import Admin, AlterConfigOp, ConfigResource, NewTopic
from deploy.cli.options import parse_key_values
from deploy.telemetry.logs import configure_logging

WARMUP_PER_CLIENT = 5


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


class Writer:
    """One client: its own Admin (connection) and, for `configs`, its own topic."""

    def __init__(self, admin: Admin, kind: str, index: int) -> None:
        self.admin = admin
        self.kind = kind
        self.index = index
        self.count = 0
        self.topic = f"md-{index:03d}"

    async def prepare(self) -> None:
        if self.kind == "configs":
            await self.admin.create_topics([NewTopic(self.topic, 1, 1)])

    async def write(self) -> None:
        self.count += 1
        if self.kind == "configs":
            resource = ConfigResource.topic(self.topic)
            value = str(86_400_000 + self.count)
            await self.admin.incremental_alter_configs(
                {resource: [("retention.ms", AlterConfigOp.SET, value)]}
            )
        else:
            name = f"mt-{self.index:03d}-{self.count:06d}"
            await self.admin.create_topics([NewTopic(name, 1, 1)])


async def run_load(bootstrap: str, kind: str, clients: int, writes: int) -> dict[str, Any]:
    config = {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 120_000}
    latencies: list[float] = []
    failures: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        admins = [await stack.enter_async_context(Admin(config)) for _ in range(clients)]
        writers = [Writer(admin, kind, i) for i, admin in enumerate(admins)]
        for w in writers:
            await w.prepare()
        for w in writers:  # warm-up: connections, metadata, the controller's first answers
            for _ in range(WARMUP_PER_CLIENT):
                await w.write()
        remaining = writes

        async def loop(w: Writer) -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    await w.write()
                except Exception as exc:  # counted and shown: a failed write is a finding
                    failures.append(repr(exc)[:200])
                    continue
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for w in writers:
                nursery.start_soon(loop, w)
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "writes": len(latencies),
        "failed": len(failures),
        "failures": failures[:5],
        "elapsed_s": elapsed,
        "writes_per_s": len(latencies) / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(latencies, 0.50) * 1000 if latencies else None,
        "p99_ms": percentile(latencies, 0.99) * 1000 if latencies else None,
        "max_ms": latencies[-1] * 1000 if latencies else None,
        "mean_ms": statistics.fmean(latencies) * 1000 if latencies else None,
    }


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    controller = parse_key_values(args.controller_override, "--controller-override")
    with BenchCluster(mode=mode, brokers=3, keep=args.keep,
                      controller_overrides=controller if mode == "raft" else {}) as cluster:  # fmt: skip
        cluster.up()
        trio.run(cluster.wait_ready)
        log(f"{mode}: cluster up: {cluster.bootstrap}; {args.clients} clients, "
            f"{args.writes:,} {args.kind} writes")  # fmt: skip
        result = trio.run(run_load, cluster.bootstrap, args.kind, args.clients, args.writes)
        result["mode"] = mode
    return result


def describe(r: dict[str, Any]) -> str:
    line = (f"{r['mode']}: {r['writes']:,} writes in {r['elapsed_s']:.1f} s = "
            f"{r['writes_per_s']:,.0f} writes/s; latency p50 {r['p50_ms']:.1f} ms, p99 "
            f"{r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms; failed: {r['failed']}")  # fmt: skip
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("zk", "raft", "both"), default="both")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (C)")
    parser.add_argument("--writes", type=int, default=3000, help="counted writes in all (W)")
    parser.add_argument("--kind", choices=("configs", "topics"), default="configs")
    parser.add_argument("--controller-override", nargs="*", default=[], metavar="KEY=VALUE",
                        help="Raft mode's controller settings, e.g. "
                        "controller.quorum.append.linger.ms=0")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.writes < 1:
        parser.error(f"--clients and --writes must be at least 1 (got {args.clients}, "
                     f"{args.writes})")  # fmt: skip
    try:
        parse_key_values(args.controller_override, "--controller-override")
    except Exception as exc:
        parser.error(str(exc))
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)
    modes = ["zk", "raft"] if args.mode == "both" else [args.mode]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"trioka metadata benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
          f"commit {commit}, {platform.node()}, {os.cpu_count()} CPUs; mode(s) "
          f"{', '.join(modes)}; 3 brokers; {args.clients} clients, {args.writes:,} {args.kind} "
          f"writes; controller overrides {args.controller_override or 'none'}", flush=True)  # fmt: skip
    results = []
    for mode in modes:
        result = run_mode(mode, args)
        print(describe(result), flush=True)
        results.append(result)
    print("\nsummary\n" + "\n".join(describe(r) for r in results))
    if args.json:
        print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
