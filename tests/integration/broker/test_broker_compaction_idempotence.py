"""Idempotence and compaction together on a real combined broker: an idempotent producer's
keyed batches on a compacted topic are all superseded and cleaned away, the broker is
SIGKILLed while its recovery-point checkpoint still lags the cleaning (as it does for up to
log.flush.offset.checkpoint.interval.ms), and a retried batch is still answered as a duplicate
with its original offset: the cleaner kept that producer's last batch (empty), as Kafka's does,
so rebuilding the producer state from the cleaned log finds it. The recovery of the gapped log
(which runs before the broker knows the topic is compacted) keeps every batch."""

from __future__ import annotations

from pathlib import Path

from protocol.errors import ErrorCode
from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch, iter_batches
from storage.checkpoints import read_offsets
from storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from tests.integration.broker.broker_wire import create_topic, produce
from tests.integration.broker.test_broker_idempotence import new_ids
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

TOPIC = "idem-compacted"
BROKER = {
    "log.cleaner.backoff.ms": 100,
    "log.flush.scheduler.interval.ms": 100,
    # The recovery-point checkpoint is not written before the kill: the reopened log is
    # re-scanned from offset 0 and its producer state rebuilt from the cleaned batches.
    "log.flush.offset.checkpoint.interval.ms": 3_600_000,
}
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "delete.retention.ms": "0",
    "min.cleanable.dirty.ratio": "0.1",
}
KEYS = 4


def keyed_batch(pid: int, seq: int, key: bytes, value: bytes) -> bytes:
    return build_batch(
        [Record(value=value, key=key, timestamp=1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )


def log_batches(broker: BrokerProcess) -> list[tuple[int, int, int]]:
    """(base offset, producer id, record count) of every batch on disk."""
    out = []
    for seg in sorted((Path(broker.log_dirs[0]) / f"{TOPIC}-0").glob("*.log")):
        data = seg.read_bytes()
        out += [(h.base_offset, h.producer_id, h.records_count) for _p, h in iter_batches(data)]
    return out


def cleaned_up_to(broker: BrokerProcess) -> int:
    path = Path(broker.log_dirs[0]) / CLEANER_OFFSET_CHECKPOINT
    return read_offsets(str(path)).get(TopicPartition(TOPIC, 0), 0)


async def test_retry_after_cleaning_and_sigkill_is_a_duplicate(broker_factory) -> None:
    broker = broker_factory(BROKER)
    first, second = await new_ids(broker, 2)
    filler = b"x" * 300
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, TOPIC, partitions=1, configs=TOPIC_CONFIGS)
        originals = []
        for seq in range(20):
            key = b"k%d" % (seq % KEYS)
            r = await produce(c, TOPIC, 0, keyed_batch(first, seq, key, filler), acks=-1)
            assert r.error_code == 0, r
            originals.append(r.base_offset)
        # Another producer supersedes every key many times over: all of the first producer's
        # batches become cleanable garbage, and the segments roll past them.
        for seq in range(60):
            key = b"k%d" % (seq % KEYS)
            r = await produce(c, TOPIC, 0, keyed_batch(second, seq, key, filler), acks=-1)
            assert r.error_code == 0, r
    last = originals[-1]
    await wait_until(lambda: cleaned_up_to(broker) > last, within=30, every=0.1)
    kept = [b for b in log_batches(broker) if b[1] == first]
    # Only its last batch survives, without records; the others are gone.
    assert kept == [(last, first, 0)], kept

    await broker.akill()
    before = log_batches(broker)
    await broker.astart()
    # Recovery (topic configs unknown yet) kept the cleaned, gapped log whole.
    assert log_batches(broker) == before
    async with await WireClient.connect(broker.host, broker.port) as c:
        retry = keyed_batch(first, 19, b"k%d" % (19 % KEYS), filler)
        r = await produce(c, TOPIC, 0, retry, acks=-1)
        assert (r.error_code, r.base_offset) == (0, last), r
        r = await produce(c, TOPIC, 0, keyed_batch(first, 21, b"k0", filler), acks=-1)
        assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, r
        r = await produce(c, TOPIC, 0, keyed_batch(first, 20, b"k0", filler), acks=-1)
        assert r.error_code == 0 and r.base_offset > last, r
