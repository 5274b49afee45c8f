"""The record-batch format (DESIGN section 3): Kafka's RecordBatch v2 header, msgpack records.

Layout (big-endian), 61 header bytes as in Kafka:

    0  base_offset            int64   stamped by the leader; not covered by the CRC
    8  batch_length           int32   bytes after this field (so a batch is 12 + batch_length)
   12  partition_leader_epoch int32   stamped by the leader; not covered by the CRC
   16  magic                  int8    2
   17  crc                    uint32  CRC32C of every byte from `attributes` to the end
   21  attributes             int16   bits 0-2 compression, bit 3 timestamp type,
                                      bit 4 transactional, bit 5 control
   23  last_offset_delta      int32
   27  base_timestamp         int64   ms
   35  max_timestamp          int64   ms
   43  producer_id            int64   -1 when not idempotent
   51  producer_epoch         int16
   53  base_sequence          int32
   57  records_count          int32
   61  records                msgpack array of [attributes, timestamp_delta, offset_delta,
                              key, value, headers], compressed as a whole when attributes say so

The broker reads only the header (validate, stamp offsets) and never decodes records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import crc32c as _crc32c
import msgpack

from protocol.errors import CorruptRecordBatchError

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes before batch_length counts
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LENGTH_PREFIX = struct.Struct(">qi")
_OFFSET_EPOCH = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20


class Compression(IntEnum):
    """Kafka's compression.type codes (gzip and snappy are not supported by trioka)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        try:
            codec = cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression.type {name!r}; expected one of none, lz4, zstd"
            ) from None
        if codec not in SUPPORTED_COMPRESSION:
            raise ValueError(f"compression.type {name!r} is not supported; use none, lz4 or zstd")
        return codec


SUPPORTED_COMPRESSION = frozenset({Compression.NONE, Compression.LZ4, Compression.ZSTD})


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a client sees it. `offset` and `timestamp` are absolute."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int = -1
    offset: int = -1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes on disk and on the wire."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def _compress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    if codec is Compression.LZ4:
        import lz4.frame

        return lz4.frame.compress(data)
    raise ValueError(f"compression {codec.name} is not supported")


def _decompress(codec: Compression, data: bytes) -> bytes:
    try:
        if codec is Compression.NONE:
            return data
        if codec is Compression.ZSTD:
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
        if codec is Compression.LZ4:
            import lz4.frame

            return lz4.frame.decompress(data)
    except Exception as exc:  # each codec raises its own error types
        raise CorruptRecordBatchError(f"cannot decompress {codec.name} records: {exc}") from exc
    raise CorruptRecordBatchError(f"unsupported compression codec {int(codec)} in attributes")


def build_batch(
    records: Sequence[Record],
    *,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes: int = 0,
) -> bytes:
    """Encode records into one batch. Record timestamps of -1 take `base_timestamp`."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    if base_timestamp is None:
        base_timestamp = next((r.timestamp for r in records if r.timestamp >= 0), 0)
    max_ts = base_timestamp
    rows = []
    for delta, rec in enumerate(records):
        ts = rec.timestamp if rec.timestamp >= 0 else base_timestamp
        max_ts = max(max_ts, ts)
        rows.append([0, ts - base_timestamp, delta, rec.key, rec.value, list(rec.headers)])
    payload = _compress(compression, msgpack.packb(rows, use_bin_type=True))
    return encode_batch_bytes(
        payload,
        attributes=(attributes & ~COMPRESSION_MASK) | int(compression),
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_ts,
        records_count=len(records),
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def encode_batch_bytes(
    payload: bytes,
    *,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    records_count: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Frame an already-encoded records payload with a header and its CRC."""
    buf = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(
        buf, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch,
        MAGIC, 0, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
        producer_epoch, base_sequence, records_count,
    )  # fmt: skip
    buf[HEADER_SIZE:] = payload
    _CRC.pack_into(buf, CRC_OFFSET, _crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos` without checking the CRC. Raises on a short or bad header."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordBatchError(
            f"truncated batch header: {len(buf) - pos} of {HEADER_SIZE} bytes", position=pos
        )
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordBatchError(
            f"unsupported magic {header.magic} (expected {MAGIC})", position=pos
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordBatchError(
            f"batch_length {header.batch_length} is shorter than the header", position=pos
        )
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordBatchError(
            f"negative records_count ({header.records_count}) or last_offset_delta "
            f"({header.last_offset_delta})",
            position=pos,
        )
    return header


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse and fully check the batch at `pos`: length, magic, CRC. Returns its header."""
    header = read_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordBatchError(
            f"truncated batch: header says {header.size} bytes, {len(buf) - pos} present",
            position=pos,
        )
    actual = _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end])
    if actual != header.crc:
        raise CorruptRecordBatchError(
            f"CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}", position=pos
        )
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch in `buf`. Raises at the first bad one.

    A buffer that ends part-way through a batch is a truncated batch: an error, since both
    producers and Fetch responses only carry whole batches.
    """
    pos = 0
    check = validate_batch if verify_crc else _read_whole_header
    while pos < len(buf):
        header = check(buf, pos)
        yield pos, header
        pos += header.size


def _read_whole_header(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    header = read_header(buf, pos)
    if pos + header.size > len(buf):
        raise CorruptRecordBatchError(
            f"truncated batch: header says {header.size} bytes, {len(buf) - pos} present",
            position=pos,
        )
    return header


def stamp(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Set base offset and partition leader epoch in place (the CRC does not cover them)."""
    _OFFSET_EPOCH.pack_into(buf, pos, base_offset)
    _EPOCH.pack_into(buf, pos + 12, leader_epoch)


def decode_records(buf: bytes | bytearray | memoryview, pos: int = 0) -> list[Record]:
    """Validate the batch at `pos` and decode its records (client side only)."""
    header = validate_batch(buf, pos)
    payload = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    payload = _decompress(header.compression, payload)
    try:
        rows = msgpack.unpackb(payload, use_list=True, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise CorruptRecordBatchError(
            f"records are not valid msgpack: {exc}", position=pos
        ) from exc
    if not isinstance(rows, list) or len(rows) != header.records_count:
        raise CorruptRecordBatchError(
            f"records_count is {header.records_count} but the payload holds "
            f"{len(rows) if isinstance(rows, list) else 'no list of'} records",
            position=pos,
        )
    out = []
    for row in rows:
        try:
            _attrs, ts_delta, off_delta, key, value, headers = row
            out.append(
                Record(
                    value=value,
                    key=key,
                    headers=tuple((str(k), bytes(v)) for k, v in headers),
                    timestamp=header.base_timestamp + ts_delta,
                    offset=header.base_offset + off_delta,
                )
            )
        except (TypeError, ValueError) as exc:
            raise CorruptRecordBatchError(f"malformed record {row!r:.80}", position=pos) from exc
    return out


@dataclass(slots=True)
class BatchBuilder:
    """Accumulates records for one partition until `batch.size`; used by the producer."""

    compression: Compression = Compression.NONE
    rows: list[list[object]] = field(default_factory=list)
    size_estimate: int = HEADER_SIZE
    base_timestamp: int = -1
    max_timestamp: int = -1

    def append(
        self,
        value: bytes | None,
        key: bytes | None,
        timestamp: int,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> int:
        """Add a record; returns its offset delta within the batch."""
        if self.base_timestamp < 0:
            self.base_timestamp = timestamp
        self.max_timestamp = max(self.max_timestamp, timestamp)
        delta = len(self.rows)
        self.rows.append([0, timestamp - self.base_timestamp, delta, key, value, list(headers)])
        self.size_estimate += 16 + (len(key) if key else 0) + (len(value) if value else 0)
        return delta

    def __len__(self) -> int:
        return len(self.rows)

    def build(
        self,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
    ) -> bytes:
        payload = _compress(self.compression, msgpack.packb(self.rows, use_bin_type=True))
        return encode_batch_bytes(
            payload,
            attributes=int(self.compression),
            last_offset_delta=len(self.rows) - 1,
            base_timestamp=self.base_timestamp,
            max_timestamp=self.max_timestamp,
            records_count=len(self.rows),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
