"""The record-batch format (docs/internals.md, protocol/): Kafka's RecordBatch v2 header, msgpack
records.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple, TypeVar

import crc32c as _crc32c
import msgpack

from protocol.errors import CorruptRecordBatchError

R = TypeVar("R")

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
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1
    offset: int = -1


class BatchHeader(NamedTuple):
    """The 61 header bytes, parsed. A NamedTuple: the broker builds one per produced batch."""

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
        codec = self.attributes & COMPRESSION_MASK
        if codec > Compression.ZSTD:
            raise CorruptRecordBatchError(f"unknown compression codec {codec} in attributes")
        return Compression(codec)

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


def compress_payload(codec: Compression, data: bytes) -> bytes:
    """Compress an encoded records array as a batch of `codec` holds it (the log cleaner
    re-encodes the batches it filters)."""
    return _compress(codec, data)


def _decompress(codec: Compression, data: bytes, limit: int) -> bytes:
    """Decompress one whole frame of `codec`; at most `limit` bytes come out (a small hostile
    batch must not inflate into gigabytes), and a truncated or trailing-garbage frame is an
    error, not a silently shorter payload."""
    if codec is Compression.NONE:
        return data
    if codec is Compression.ZSTD:
        out = _zstd_decompress(data, limit)
    elif codec is Compression.LZ4:
        out = _lz4_decompress(data, limit)
    else:
        raise CorruptRecordBatchError(
            f"unsupported compression codec {codec.name} ({int(codec)}) in attributes; "
            "trioka reads none, lz4 and zstd"
        )
    if len(out) > limit:
        raise CorruptRecordBatchError(
            f"{codec.name} records decompress to more than {limit} bytes (max_uncompressed_bytes)"
        )
    return out


_ZSTD_CHUNK = 1024  # input fed per step when the frame does not declare its size


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    import zstandard

    try:
        declared = zstandard.frame_content_size(data)
        obj = zstandard.ZstdDecompressor().decompressobj()
        if 0 <= declared <= limit:
            # libzstd checks the output against the declared size, so one step is bounded.
            out = obj.decompress(data)
        elif declared > limit:
            raise CorruptRecordBatchError(
                f"ZSTD records declare {declared} uncompressed bytes, more than {limit} "
                "(max_uncompressed_bytes)"
            )
        else:
            parts = []
            total = 0
            for i in range(0, len(data), _ZSTD_CHUNK):
                part = obj.decompress(data[i : i + _ZSTD_CHUNK])
                total += len(part)
                parts.append(part)
                if total > limit:
                    break
            out = b"".join(parts)
        complete = obj.eof
        trailing = len(obj.unused_data)
    except CorruptRecordBatchError:
        raise
    except Exception as exc:  # zstandard raises ZstdError, ValueError, ...
        raise CorruptRecordBatchError(f"cannot decompress ZSTD records: {exc}") from exc
    if len(out) <= limit:
        if not complete:
            raise CorruptRecordBatchError("cannot decompress ZSTD records: truncated frame")
        if trailing:
            raise CorruptRecordBatchError(
                f"cannot decompress ZSTD records: {trailing} bytes after the frame"
            )
    return out


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    import lz4.frame

    try:
        obj = lz4.frame.LZ4FrameDecompressor()
        out = obj.decompress(data, max_length=limit + 1)
    except Exception as exc:  # lz4 raises RuntimeError for every kind of bad input
        raise CorruptRecordBatchError(f"cannot decompress LZ4 records: {exc}") from exc
    if len(out) <= limit:
        if not obj.eof:
            raise CorruptRecordBatchError("cannot decompress LZ4 records: truncated frame")
        if obj.unused_data:
            raise CorruptRecordBatchError(
                f"cannot decompress LZ4 records: {len(obj.unused_data)} bytes after the frame"
            )
    return out


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
    """Encode records into one batch. Record timestamps of -1 take `base_timestamp` (default:
    the first record timestamp that is set, else 0). Raises ValueError for no records, and
    TypeError for a key, value or header of the wrong type."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    if base_timestamp is None:
        base_timestamp = next((r.timestamp for r in records if r.timestamp >= 0), 0)
    builder = BatchBuilder(compression=compression, base_timestamp=base_timestamp)
    for rec in records:
        ts = rec.timestamp if rec.timestamp >= 0 else base_timestamp
        builder.append(rec.value, rec.key, ts, rec.headers)
    return builder.build(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
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
    """Parse the header at `pos` without checking the CRC. Raises CorruptRecordBatchError on a
    short or bad header (length, magic, counts, compression codec)."""
    if pos < 0:
        raise ValueError(f"batch position must not be negative, got {pos}")
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
    if header.records_count > header.last_offset_delta + 1:
        # Compaction may leave fewer records than the offset span, never more.
        raise CorruptRecordBatchError(
            f"records_count {header.records_count} exceeds the offset span "
            f"(last_offset_delta {header.last_offset_delta})",
            position=pos,
        )
    if header.attributes & COMPRESSION_MASK > Compression.ZSTD:
        raise CorruptRecordBatchError(
            f"unknown compression codec {header.attributes & COMPRESSION_MASK} in attributes",
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


DEFAULT_MAX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024
"""decode_records refuses a compressed batch that inflates beyond this (a decompression bomb);
far above any batch a producer makes under max.message.bytes."""


def _record(
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
) -> Record:
    return Record(value, key, headers, timestamp, offset)  # type: ignore[arg-type]


def decode_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    factory: Callable[[int, int, bytes | None, bytes | None, tuple[Any, ...]], R] = _record,  # type: ignore[assignment]
    verify_crc: bool = True,
) -> list[R]:
    """Validate the batch at `pos` and decode its records (client side only).

    Any malformation raises CorruptRecordBatchError saying what is wrong: header, CRC,
    compression, msgpack, record count, or the shape of a record. Each record is built by
    `factory(offset, timestamp, key, value, headers)` (a Record by default), so a client can
    build its own record type without a second pass; `verify_crc=False` is Kafka's
    check.crcs=false.
    """
    return decode_batch_records(
        buf,
        pos,
        max_uncompressed_bytes=max_uncompressed_bytes,
        factory=factory,
        verify_crc=verify_crc,
    )[1]


def decode_batch_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    factory: Callable[[int, int, bytes | None, bytes | None, tuple[Any, ...]], R] = _record,  # type: ignore[assignment]
    verify_crc: bool = True,
) -> tuple[BatchHeader, list[R]]:
    """decode_records, also returning the batch's header (one parse for a consumer that needs
    the batch's size and next offset too)."""
    header = validate_batch(buf, pos) if verify_crc else _read_whole_header(buf, pos)
    payload = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    try:
        payload = _decompress(header.compression, payload, max_uncompressed_bytes)
    except CorruptRecordBatchError as exc:
        raise CorruptRecordBatchError(str(exc), position=pos) from exc
    n = len(payload)
    try:
        rows = msgpack.unpackb(
            payload,
            use_list=True,
            raw=False,
            strict_map_key=True,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n // 2,
            max_ext_len=n,
        )
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise CorruptRecordBatchError(
            f"records are not valid msgpack: {type(exc).__name__}: {exc}", position=pos
        ) from exc
    if type(rows) is not list:
        raise CorruptRecordBatchError(
            f"records payload is a msgpack {type(rows).__name__}, not an array", position=pos
        )
    if len(rows) != header.records_count:
        raise CorruptRecordBatchError(
            f"records_count is {header.records_count} but the payload holds {len(rows)} records",
            position=pos,
        )
    out = []
    base_timestamp = header.base_timestamp
    base_offset = header.base_offset
    last_delta = header.last_offset_delta
    previous = -1
    # The consumer's per-record hot path: one combined type test per record; the slow
    # _record_problem() runs only to name what is wrong (or for rows with extra fields).
    for i, row in enumerate(rows):
        ok = False
        if type(row) is list and len(row) == 6:
            attrs, ts_delta, off_delta, key, value, headers = row
            ok = (
                type(off_delta) is int
                and previous < off_delta <= last_delta
                and type(ts_delta) is int
                and type(attrs) is int
                and (value is None or type(value) is bytes)
                and (key is None or type(key) is bytes)
                and type(headers) is list
                and (not headers or _headers_ok(headers))
            )
        if not ok:
            problem = _record_problem(row, previous, last_delta)
            if problem is not None:
                raise CorruptRecordBatchError(f"record {i}: {problem}", position=pos)
            _attrs, ts_delta, off_delta, key, value, headers = row[:6]  # type: ignore[index]
        previous = off_delta
        out.append(
            factory(
                base_offset + off_delta,
                base_timestamp + ts_delta,
                key,
                value,
                tuple(map(tuple, headers)) if headers else (),
            )
        )
    return header, out


def _headers_ok(headers: list[object]) -> bool:
    for h in headers:
        if (
            type(h) is not list
            or len(h) != 2
            or type(h[0]) is not str
            or not (h[1] is None or type(h[1]) is bytes)
        ):
            return False
    return True


def _record_problem(row: object, previous: int, last_offset_delta: int) -> str | None:
    """What is wrong with one decoded record row, or None. Trailing extra fields are allowed
    (a newer producer may add some), as in message schemas."""
    if type(row) is not list:
        return f"expected an array, got {type(row).__name__}"
    if len(row) < 6:
        return (
            "expected 6 fields [attributes, timestamp_delta, offset_delta, key, value, "
            f"headers], got {len(row)}"
        )
    attrs, ts_delta, off_delta, key, value, headers = row[:6]
    for name, v in (("attributes", attrs), ("timestamp_delta", ts_delta)):
        if type(v) is not int:
            return f"{name} is {type(v).__name__}, not an integer"
    if type(off_delta) is not int:
        return f"offset_delta is {type(off_delta).__name__}, not an integer"
    if not previous < off_delta <= last_offset_delta:
        return (
            f"offset_delta {off_delta} out of order or outside 0..{last_offset_delta} "
            f"(previous {previous})"
        )
    for name, v in (("key", key), ("value", value)):
        if v is not None and type(v) is not bytes:
            return f"{name} is {type(v).__name__}, not bytes or nil"
    if type(headers) is not list:
        return f"headers is {type(headers).__name__}, not an array"
    for j, h in enumerate(headers):
        if type(h) is not list or len(h) != 2:
            return f"header {j} is not a [key, value] pair"
        if type(h[0]) is not str:
            return f"header {j} key is {type(h[0]).__name__}, not a string"
        if h[1] is not None and type(h[1]) is not bytes:
            return f"header {j} value is {type(h[1]).__name__}, not bytes or nil"
    return None


_BYTES_LIKE = (bytes, bytearray, memoryview)


def _check_record(
    value: object, key: object, timestamp: object, headers: Sequence[tuple[str, bytes | None]]
) -> None:
    if value is not None and not isinstance(value, _BYTES_LIKE):
        raise TypeError(f"record value must be bytes or None, not {type(value).__name__}")
    if key is not None and not isinstance(key, _BYTES_LIKE):
        raise TypeError(f"record key must be bytes or None, not {type(key).__name__}")
    if type(timestamp) is not int:
        raise TypeError(f"record timestamp must be an int, not {type(timestamp).__name__}")
    for h in headers:
        if (
            len(h) != 2
            or not isinstance(h[0], str)
            or not (h[1] is None or isinstance(h[1], _BYTES_LIKE))
        ):
            raise TypeError(f"record header must be a (str, bytes | None) pair, not {h!r:.80}")


@dataclass(slots=True)
class BatchBuilder:
    """Accumulates records for one partition until `batch.size`; used by the producer, and by
    build_batch. The producer's accumulator appends to `rows` directly on its hot path, so the
    row layout ([attributes, timestamp_delta, offset_delta, key, value, headers]) and these
    fields are part of the contract."""

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
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int:
        """Add a record; returns its offset delta within the batch. The first record's
        timestamp becomes the base timestamp unless one was set. Raises TypeError for a key,
        value or header of the wrong type (the consumer would refuse the batch)."""
        _check_record(value, key, timestamp, headers)
        if self.base_timestamp < 0:
            self.base_timestamp = timestamp
        self.max_timestamp = max(self.max_timestamp, timestamp)
        delta = len(self.rows)
        self.rows.append([0, timestamp - self.base_timestamp, delta, key, value, list(headers)])
        self.size_estimate += (
            16
            + (len(key) if key else 0)
            + (len(value) if value else 0)
            + sum(4 + len(k) + (len(v) if v else 0) for k, v in headers)
        )
        return delta

    def __len__(self) -> int:
        return len(self.rows)

    def build(
        self,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        attributes: int = 0,
    ) -> bytes:
        """Encode the records appended so far as one batch. Raises ValueError when empty."""
        if not self.rows:
            raise ValueError("a record batch holds at least one record")
        payload = _compress(self.compression, msgpack.packb(self.rows, use_bin_type=True))
        return encode_batch_bytes(
            payload,
            attributes=(attributes & ~COMPRESSION_MASK) | int(self.compression),
            last_offset_delta=len(self.rows) - 1,
            base_timestamp=self.base_timestamp,
            max_timestamp=self.max_timestamp,
            records_count=len(self.rows),
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            partition_leader_epoch=partition_leader_epoch,
        )
