"""Helpers shared by the storage tests: batches, reading a whole log back, directory copies."""

from __future__ import annotations

from protocol.record_batch import Compression, Record, build_batch, decode_records, iter_batches
from storage import Log, LogConfig

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_ms=10**12)


def batch(
    values: list[bytes] | int,
    *,
    ts: int = 1_000,
    key: bytes | None = None,
    compression: Compression = Compression.NONE,
    size: int = 10,
) -> bytes:
    """A batch of records; an int gives that many records of `size` bytes each."""
    if isinstance(values, int):
        values = [bytes([65 + i % 26]) * size for i in range(values)]
    return build_batch(
        [Record(value=v, key=key, timestamp=ts + i) for i, v in enumerate(values)],
        compression=compression,
    )


def records_of(data: bytes) -> list[Record]:
    return [r for pos, _h in iter_batches(data) for r in decode_records(data, pos)]


def read_all(log: Log, start: int | None = None, max_bytes: int = 1 << 20) -> list[Record]:
    """Every record from `start` (default: log start) to the end, following read()."""
    offset = log.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).data
        assert data, f"empty read at {offset} below the log end {log.log_end_offset}"
        recs = [r for r in records_of(data) if r.offset >= offset]
        assert recs, f"read at {offset} returned no record at or after it"
        out.extend(recs)
        offset = recs[-1].offset + 1
    return out
