"""A real broker facing damaged or foreign files in its log dir: meta.properties with binary
garbage or another cluster's id stops the start with one line naming the file; a damaged
checkpoint is named in one warning and costs a longer recovery, never data. An independent
probe of 200d5c1 saw a 76-line UnicodeDecodeError that named no file."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import trio

from client import Admin, Consumer, KafkaError, Producer, TopicPartition
from protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess, BrokerStartError

GARBAGE = bytes(range(128, 256)) * 4


def start_fails(broker: BrokerProcess) -> str:
    with pytest.raises(BrokerStartError) as info:
        broker.start()
    lines = [line for line in broker.log_tail(200).splitlines() if line.startswith("error:")]
    assert len(lines) == 1, str(info.value)
    assert "Traceback" not in broker.log_tail(200)
    return lines[0]


def test_garbage_meta_properties_stops_the_start_naming_the_file(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(start=False)
    data = Path(broker.log_dirs[0])
    data.mkdir(parents=True)
    (data / "meta.properties").write_bytes(GARBAGE)
    line = start_fails(broker)
    assert str(data / "meta.properties") in line and "not UTF-8" in line, line


def test_another_clusters_log_dir_is_refused(broker_factory) -> None:
    """A broker told its cluster (cluster.id, as `trioka cluster up` and compose do) refuses a
    log dir whose meta.properties names another (a standalone broker without cluster.id takes
    its log dir's, as a Kafka node formatted with that id would)."""
    broker: BrokerProcess = broker_factory({"cluster.id": "ThisClusterIdAAAAAAAAA"})
    broker.stop()
    meta = Path(broker.log_dirs[0]) / "meta.properties"
    text = meta.read_text()
    assert "cluster.id=" in text
    lines = [
        "cluster.id=AnotherClusterIdAAAAAA" if line.startswith("cluster.id=") else line
        for line in text.splitlines()
    ]
    meta.write_text("\n".join(lines) + "\n")
    line = start_fails(broker)
    assert "AnotherClusterIdAAAAAA" in line and str(meta) in line, line


async def test_a_garbage_checkpoint_is_named_and_nothing_is_lost(broker_factory) -> None:
    broker: BrokerProcess = broker_factory()
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("kept", 1, 1)
    async with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
        for i in range(10):
            await producer.send_and_wait("kept", b"v%d" % i, partition=0)
    broker.stop()
    checkpoint = Path(broker.log_dirs[0]) / "recovery-point-offset-checkpoint"
    checkpoint.write_bytes(GARBAGE)
    broker.start()
    warning = broker.wait_for_event("checkpoint_unreadable")
    assert warning["path"] == str(checkpoint) and "not UTF-8" in warning["problem"]
    tp = TopicPartition("kept", 0)
    async with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        with trio.fail_after(20):
            assert (await consumer.end_offsets([tp]))[tp] == 10


async def test_a_consumer_is_told_of_a_corrupt_batch_instead_of_waiting(broker_factory) -> None:
    """A damaged batch length in a live segment: the leader answers CORRUPT_MESSAGE naming
    the file (Kafka's consumer raises on it: "Encountered corrupt message when fetching
    offset ..."), and poll() raises after the records before it. Before, the broker answered
    KAFKA_STORAGE_ERROR, which the consumer retried forever: `trioka consume` hung."""
    broker: BrokerProcess = broker_factory()
    tp = TopicPartition("damaged", 0)
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("damaged", 1, 1)
    async with Producer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0) as p:
        for i in range(3):
            await p.send_and_wait("damaged", b"v%d" % i, partition=0)
    segment = Path(broker.log_dirs[0]) / "damaged-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    second = 12 + struct.unpack_from(">i", data, 8)[0]  # where the second batch starts
    struct.pack_into(">i", data, second + 8, 7)  # its batch_length: shorter than a header
    segment.write_bytes(bytes(data))
    seen: list[bytes | None] = []
    async with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        with trio.fail_after(20), pytest.raises(KafkaError) as info:
            while True:
                seen += [r.value for r in await c.poll(200)]
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert str(segment) in str(info.value)
    assert seen == [b"v0"]
    assert broker.running
