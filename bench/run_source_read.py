"""The `trioka` data source's read throughput (issue 7): records/s through
`spark.read.format("trioka")` vs the same records through the SyncConsumer alone.

    .venv/bin/python bench/run_source_read.py [--records N] [--partitions P] [--size B] [--runs R]

Starts one broker process (tests.support.broker_process, a KRaft combined node) in a temporary
directory, produces N records of B bytes over P partitions, then times, R times each,
interleaved: (a) one SyncConsumer reading every partition in this process, (b) `df.count()`
and (c) `df.agg(sum(length(value)))` on format("trioka") in a local[2] Spark session (the first
Spark read, which starts the Python workers, is a warm-up and not counted). Prints the figures
and the broker's figures; the broker is killed by pid at the end.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONPATH", str(ROOT))  # Spark's Python workers import analytics/

from pyspark.sql import functions as F  # noqa: E402

from analytics.job import build_session  # noqa: E402
from client.sync import SyncAdmin, SyncConsumer, SyncProducer  # noqa: E402
from protocol.names import TopicPartition  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

TOPIC = "bench-source"


def produce(bootstrap: str, records: int, partitions: int, size: int) -> None:
    value = b"x" * size
    with SyncProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=262144) as producer:
        futures = [producer.send(TOPIC, value, partition=i % partitions) for i in range(records)]
        for f in futures:
            f.result(timeout=120)


def consumer_read(bootstrap: str, records: int, partitions: int) -> float:
    start = time.perf_counter()
    seen = 0
    with SyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
        while seen < records:
            seen += len(consumer.poll(1000))
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-source-") as tmp:
        broker = BrokerProcess(Path(tmp) / "broker", {"trioka.telemetry.enable": "false"})
        try:
            broker.start(60)
            with SyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
                admin.create_topic(TOPIC, a.partitions, 1)
            produce(broker.bootstrap, a.records, a.partitions, a.size)
            spark = build_session("local[2]")
            df = (spark.read.format("trioka").option("bootstrap.servers", broker.bootstrap)
                  .option("topic", TOPIC).load())  # fmt: skip
            t = time.perf_counter()
            assert df.count() == a.records
            warmup = time.perf_counter() - t
            times: dict[str, list[float]] = {"consumer": [], "spark count": [], "spark sum": []}
            for _ in range(a.runs):
                times["consumer"].append(consumer_read(broker.bootstrap, a.records, a.partitions))
                t = time.perf_counter()
                assert df.count() == a.records
                times["spark count"].append(time.perf_counter() - t)
                t = time.perf_counter()
                total = df.agg(F.sum(F.length("value"))).first()[0]
                times["spark sum"].append(time.perf_counter() - t)
                assert total == a.records * a.size
            spark.stop()
        finally:
            broker.cleanup()
    print(
        f"# trioka source read, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{a.records} records x {a.size} B over {a.partitions} partitions, {a.runs} runs "
        f"(median, min); first Spark read (workers start): {warmup:.1f} s"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:12s} {a.records / med:>10,.0f} records/s  (median {med:.2f} s, "
              f"min {min(ts):.2f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
