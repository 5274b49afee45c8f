"""The failover benchmark's sampler: acks=all writes to chosen partitions, one at a time each.

    python bench/failover_sampler.py --bootstrap H:P,... --out FILE topic:partition ...

One Producer (acks=all, no linger, a long delivery.timeout.ms so that a record outlives a slow
failover instead of failing) and one task per partition that sends a small record to its
partition, waits for the acknowledgement and sends the next one `--interval-ms` later (100 ms:
the sampler's own CPU, on the brokers' two cores, stays small; the gaps measured are seconds).
Every outcome is one JSON line in FILE, flushed at once, with wall-clock times:
{"topic", "partition", "sent", "done", "ok", "error"}. The benchmark reads FILE while the
sampler runs and SIGKILLs it by pid when it has what it needs; a partition's unavailability is
the gap between its last acknowledgement before the kill and its first one after.
It runs in its own process so that the benchmark's Metadata polling never delays its writes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import IO

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from client import Producer
from deploy.telemetry.logs import configure_logging


def parse_partition(item: str) -> tuple[str, int]:
    topic, sep, partition = item.rpartition(":")
    if not sep or not topic or not partition.isdigit():
        raise SystemExit(f"failover_sampler: {item!r} is not TOPIC:PARTITION")
    return topic, int(partition)


async def sample(
    producer: Producer, topic: str, partition: int, interval_s: float, out: IO[str]
) -> None:
    value = b"x" * 100
    while True:
        sent = time.time()
        error = None
        try:
            await producer.send_and_wait(topic, value, partition=partition)
        except Exception as exc:  # recorded; the next write tries again
            error = repr(exc)
        done = time.time()
        line = {"topic": topic, "partition": partition, "sent": sent, "done": done,
                "ok": error is None, "error": error}  # fmt: skip
        out.write(json.dumps(line) + "\n")
        out.flush()
        await trio.sleep(interval_s)  # pacing, not synchronisation


async def run(args: argparse.Namespace) -> None:
    partitions = [parse_partition(p) for p in args.partitions]
    config = {
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "linger.ms": 0,
        "delivery.timeout.ms": args.delivery_timeout_ms,
        "request.timeout.ms": 10_000,
        "retry.backoff.ms": 50,
    }
    with open(args.out, "a") as out:  # noqa: ASYNC230 (opened once, before any task runs)
        async with Producer(config) as producer, trio.open_nursery() as nursery:
            for topic, partition in partitions:
                nursery.start_soon(sample, producer, topic, partition, args.interval_ms / 1000, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--interval-ms", type=float, default=100.0)
    parser.add_argument("--delivery-timeout-ms", type=int, default=600_000)
    parser.add_argument("partitions", nargs="+", metavar="TOPIC:PARTITION")
    # The client's own log lines (TRIOKA_LOG_LEVEL, ERROR unless the benchmark was run with
    # BENCH_SAMPLER_LOG_LEVEL) go to stderr, which the benchmark keeps beside the samples.
    configure_logging(role="sampler", stream=sys.stderr, json=True)
    trio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
