"""The cost of telemetry: CPU time of the broker processes per produced record, shipper on vs off.

    python bench/run_telemetry_cost.py [--mode raft|zk] [--pairs 5] [--records 150000]
                                       [--value-bytes 200] [--interval-ms 10000]

Each pair runs the same workload on two fresh 3-broker clusters (`trioka cluster up`,
deploy.cluster.supervisor), one with `trioka.telemetry.enable=false`, one with it true (every process
ships; `metrics.interval.ms` as given), in alternating order (off/on, on/off, ...) so slow
drifts of this shared 2-core machine hit both sides. Per run: a topic of 3 partitions, RF 3;
a warm-up; then the broker processes' utime+stime from /proc/<pid>/stat before and after
producing `--records` records (acks=all, one producer), and the same for every process of the
cluster (controllers or ZooKeeper too: they ship as well). Printed: CPU ms per 1,000 records per
run, the on/off ratio per pair and their median. Wall-clock throughput is printed too but the
machine's noise hides small differences in it; CPU per record is the figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.cluster_support import BenchCluster  # noqa: E402
from client import Admin, Producer  # noqa: E402
from client.admin import NewTopic  # noqa: E402
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

TOPIC = "bench-telemetry"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def prepare(bootstrap: str, telemetry: bool) -> None:
    async with Admin({"bootstrap.servers": bootstrap}) as admin:
        await admin.create_topics([NewTopic(TOPIC, 3, 3, {})])
        if telemetry:  # steady state: the shipper created its topics and ships

            async def created() -> bool:
                topics = set(await admin.list_topics(include_internal=True))
                return {METRICS_TOPIC, LOGS_TOPIC} <= topics

            await wait_until(created, within=120, every=0.2)


async def produce(bootstrap: str, records: int, value_bytes: int) -> float:
    value = b"x" * value_bytes
    start = time.perf_counter()
    async with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}) as p:
        futures = [await p.send(TOPIC, value, str(i).encode()) for i in range(records)]
        await p.flush()
        for f in futures:
            await f
    return time.perf_counter() - start


def one_run(args: argparse.Namespace, telemetry: bool) -> tuple[float, float, float]:
    """(broker CPU ms per 1,000 records, every process's (brokers and controllers) CPU ms per
    1,000 records, records per second) of one fresh cluster."""
    settings = {
        "trioka.telemetry.enable": "true" if telemetry else "false",
        "metrics.interval.ms": str(args.interval_ms),
    }
    with BenchCluster(mode=args.mode, overrides=settings, controller_overrides=settings) as c:
        c.up()
        trio.run(c.wait_ready)
        trio.run(prepare, c.bootstrap, telemetry)
        trio.run(produce, c.bootstrap, args.warmup, args.value_bytes)
        assert c.state is not None
        pids = [b.pid for b in c.state.brokers]
        zookeeper = [c.state.zookeeper] if c.state.zookeeper is not None else []
        others = [n.pid for n in (*c.state.controllers, *zookeeper)]
        before = sum(cpu_seconds(p) for p in pids)
        before_others = sum(cpu_seconds(p) for p in others)
        elapsed = trio.run(produce, c.bootstrap, args.records, args.value_bytes)
        used = sum(cpu_seconds(p) for p in pids) - before
        used_all = used + sum(cpu_seconds(p) for p in others) - before_others
    per_k = args.records / 1000
    return used * 1000 / per_k, used_all * 1000 / per_k, args.records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("raft", "zk"), default="raft")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--records", type=int, default=150000)
    parser.add_argument("--warmup", type=int, default=3000)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--interval-ms", type=int, default=10000)
    args = parser.parse_args()
    print(
        f"telemetry cost: mode {args.mode}, {args.pairs} pairs, {args.records} records of "
        f"{args.value_bytes} B (acks=all, RF 3), metrics.interval.ms {args.interval_ms}"
    )
    ratios: list[float] = []
    ratios_all: list[float] = []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        got: dict[bool, tuple[float, float]] = {}
        for telemetry in order:
            cpu, cpu_all, rate = one_run(args, telemetry)
            got[telemetry] = (cpu, cpu_all)
            print(
                f"pair {pair + 1} telemetry {'on ' if telemetry else 'off'}: broker CPU "
                f"{cpu:.1f} ms / 1000 records, all processes {cpu_all:.1f} ms / 1000 records, "
                f"{rate:,.0f} records/s",
                flush=True,
            )
        ratios.append(got[True][0] / got[False][0])
        ratios_all.append(got[True][1] / got[False][1])
        print(
            f"pair {pair + 1}: on/off = {ratios[-1]:.3f} (brokers), "
            f"{ratios_all[-1]:.3f} (all processes)",
            flush=True,
        )
    for what, rs in (("brokers", ratios), ("all processes", ratios_all)):
        print(
            f"median on/off CPU per record, {what}: {statistics.median(rs):.3f} "
            f"(min {min(rs):.3f}, max {max(rs):.3f}); goal < 1.05"
        )


if __name__ == "__main__":
    main()
