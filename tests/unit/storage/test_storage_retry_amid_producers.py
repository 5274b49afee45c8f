"""Retries of idempotent batches when other producers write to the same partition in between
(as in chaos runs: several producers round-robin over the partitions). Kafka's semantics: the
leader keeps the metadata of each producer's last five batches (ProducerStateEntry
.NUM_BATCHES_TO_RETAIN) and answers a retry of any of them, sent alone, with ITS original
offsets and no error (UnifiedLog.analyzeAndValidateProducerState); a retry older than those
five is OUT_OF_ORDER_SEQUENCE_NUMBER (ProducerAppendInfo.checkSequence: the broker never sends
DUPLICATE_SEQUENCE_NUMBER). Followers build the same state while they replicate; after a
restart it comes back from the newest snapshot + the log after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.record_batch import Record, build_batch
from storage import Log, LogConfig
from storage.producer_state import (
    BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    snapshot_file_name,
)
from tests.unit.storage.storage_helpers import read_all

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=128, segment_ms=10**12)
PID, OTHER = 77, 78


def pbatch(seq: int, pid: int = PID, n: int = 2) -> bytes:
    return build_batch(
        [Record(value=b"%d-v%d" % (pid, seq + i), timestamp=1_000 + seq) for i in range(n)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )


def interleaved(log: Log, batches: int = 8) -> list[int]:
    """PID's 2-record batches (seqs 0, 2, ...) each followed by one of OTHER's: PID's base
    offsets, three apart."""
    bases = []
    for k in range(batches):
        bases.append(log.append_as_leader(pbatch(2 * k), 0).first_offset)
        log.append_as_leader(pbatch(k, OTHER, n=1), 0)
    return bases


def state_of(log: Log) -> dict[int, tuple[int, list[BatchMetadata]]]:
    return {
        pid: (e.epoch, list(e.batches)) for pid, e in sorted(log.producers.state.entries.items())
    }


def assert_each_cached_retry_gets_its_offsets(log: Log, bases: list[int]) -> None:
    end, batches = log.log_end_offset, len(bases)
    for k in range(batches - BATCHES_TO_RETAIN, batches):
        info = log.append_as_leader(pbatch(2 * k), 0)
        assert info.duplicate, k
        assert (info.first_offset, info.last_offset) == (bases[k], bases[k] + 1), k
    assert log.log_end_offset == end  # nothing written again


def test_the_state_keeps_each_producers_last_five_batches() -> None:
    state = ProducerStateManager("t-0")
    for k in range(7):
        state.update(PID, 0, 2 * k, 2 * k + 1, 3 * k, 3 * k + 1, 1_000 + k)
    entry = state.get(PID)
    assert entry is not None and len(entry.batches) == BATCHES_TO_RETAIN == 5
    assert list(entry.batches) == [
        BatchMetadata(2 * k, 2 * k + 1, 3 * k, 3 * k + 1, 1_000 + k) for k in range(2, 7)
    ]


def test_a_retry_of_any_cached_batch_gets_its_original_offsets_amid_other_producers(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    bases = interleaved(log)
    assert bases == [3 * k for k in range(8)]
    assert_each_cached_retry_gets_its_offsets(log, bases)
    values = [r.value for r in read_all(log)]
    assert len(values) == len(set(values)) == 8 * 3  # each value once


def test_a_retry_older_than_the_cached_batches_is_out_of_order_not_a_duplicate(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    interleaved(log)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(pbatch(4), 0)  # the third batch: six newer ones since
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_followers_build_the_leaders_state_and_answer_retries_after_a_failover(
    tmp_path: Path,
) -> None:
    leader = Log.open(tmp_path / "a" / "t-0", CONFIG)
    follower = Log.open(tmp_path / "b" / "t-0", CONFIG)
    bases = interleaved(leader)
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).data)
    assert state_of(follower) == state_of(leader)
    assert_each_cached_retry_gets_its_offsets(follower, bases)  # the follower now leads


@pytest.mark.parametrize("stop", ["clean", "unclean"])
def test_snapshot_plus_log_rebuild_keeps_the_batch_metadata(tmp_path: Path, stop: str) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    bases = interleaved(log, batches=10)
    before = state_of(log)
    rolled = [s.base_offset for s in log.segments[1:]]
    assert rolled, "no roll: no snapshot between the batches"
    if stop == "clean":
        log.close()
        reopened = Log.open(tmp_path / "t-0", CONFIG, clean_shutdown=True)
    else:
        log.release_handles()  # a crash: the newest snapshot is the last roll's
        reopened = Log.open(
            tmp_path / "t-0", CONFIG, clean_shutdown=False, recovery_point=rolled[-1]
        )
    assert state_of(reopened) == before
    assert_each_cached_retry_gets_its_offsets(reopened, bases)


def test_a_snapshot_holds_every_cached_batch_not_only_the_last(tmp_path: Path) -> None:
    """Kafka's snapshot keeps only each producer's last batch (ProducerStateManager
    .writeSnapshot), so after a restart from a snapshot alone it can answer only a retry of
    that one. trioka keeps all five: a superset, no retry Kafka dedups is refused here."""
    log = Log.open(tmp_path / "t-0", CONFIG)
    interleaved(log)
    log.close()
    path = Path(log.directory) / snapshot_file_name(log.log_end_offset)
    entries = {e.producer_id: e for e in decode_snapshot(path.read_bytes())}
    assert isinstance(entries[PID], ProducerEntry)
    assert len(entries[PID].batches) == BATCHES_TO_RETAIN
    assert list(entries[PID].batches) == list(log.producers.state.entries[PID].batches)
