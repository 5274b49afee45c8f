"""Recovery after damage: cut segment tails at random bytes, flip bytes in the middle and at
the end of segments (seeded), then open the log as after an unclean stop with the recovery
point at 0, so every segment is re-scanned.

Each time the log must end exactly at the first offset of the damaged batch, serve every
record before it unchanged and nothing after it. The CRC covers a batch from its attributes on;
a damaged base offset or leader epoch (outside the CRC) is caught by the offset-contiguity and
leader-epoch-checkpoint checks, so every byte of a segment is protected.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.record_batch import Record, read_header
from storage import Log, LogConfig
from tests.unit.storage.storage_helpers import batch, read_all

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=200, segment_ms=10**12)
SEED = 20261122


class BatchAt(NamedTuple):
    position: int
    size: int
    base_offset: int


class Pristine(NamedTuple):
    directory: Path
    segments: list[tuple[str, list[BatchAt]]]  # file name, batches in it
    records: list[Record]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    root = tmp_path_factory.mktemp("pristine")
    rng = random.Random(SEED)
    log = Log.open(root / "t-0", CONFIG)
    for i in range(90):
        values = [rng.randbytes(rng.randint(0, 60)) for _ in range(rng.randint(1, 5))]
        log.append_as_leader(batch(values, ts=1_000 + 10 * i), leader_epoch=i // 25)
    records = read_all(log)
    log.close()
    segments = []
    for seg in log.segments:
        data = Path(seg.log_path).read_bytes()
        batches, pos = [], 0
        while pos < len(data):
            h = read_header(data, pos)
            batches.append(BatchAt(pos, h.size, h.base_offset))
            pos += h.size
        segments.append((os.path.basename(seg.log_path), batches))
    assert len(segments) >= 5
    return Pristine(root / "t-0", segments, records)


def damaged_batch(batches: list[BatchAt], byte: int) -> BatchAt:
    return next(b for b in batches if b.position <= byte < b.position + b.size)


def check_recovered(
    pristine: Pristine, work: Path, seg_index: int, bad: BatchAt, what: str
) -> None:
    log = Log.open(work, CONFIG, recovery_point=0, clean_shutdown=False)
    try:
        assert log.log_end_offset == bad.base_offset, what
        names = sorted(n for n in os.listdir(work) if n.endswith(".log"))
        assert names == [name for name, _ in pristine.segments[: seg_index + 1]], what
        assert os.path.getsize(work / names[-1]) == bad.position, what
        assert read_all(log) == pristine.records[: bad.base_offset], what
        assert log.read(bad.base_offset, 1 << 20).data == b"", what
        with pytest.raises(KafkaError) as exc:
            log.read(bad.base_offset + 1, 100)
        assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert all(start < max(bad.base_offset, 1) for _e, start in log.epoch_entries()), what
    finally:
        log.close()
    # What recovery left is a consistent log: a clean open sees the same, and it takes writes.
    again = Log.open(work, CONFIG, clean_shutdown=True)
    assert again.log_end_offset == bad.base_offset, what
    again.append_as_leader(batch(1), leader_epoch=9)
    assert read_all(again)[-1].offset == bad.base_offset, what
    again.close()


@pytest.mark.parametrize("kind", ["cut", "flip-middle", "flip-end"])
def test_recovery_truncates_exactly_at_the_damage(
    pristine: Pristine, shm_tmp: Path, kind: str
) -> None:
    rng = random.Random(f"{SEED}-{kind}")
    iterations = 250
    for n in range(iterations):
        work = shm_tmp / f"{n}" / "t-0"
        shutil.copytree(pristine.directory, work)
        seg_index = rng.randrange(len(pristine.segments))
        name, batches = pristine.segments[seg_index]
        size = batches[-1].position + batches[-1].size
        path = work / name
        if kind == "cut":
            byte = rng.randrange(size)  # keep `byte` bytes
            os.truncate(path, byte)
        else:
            if kind == "flip-middle":
                byte = rng.randrange(size)
            else:
                byte = rng.randrange(max(0, size - 80), size)
            data = bytearray(path.read_bytes())
            data[byte] ^= rng.randint(1, 255)
            path.write_bytes(bytes(data))
        bad = damaged_batch(batches, byte)
        what = f"{kind} iteration {n}: {name} byte {byte} (batch at {bad.position})"
        check_recovered(pristine, work, seg_index, bad, what)
        shutil.rmtree(work.parent)


def test_every_header_byte_is_protected(pristine: Pristine, shm_tmp: Path) -> None:
    """Flip each of the 61 header bytes of a batch in the middle of a segment, one at a time,
    including base offset and leader epoch, which the CRC does not cover."""
    seg_index = 2
    name, batches = pristine.segments[seg_index]
    bad = batches[len(batches) // 2]
    for i in range(61):
        work = shm_tmp / f"h{i}" / "t-0"
        shutil.copytree(pristine.directory, work)
        data = bytearray((work / name).read_bytes())
        data[bad.position + i] ^= 0x10
        (work / name).write_bytes(bytes(data))
        check_recovered(pristine, work, seg_index, bad, f"header byte {i}")
        shutil.rmtree(work.parent)


def test_damage_before_the_recovery_point_is_trusted(pristine: Pristine, shm_tmp: Path) -> None:
    """Kafka's rule: segments wholly below the recovery point are not re-scanned."""
    work = shm_tmp / "t-0"
    shutil.copytree(pristine.directory, work)
    name, batches = pristine.segments[0]
    data = bytearray((work / name).read_bytes())
    data[batches[1].position + 30] ^= 0xFF  # inside records: only a CRC check would notice
    (work / name).write_bytes(bytes(data))
    rp = pristine.segments[1][1][0].base_offset
    log = Log.open(work, CONFIG, recovery_point=rp, clean_shutdown=False)
    assert log.log_end_offset == len(pristine.records)
    log.close()
