"""format("trioka") against a real broker process: batch reads with starting/ending offsets,
streaming with availableNow (memory sink and Parquet) and processingTime."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

from analytics.schemas import RAW_SCHEMA
from client.sync import SyncAdmin, SyncProducer
from tests.support.broker_process import BrokerProcess

TOPIC = "events"
PARTITIONS = 3
BASE_TS = 1_790_000_000_000


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Records i in [first, first + count): partition i % 3, key k<i>, value v<i>, timestamp
    BASE_TS + i."""
    with SyncProducer(bootstrap_servers=bootstrap, linger_ms=1) as producer:
        futures = [
            producer.send(topic, f"v{i}".encode(), f"k{i}".encode(), partition=i % PARTITIONS,
                          timestamp_ms=BASE_TS + i)
            for i in range(first, first + count)
        ]  # fmt: skip
        for f in futures:
            f.result(timeout=30)


@pytest.fixture
def loaded(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    with SyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic(TOPIC, PARTITIONS, 1)
        admin.create_topic("other", 1, 1)
    produce(broker.bootstrap, TOPIC, 0, 300)
    yield broker


def reader(spark: Any, broker: BrokerProcess, **options: str) -> Any:
    r = spark.read.format("trioka").option("bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode())
        for r in df.collect()
    )


def expected(numbers: range | list[int]) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value) of records i: record i is offset i // 3 of i % 3."""
    return sorted((i % PARTITIONS, i // PARTITIONS, f"k{i}", f"v{i}") for i in numbers)


def test_batch_reads_every_record_with_the_kafka_schema(spark: Any, loaded: BrokerProcess) -> None:
    df = reader(spark, loaded, topic=TOPIC).load()
    assert df.schema.simpleString() == RAW_SCHEMA.simpleString()
    assert df.rdd.getNumPartitions() == PARTITIONS  # one input partition per topic-partition
    assert rows(df) == expected(range(300))
    first = df.where("partition = 1 and offset = 0").collect()[0]
    assert first.topic == TOPIC and first.timestampType == 0
    assert round(first.timestamp.timestamp() * 1000) == BASE_TS + 1  # naive local time


def test_batch_starting_and_ending_offsets(spark: Any, loaded: BrokerProcess) -> None:
    df = reader(
        spark, loaded, topic=TOPIC,
        startingOffsets='{"events": {"0": 10, "1": -2, "2": 95}}',
        endingOffsets='{"events": {"0": 20, "1": 3, "2": -1}}',
    ).load()  # fmt: skip
    want = [i for i in range(300) if (i % 3, 10 <= i // 3 < 20) == (0, True)]
    want += [i for i in range(300) if i % 3 == 1 and i // 3 < 3]
    want += [i for i in range(300) if i % 3 == 2 and i // 3 >= 95]
    assert rows(df) == expected(want)


def test_batch_reads_several_topics(spark: Any, loaded: BrokerProcess) -> None:
    produce(loaded.bootstrap, "other", 0, 1)  # partition 0 % 3 = 0: fits one partition
    df = reader(spark, loaded, topic=f"{TOPIC}, other").load()
    counts = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {TOPIC: 300, "other": 1}


def test_bad_options_and_unknown_topics_fail_with_clear_errors(
    spark: Any, loaded: BrokerProcess
) -> None:
    with pytest.raises(Exception, match="topic 'nope' does not exist"):
        reader(spark, loaded, topic="nope").load().collect()
    with pytest.raises(Exception, match=r"must name every partition.*missing events-1, events-2"):
        reader(spark, loaded, topic=TOPIC, startingOffsets='{"events": {"0": 1}}').load().collect()
    with pytest.raises(Exception, match="ending offset 999 is past the partition's high watermark"):
        reader(
            spark, loaded, topic=TOPIC,
            endingOffsets='{"events": {"0": 999, "1": -1, "2": -1}}',
        ).load().collect()  # fmt: skip
    with pytest.raises(Exception, match=r"latest .* is not allowed in a batch read"):
        reader(spark, loaded, topic=TOPIC, startingOffsets="latest").load().collect()


def stream(spark: Any, broker: BrokerProcess, **options: str) -> Any:
    r = spark.readStream.format("trioka").option("bootstrap.servers", broker.bootstrap)
    for k, v in {"topic": TOPIC, **options}.items():
        r = r.option(k, v)
    return r.load()


def memory_rows(spark: Any, name: str) -> list[tuple[Any, ...]]:
    return rows(spark.sql(f"select * from {name}"))


def test_available_now_in_micro_batches_of_max_offsets_per_trigger(
    spark: Any, loaded: BrokerProcess, tmp_path: Path
) -> None:
    query = (
        stream(spark, loaded, startingOffsets="earliest", maxOffsetsPerTrigger="120")
        .writeStream.format("memory").queryName("batches")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(120), "availableNow did not finish in 120 s"
    assert query.exception() is None
    assert memory_rows(spark, "batches") == expected(range(300))
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    assert batches == [120, 120, 60]


def test_available_now_into_parquet_resumes_from_its_checkpoint(
    spark: Any, loaded: BrokerProcess, tmp_path: Path
) -> None:
    out, checkpoint = str(tmp_path / "parquet"), str(tmp_path / "checkpoint")

    def run_once() -> None:
        query = (
            stream(spark, loaded, startingOffsets='{"events": {"0": 50, "1": 50, "2": 50}}')
            .writeStream.format("parquet").option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )  # fmt: skip
        assert query.awaitTermination(120), "availableNow did not finish in 120 s"
        assert query.exception() is None

    run_once()
    assert rows(spark.read.parquet(out)) == expected(range(150, 300))
    produce(loaded.bootstrap, TOPIC, 300, 30)
    run_once()  # starts where the checkpoint says, not at startingOffsets
    assert rows(spark.read.parquet(out)) == expected(range(150, 330))


def test_processing_time_picks_up_new_records(
    spark: Any, loaded: BrokerProcess, tmp_path: Path
) -> None:
    query = (
        stream(spark, loaded)  # streaming default: latest, so only what comes next
        .writeStream.format("memory").queryName("live")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress:  # the first batch fixed the starting offsets
            assert time.monotonic() < deadline, "no micro-batch within 60 s"
            query.awaitTermination(0.2)
        produce(loaded.bootstrap, TOPIC, 300, 60)
        while len(memory_rows(spark, "live")) < 60:
            assert time.monotonic() < deadline, "the new records did not arrive within 60 s"
            assert query.exception() is None
            query.awaitTermination(0.2)
        assert memory_rows(spark, "live") == expected(range(300, 360))
    finally:
        query.stop()


def test_an_empty_topic_is_an_empty_frame(spark: Any, loaded: BrokerProcess) -> None:
    df = reader(spark, loaded, topic="other").load()
    assert df.count() == 0 and df.schema.simpleString() == RAW_SCHEMA.simpleString()
