"""`trioka perf produce|consume`: kafka-producer-perf-test and kafka-consumer-perf-test.

Produce latency is per record, from send() to its acknowledgement (every record). Consume latency is per poll() that returned records, and
A rich progress bar goes to stderr; the summary line(s) go to stdout (or JSON with --json).
"""

from __future__ import annotations

import json
import os
import sys
import time
from array import array
from dataclasses import asdict, dataclass
from typing import Any

import click
import trio
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from client import Consumer, Producer, TopicPartition
from client.config import CONSUMER_CONFIGS, PRODUCER_CONFIGS
from client.futures import BatchResult
from deploy.cli.client_config import ACKS, BOOTSTRAP, client_config
from deploy.cli.options import bootstrap_option

MB = 1024 * 1024


@dataclass
class PerfResult:
    kind: str
    records: int
    record_size: float
    seconds: float
    records_per_sec: float
    mb_per_sec: float
    latency_avg_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    latency_p999_ms: float
    latency_max_ms: float
    failed: int = 0

    def summary(self) -> str:
        what = "records sent" if self.kind == "produce" else "records consumed"
        lat = "latency" if self.kind == "produce" else "poll latency"
        line = (
            f"{self.records} {what}, {self.records_per_sec:.1f} records/sec "
            f"({self.mb_per_sec:.2f} MB/sec), {self.latency_avg_ms:.2f} ms avg {lat}, "
            f"{self.latency_max_ms:.2f} ms max {lat}, {self.latency_p50_ms:.0f} ms 50th, "
            f"{self.latency_p95_ms:.0f} ms 95th, {self.latency_p99_ms:.0f} ms 99th, "
            f"{self.latency_p999_ms:.0f} ms 99.9th."
        )
        if self.failed:
            line += f" {self.failed} records FAILED."
        return line


def percentile(sorted_values: list[float], q: float) -> float:
    """Kafka's perf-test percentile: the value at index floor(q * n)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(int(q * len(sorted_values)), len(sorted_values) - 1)]


def make_result(kind: str, records: int, total_bytes: int, seconds: float,
                latencies_ms: list[float], failed: int = 0) -> PerfResult:  # fmt: skip
    lat = sorted(latencies_ms)
    seconds = max(seconds, 1e-9)
    return PerfResult(
        kind=kind,
        records=records,
        record_size=total_bytes / records if records else 0.0,
        seconds=seconds,
        records_per_sec=records / seconds,
        mb_per_sec=total_bytes / MB / seconds,
        latency_avg_ms=sum(lat) / len(lat) if lat else 0.0,
        latency_p50_ms=percentile(lat, 0.5),
        latency_p95_ms=percentile(lat, 0.95),
        latency_p99_ms=percentile(lat, 0.99),
        latency_p999_ms=percentile(lat, 0.999),
        latency_max_ms=lat[-1] if lat else 0.0,
        failed=failed,
    )


def progress_bar(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        disable=not enabled,
        transient=True,
    )


async def run_produce_perf(
    config: dict[str, Any],
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float = -1,
    *,
    show_progress: bool = False,
) -> PerfResult:
    """Send `num_records` records of `record_size` random bytes as fast as allowed."""
    payload = os.urandom(record_size)
    # Per-record latency without a per-record callback: send times go into an array (no
    # objects for the garbage collector), and one callback per batch computes the latency of
    # its records, which were sent one after another (null keys: the sticky partitioner).
    sent_at = array("d")
    latencies = array("d")
    failed = 0
    clock = time.perf_counter

    def on_batch(first: int) -> Any:
        def done(batch: BatchResult) -> None:
            nonlocal failed
            now = clock()
            if batch.error is not None:
                failed += batch.record_count
            latencies.extend(now - t for t in sent_at[first : first + batch.record_count])

        return done

    with progress_bar(show_progress) as progress:
        task = progress.add_task(f"produce {topic}", total=num_records)
        async with Producer(config) as producer:
            await producer.partitions_for(topic)
            start = clock()
            send = producer.send
            step = max(1, num_records // 200)
            # A rate limit is checked about every millisecond's worth of records: checking it
            # only at progress steps sent bursts of num_records/200 records, whose queueing
            # then dominated the latency measured at a fixed rate.
            pace = max(1, min(step, int(throughput / 1000))) if throughput > 0 else 0
            last_batch = None
            for i in range(num_records):
                sent_at.append(clock())
                future = await send(topic, payload)
                batch = future.batch
                if batch is not last_batch:
                    batch.add_callback(on_batch(i))
                    last_batch = batch
                if i % step == 0:
                    progress.update(task, completed=i)
                if pace and i % pace == 0:
                    ahead = i / throughput - (clock() - start)
                    if ahead > 0:
                        await trio.sleep(ahead)
            await producer.flush()
            elapsed = clock() - start
            progress.update(task, completed=num_records)
    return make_result("produce", num_records, num_records * record_size, elapsed,
                       [x * 1000 for x in latencies], failed)  # fmt: skip


async def run_consume_perf(
    config: dict[str, Any],
    topic: str,
    num_records: int,
    *,
    idle_timeout_ms: float = 10000,
    show_progress: bool = False,
) -> PerfResult:
    """Read `num_records` records of `topic` from the beginning (all partitions)."""
    clock = time.perf_counter
    latencies: list[float] = []
    total = total_bytes = 0
    with progress_bar(show_progress) as progress:
        task = progress.add_task(f"consume {topic}", total=num_records)
        async with Consumer({"auto.offset.reset": "earliest", **config}) as consumer:
            partitions = await consumer.partitions_for(topic)
            consumer.assign([TopicPartition(topic, p) for p in partitions])
            consumer.seek_to_beginning()
            start = last = clock()
            idle_since = start
            while total < num_records:
                records = await consumer.poll(200, max_records=num_records - total)
                now = clock()
                if not records:
                    if (now - idle_since) * 1000 > idle_timeout_ms:
                        break
                    continue
                latencies.append((now - last) * 1000)
                last = idle_since = now
                total += len(records)
                total_bytes += sum(len(r.value or b"") + len(r.key or b"") for r in records)
                progress.update(task, completed=total)
            elapsed = last - start
    return make_result("consume", total, total_bytes, elapsed, latencies)


@click.group()
def perf() -> None:
    """Throughput and latency tests (kafka-producer-perf-test / kafka-consumer-perf-test)."""


def _emit(result: PerfResult, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(asdict(result)))
    else:
        click.echo(result.summary())


@perf.command("produce")
@click.option("--topic", "-t", required=True, help="Topic to produce to (must exist).")
@click.option("--num-records", "-n", type=click.IntRange(min=1), required=True)
@click.option("--record-size", "-s", type=click.IntRange(min=0), default=100, show_default=True)
@click.option(
    "--throughput",
    type=float,
    default=-1,
    show_default=True,
    help="Records/s to aim at; -1 for no limit.",
)
@click.option("--acks", type=click.Choice(["all", "-1", "0", "1"]), default="1", show_default=True,
              help="acks (-X acks=... wins over the default).")  # fmt: skip
@bootstrap_option
@click.option(
    "--producer-props",
    "-X",
    multiple=True,
    metavar="KEY=VALUE",
    help="Producer config, e.g. batch.size=65536 linger.ms=10 (repeatable; checked before "
    "connecting, as trioka produce's -X).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def perf_produce(topic: str, num_records: int, record_size: int, throughput: float, acks: str,
                 bootstrap_server: str, producer_props: tuple[str, ...], as_json: bool,
                 no_progress: bool) -> None:  # fmt: skip
    """Produce NUM_RECORDS records of RECORD_SIZE bytes and report throughput and latency."""
    from deploy.cli.common import run
    from deploy.cli.produce_consume import topic_partitions

    config = client_config(
        producer_props, PRODUCER_CONFIGS, {BOOTSTRAP: bootstrap_server, ACKS: acks}
    )

    async def go() -> PerfResult:
        await topic_partitions(config["bootstrap.servers"], topic, config)
        return await run_produce_perf(config, topic, num_records, record_size, throughput,
                                      show_progress=not no_progress and sys.stderr.isatty())  # fmt: skip

    result = run(go)
    _emit(result, as_json)
    if result.failed:
        sys.exit(1)


@perf.command("consume")
@click.option("--topic", "-t", required=True, help="Topic to consume (from the beginning).")
@click.option(
    "--messages", "-n", type=click.IntRange(min=1), required=True, help="Records to consume."
)
@bootstrap_option
@click.option(
    "--consumer-props",
    "-X",
    multiple=True,
    metavar="KEY=VALUE",
    help="Consumer config, e.g. max.partition.fetch.bytes=4194304 (repeatable; checked before "
    "connecting, as trioka consume's -X).",
)
@click.option(
    "--timeout-ms",
    type=int,
    default=10000,
    show_default=True,
    help="Give up after this long without records.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def perf_consume(topic: str, messages: int, bootstrap_server: str,
                 consumer_props: tuple[str, ...], timeout_ms: int, as_json: bool,
                 no_progress: bool) -> None:  # fmt: skip
    """Consume MESSAGES records from the beginning of TOPIC and report throughput."""
    from deploy.cli.common import run
    from deploy.cli.produce_consume import topic_partitions

    config = client_config(consumer_props, CONSUMER_CONFIGS, {BOOTSTRAP: bootstrap_server})

    async def go() -> PerfResult:
        await topic_partitions(config["bootstrap.servers"], topic, config)
        return await run_consume_perf(config, topic, messages, idle_timeout_ms=timeout_ms,
                                      show_progress=not no_progress and sys.stderr.isatty())  # fmt: skip

    result = run(go)
    _emit(result, as_json)
    if result.records < messages:
        click.echo(
            f"error: only {result.records} of {messages} records arrived within "
            f"{timeout_ms} ms of each other",
            err=True,
        )
        sys.exit(1)
