"""The cost of the Log Size gauge (`kafka_log_log_size{topic,partition}`) on a broker holding N
partitions: one scrape's collect, the whole /metrics text, and the telemetry shipper's snapshot
(which leaves the family out without walking the logs).

    .venv/bin/python bench/run_log_size_scrape.py [--partitions 25000] [--repeat 7]

In process: N `storage.log.Log` objects whose `size` property is the broker's own code, each
with two in-memory segments (no 25,000 directories on disk; `Log.size` reads only the segments'
in-memory sizes anyway), bound to `LogMetrics` on a registry of its own. Prints min and median
milliseconds over --repeat runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from broker.metrics import LogMetrics
from deploy.telemetry.snapshot import samples_of
from protocol.names import TopicPartition
from storage.log import Log


def fake_logs(n: int) -> list[Log]:
    logs = []
    for i in range(n):
        log = object.__new__(Log)  # Log.size as the broker runs it, without the files
        log.topic_partition = TopicPartition(f"bench-{i // 100:04d}", i % 100)
        log._segments = [SimpleNamespace(size=1 << 30), SimpleNamespace(size=12_345 + i)]
        logs.append(log)
    return logs


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    times, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000, statistics.median(times) * 1000, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=25_000)
    p.add_argument("--repeat", type=int, default=7)
    ns = p.parse_args(argv)
    logs = fake_logs(ns.partitions)
    registry = CollectorRegistry()
    LogMetrics(registry).bind(object(), lambda: list(logs))
    collect = timed(lambda: list(registry.collect()), ns.repeat)
    text = timed(lambda: generate_latest(registry), ns.repeat)
    shipped = timed(lambda: samples_of(registry), ns.repeat)
    print(f"{ns.partitions} logs")
    print(f"collect: min {collect[0]:.1f} ms, median {collect[1]:.1f} ms")
    size = len(text[2]) / 1e6  # type: ignore[arg-type]
    print(f"/metrics text: min {text[0]:.1f} ms, median {text[1]:.1f} ms, {size:.2f} MB")
    print(f"shipper snapshot: min {shipped[0]:.2f} ms, median {shipped[1]:.2f} ms, "
          f"{len(shipped[2])} samples")  # type: ignore[arg-type]  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
