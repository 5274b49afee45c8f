"""Record batches: round trips, stamping, and every corruption named by CorruptRecordBatchError."""

from __future__ import annotations

import contextlib
import os
import struct

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordBatchError, ErrorCode
from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchBuilder,
    BatchHeader,
    Compression,
    Record,
    build_batch,
    decode_records,
    encode_batch_bytes,
    iter_batches,
    read_header,
    stamp,
    validate_batch,
)

COMPRESSIONS = [Compression.NONE, Compression.LZ4, Compression.ZSTD]
FUZZ = settings(
    deadline=None,
    max_examples=int(os.environ.get("TRIOKA_FUZZ_EXAMPLES", "200")),
    suppress_health_check=[HealthCheck.too_slow],
)

RECORDS = [
    Record(value=b"v0", key=b"k0", timestamp=1_700_000_000_000),
    Record(value=None, key=b"tombstone", timestamp=1_700_000_000_005),
    Record(value=b"", key=None, timestamp=1_699_999_999_999),
    Record(
        value=b"x" * 5000,
        key=None,
        headers=(("trace", b"abc"), ("empty", b""), ("null", None)),
        timestamp=1_700_000_000_001,
    ),
]


def corrupt(buf: bytes, pos: int, value: int | None = None) -> bytes:
    out = bytearray(buf)
    out[pos] = (out[pos] ^ 0xFF) if value is None else value
    return bytes(out)


def put(buf: bytes, fmt: str, offset: int, *values: int) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def rebuild(
    payload: bytes, *, records_count: int, last_offset_delta: int | None = None, attributes: int = 0
) -> bytes:
    """A batch with a valid CRC around whatever payload a test wants to smuggle in."""
    return encode_batch_bytes(
        payload,
        attributes=attributes,
        last_offset_delta=records_count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp=0,
        max_timestamp=0,
        records_count=records_count,
    )


def expect_corrupt(buf: bytes, fragment: str) -> CorruptRecordBatchError:
    with pytest.raises(CorruptRecordBatchError) as info:
        decode_records(buf)
    assert fragment in str(info.value), str(info.value)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    return info.value


# --- layout and round trips -------------------------------------------------------------------


def test_header_is_kafkas_61_bytes() -> None:
    assert HEADER_SIZE == 61
    assert LOG_OVERHEAD == 12
    assert CRC_OFFSET == 17 and ATTRIBUTES_OFFSET == 21


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip_keys_null_values_headers_timestamps(compression: Compression) -> None:
    buf = build_batch(RECORDS, compression=compression, base_offset=100)
    header = validate_batch(buf)
    assert header.compression is compression
    assert header.records_count == 4
    assert header.last_offset_delta == 3
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_005
    assert header.size == len(buf)
    got = decode_records(buf)
    assert [r.offset for r in got] == [100, 101, 102, 103]
    for want, have in zip(RECORDS, got, strict=True):
        assert (have.key, have.value, have.headers, have.timestamp) == (
            want.key,
            want.value,
            want.headers,
            want.timestamp,
        )


def test_unset_timestamps_take_the_base_timestamp() -> None:
    buf = build_batch([Record(value=b"a"), Record(value=b"b", timestamp=7)])
    assert [r.timestamp for r in decode_records(buf)] == [7, 7]
    buf = build_batch([Record(value=b"a")], base_timestamp=99)
    assert decode_records(buf)[0].timestamp == 99
    buf = build_batch([Record(value=b"a")])
    assert decode_records(buf)[0].timestamp == 0


def test_producer_fields_and_defaults() -> None:
    header = validate_batch(build_batch(RECORDS[:1]))
    assert header.producer_id == NO_PRODUCER_ID
    assert header.base_sequence == NO_SEQUENCE
    assert header.last_sequence == NO_SEQUENCE
    header = validate_batch(
        build_batch(RECORDS, producer_id=5, producer_epoch=2, base_sequence=2**31 - 2)
    )
    assert (header.producer_id, header.producer_epoch) == (5, 2)
    assert header.last_sequence == 1  # wraps like Kafka's sequence numbers


def test_build_refuses_no_records_and_unsupported_codecs() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()
    with pytest.raises(ValueError, match="GZIP"):
        build_batch(RECORDS[:1], compression=Compression.GZIP)


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        (Record(value="text"), "value must be bytes"),  # type: ignore[arg-type]
        (Record(value=b"v", key=5), "key must be bytes"),  # type: ignore[arg-type]
        (Record(value=b"v", headers=(("h",),)), "header must be"),  # type: ignore[arg-type]
        (Record(value=b"v", headers=((1, b"x"),)), "header must be"),  # type: ignore[arg-type]
        (Record(value=b"v", headers=(("h", "str"),)), "header must be"),  # type: ignore[arg-type]
    ],
)
def test_build_refuses_wrong_types(record: Record, fragment: str) -> None:
    with pytest.raises(TypeError, match=fragment):
        build_batch([record])


def test_bytes_like_values_are_accepted_and_come_back_as_bytes() -> None:
    buf = build_batch([Record(value=bytearray(b"ab"), key=memoryview(b"k"))])  # type: ignore[arg-type]
    (rec,) = decode_records(buf)
    assert (rec.value, rec.key) == (b"ab", b"k")


def test_batch_builder_matches_build_batch() -> None:
    builder = BatchBuilder(compression=Compression.ZSTD)
    for rec in RECORDS:
        builder.append(rec.value, rec.key, rec.timestamp, rec.headers)
    assert len(builder) == 4
    assert builder.size_estimate > HEADER_SIZE + 5000
    built = builder.build(producer_id=1, producer_epoch=0, base_sequence=0)
    assert built == build_batch(
        RECORDS,
        compression=Compression.ZSTD,
        base_timestamp=RECORDS[0].timestamp,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )


def test_batch_builder_row_layout_is_the_accumulator_contract() -> None:
    builder = BatchBuilder()
    assert builder.append(b"v", b"k", 10, [("h", b"x")]) == 0
    assert builder.append(None, None, 15) == 1
    assert builder.rows == [[0, 0, 0, b"k", b"v", [("h", b"x")]], [0, 5, 1, None, None, []]]
    assert (builder.base_timestamp, builder.max_timestamp) == (10, 15)


def test_attributes_keep_flags_and_set_compression() -> None:
    buf = build_batch(RECORDS[:1], compression=Compression.LZ4, attributes=0x10 | 0x07)
    assert validate_batch(buf).attributes == 0x10 | int(Compression.LZ4)


def test_stamp_sets_offset_and_epoch_and_keeps_crc_valid() -> None:
    buf = bytearray(build_batch(RECORDS, compression=Compression.ZSTD))
    before = validate_batch(buf)
    stamp(buf, 0, 123456789, 42)
    after = validate_batch(buf)
    assert (after.base_offset, after.partition_leader_epoch) == (123456789, 42)
    assert after.crc == before.crc
    assert [r.offset for r in decode_records(buf)] == [123456789 + i for i in range(4)]


def test_stamp_at_a_position_inside_a_larger_buffer() -> None:
    one = build_batch(RECORDS[:2])
    two = build_batch(RECORDS[2:], compression=Compression.LZ4)
    buf = bytearray(one + two)
    stamp(buf, len(one), 2, 9)
    stamp(memoryview(buf), 0, 0, 9)
    headers = list(iter_batches(buf))
    assert [(pos, h.base_offset, h.partition_leader_epoch) for pos, h in headers] == [
        (0, 0, 9),
        (len(one), 2, 9),
    ]
    assert [r.offset for r in decode_records(buf, len(one))] == [2, 3]


def test_iter_batches_walks_consecutive_batches() -> None:
    batches = [build_batch([r], base_offset=i) for i, r in enumerate(RECORDS)]
    buf = b"".join(batches)
    positions = [pos for pos, _ in iter_batches(buf)]
    assert positions == [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    assert list(iter_batches(b"")) == []


def test_iter_batches_refuses_a_trailing_partial_batch() -> None:
    buf = build_batch(RECORDS[:1]) + build_batch(RECORDS[1:2])[:-1]
    with pytest.raises(CorruptRecordBatchError, match="truncated batch"):
        list(iter_batches(buf))
    with pytest.raises(CorruptRecordBatchError, match="truncated batch"):
        list(iter_batches(buf, verify_crc=False))


def test_iter_batches_without_crc_check_skips_only_the_crc() -> None:
    buf = corrupt(build_batch(RECORDS), HEADER_SIZE + 3)
    assert len(list(iter_batches(buf, verify_crc=False))) == 1
    with pytest.raises(CorruptRecordBatchError, match="CRC mismatch"):
        list(iter_batches(buf))


def test_read_header_returns_every_field() -> None:
    buf = build_batch(RECORDS, base_offset=5, partition_leader_epoch=3, producer_id=8)
    h = read_header(buf)
    assert isinstance(h, BatchHeader)
    assert (h.base_offset, h.partition_leader_epoch, h.magic, h.producer_id) == (5, 3, MAGIC, 8)
    assert (h.last_offset, h.next_offset) == (8, 9)
    assert not h.is_control


# --- corruption tables ------------------------------------------------------------------------


BATCH = build_batch(RECORDS, compression=Compression.NONE)
ZBATCH = build_batch(RECORDS, compression=Compression.ZSTD)


@pytest.mark.parametrize("buf", [BATCH, ZBATCH], ids=["none", "zstd"])
def test_every_flipped_byte_from_the_magic_on_is_detected(buf: bytes) -> None:
    """Every byte except base_offset and partition_leader_epoch (which the CRC leaves out so
    the leader can stamp them) is protected: flipping any one of them is refused."""
    for pos in [*range(8, 12), *range(16, len(buf))]:
        with pytest.raises(CorruptRecordBatchError):
            decode_records(corrupt(buf, pos))
        with pytest.raises(CorruptRecordBatchError):
            validate_batch(corrupt(buf, pos))


def test_stamped_fields_are_not_covered_by_the_crc() -> None:
    for pos in [*range(0, 8), *range(12, 16)]:
        validate_batch(corrupt(BATCH, pos))


def test_flipped_body_byte_is_a_crc_mismatch_naming_both_values() -> None:
    err = expect_corrupt(corrupt(BATCH, HEADER_SIZE + 10), "CRC mismatch: stored 0x")
    assert "computed 0x" in str(err)
    assert err.position == 0


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_bad_magic(magic: int) -> None:
    expect_corrupt(
        corrupt(BATCH, 16, magic),
        f"unsupported magic {struct.unpack('b', bytes([magic]))[0]} (expected 2)",
    )


@pytest.mark.parametrize("size", [0, 1, 12, 60])
def test_truncated_header(size: int) -> None:
    expect_corrupt(BATCH[:size], f"truncated batch header: {size} of 61 bytes")


@pytest.mark.parametrize("cut", [1, 10, len(BATCH) - HEADER_SIZE])
def test_truncated_body(cut: int) -> None:
    expect_corrupt(BATCH[:-cut], f"truncated batch: header says {len(BATCH)} bytes")


@pytest.mark.parametrize(
    ("length", "fragment"),
    [
        (-1, "batch_length -1 is shorter than the header"),
        (0, "batch_length 0 is shorter than the header"),
        (48, "batch_length 48 is shorter than the header"),
        (2**31 - 1, "truncated batch: header says"),
    ],
)
def test_bad_length(length: int, fragment: str) -> None:
    expect_corrupt(put(BATCH, ">i", 8, length), fragment)


def test_length_shorter_than_the_data_is_a_crc_mismatch() -> None:
    expect_corrupt(put(BATCH, ">i", 8, len(BATCH) - LOG_OVERHEAD - 1), "CRC mismatch")


def test_count_mismatch_with_valid_crc() -> None:
    rows = msgpack.packb([[0, 0, 0, None, b"v", []]] * 2)
    buf = rebuild(rows, records_count=3)
    expect_corrupt(buf, "records_count is 3 but the payload holds 2 records")


def test_count_beyond_offset_span() -> None:
    rows = msgpack.packb([[0, 0, i, None, b"v", []] for i in range(3)])
    buf = rebuild(rows, records_count=3, last_offset_delta=1)
    expect_corrupt(buf, "records_count 3 exceeds the offset span (last_offset_delta 1)")


@pytest.mark.parametrize(
    ("field_offset", "fmt", "value", "fragment"),
    [
        (57, ">i", -1, "negative records_count (-1)"),
        (23, ">i", -5, "last_offset_delta (-5)"),
    ],
)
def test_negative_counts(field_offset: int, fmt: str, value: int, fragment: str) -> None:
    buf = put(BATCH, fmt, field_offset, value)
    with pytest.raises(
        CorruptRecordBatchError, match=fragment.replace("(", r"\(").replace(")", r"\)")
    ):
        read_header(buf)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"\xc1", "records are not valid msgpack"),
        (b"", "records are not valid msgpack"),
        (msgpack.packb([[0, 0, 0, None, b"v", []]]) + b"\x00", "records are not valid msgpack"),
        (b"\xdd\xff\xff\xff\xff", "records are not valid msgpack"),
        (msgpack.packb({"a": 1}), "records payload is a msgpack dict, not an array"),
        (msgpack.packb(["row"]), "record 0: expected an array, got str"),
        (msgpack.packb([[0, 0, 0, None, b"v"]]), "record 0: expected 6 fields"),
        (msgpack.packb([[0, "0", 0, None, b"v", []]]), "timestamp_delta is str"),
        (msgpack.packb([[None, 0, 0, None, b"v", []]]), "attributes is NoneType"),
        (msgpack.packb([[0, 0, 1.0, None, b"v", []]]), "offset_delta is float"),
        (msgpack.packb([[0, 0, 5, None, b"v", []]]), "offset_delta 5 out of order"),
        (msgpack.packb([[0, 0, -1, None, b"v", []]]), "offset_delta -1 out of order"),
        (msgpack.packb([[0, 0, 0, "k", b"v", []]], use_bin_type=True), "key is str"),
        (msgpack.packb([[0, 0, 0, None, 7, []]]), "value is int"),
        (msgpack.packb([[0, 0, 0, None, b"v", {}]]), "headers is dict"),
        (msgpack.packb([[0, 0, 0, None, b"v", [["h"]]]]), "header 0 is not a [key, value] pair"),
        (msgpack.packb([[0, 0, 0, None, b"v", [[b"h", b"x"]]]], use_bin_type=True), "header 0 key is bytes"),
        (msgpack.packb([[0, 0, 0, None, b"v", [["h", 10**9]]]], use_bin_type=True), "header 0 value is int"),
    ],
)  # fmt: skip
def test_bad_msgpack_payload(payload: bytes, fragment: str) -> None:
    expect_corrupt(rebuild(payload, records_count=1), fragment)


def test_duplicate_offset_deltas_refused() -> None:
    rows = msgpack.packb([[0, 0, 0, None, b"v", []], [0, 0, 0, None, b"w", []]])
    expect_corrupt(rebuild(rows, records_count=2), "record 1: offset_delta 0 out of order")


def test_extra_trailing_record_fields_are_tolerated() -> None:
    rows = msgpack.packb([[0, 3, 0, b"k", b"v", [["h", b"x"]], "future field"]], use_bin_type=True)
    (rec,) = decode_records(rebuild(rows, records_count=1))
    assert (rec.key, rec.value, rec.headers, rec.timestamp) == (b"k", b"v", (("h", b"x"),), 3)


def test_compacted_batch_with_gaps_in_offsets_decodes() -> None:
    rows = msgpack.packb([[0, 0, 0, None, b"a", []], [0, 0, 4, None, b"b", []]])
    got = decode_records(rebuild(rows, records_count=2, last_offset_delta=4))
    assert [r.offset for r in got] == [0, 4]


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_compression_codec(codec: int) -> None:
    buf = rebuild(msgpack.packb([[0, 0, 0, None, b"v", []]]), records_count=1, attributes=codec)
    expect_corrupt(buf, f"unknown compression codec {codec} in attributes")
    with pytest.raises(CorruptRecordBatchError, match="unknown compression codec"):
        validate_batch(buf)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY])
def test_kafka_codecs_trioka_does_not_read(codec: Compression) -> None:
    buf = rebuild(b"whatever", records_count=1, attributes=int(codec))
    validate_batch(buf)  # a valid batch as far as the broker is concerned
    expect_corrupt(buf, f"unsupported compression codec {codec.name}")


@pytest.mark.parametrize(
    ("codec", "payload", "fragment"),
    [
        (Compression.ZSTD, b"not zstd at all", "cannot decompress ZSTD records"),
        (Compression.LZ4, b"not lz4 at all", "cannot decompress LZ4 records"),
    ],
)
def test_bad_compressed_payload(codec: Compression, payload: bytes, fragment: str) -> None:
    expect_corrupt(rebuild(payload, records_count=1, attributes=int(codec)), fragment)


@pytest.mark.parametrize("codec", [Compression.ZSTD, Compression.LZ4])
def test_truncated_and_trailing_compressed_frames(codec: Compression) -> None:
    whole = build_batch(RECORDS, compression=codec)
    payload = whole[HEADER_SIZE:]
    n = len(RECORDS)
    expect_corrupt(
        rebuild(payload[:-3], records_count=n, attributes=int(codec)), "cannot decompress"
    )
    expect_corrupt(
        rebuild(payload + b"junk", records_count=n, attributes=int(codec)), "bytes after the frame"
    )


@pytest.mark.parametrize("codec", [Compression.ZSTD, Compression.LZ4])
def test_decompression_bomb_refused(codec: Compression) -> None:
    big = build_batch([Record(value=b"\x00" * (4 * 1024 * 1024))], compression=codec)
    assert len(big) < 64 * 1024
    err = expect_corrupt_kw(big, 1024 * 1024)
    assert "1048576" in str(err)
    assert len(decode_records(big)[0].value or b"") == 4 * 1024 * 1024


def test_zstd_frame_without_declared_size_is_bounded_too() -> None:
    import zstandard

    rows = msgpack.packb([[0, 0, 0, None, b"\x00" * (3 * 1024 * 1024), []]])
    payload = zstandard.ZstdCompressor(write_content_size=False).compress(rows)
    buf = rebuild(payload, records_count=1, attributes=int(Compression.ZSTD))
    expect_corrupt_kw(buf, 1024 * 1024)
    assert len(decode_records(buf)) == 1


def expect_corrupt_kw(buf: bytes, limit: int) -> CorruptRecordBatchError:
    with pytest.raises(CorruptRecordBatchError, match="more than") as info:
        decode_records(buf, max_uncompressed_bytes=limit)
    return info.value


def test_position_is_reported_for_a_batch_inside_a_buffer() -> None:
    buf = BATCH + corrupt(BATCH, 16, 9)
    with pytest.raises(CorruptRecordBatchError, match=rf"\(at byte {len(BATCH)}\)"):
        list(iter_batches(buf))


def test_negative_position_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        read_header(BATCH, -1)


def test_crc_field_itself_is_checked() -> None:
    stored = HEADER.unpack_from(BATCH)[4]
    buf = put(BATCH, ">I", CRC_OFFSET, stored ^ 1)
    expect_corrupt(buf, "CRC mismatch")


# --- fuzzing ----------------------------------------------------------------------------------


def _decode_or_corrupt(buf: bytes) -> None:
    try:
        records = decode_records(buf)
    except CorruptRecordBatchError as exc:
        assert str(exc)
        return
    assert all(isinstance(r, Record) for r in records)


@FUZZ
@given(buf=st.binary(max_size=300))
def test_fuzz_arbitrary_bytes(buf: bytes) -> None:
    _decode_or_corrupt(buf)
    with contextlib.suppress(CorruptRecordBatchError):
        validate_batch(buf)
    with contextlib.suppress(CorruptRecordBatchError):
        list(iter_batches(buf))


@FUZZ
@given(
    payload=st.binary(max_size=200),
    count=st.integers(-2, 5),
    lod=st.integers(-2, 6),
    attributes=st.integers(0, 0x7FFF),
)
def test_fuzz_arbitrary_payload_under_a_valid_crc(
    payload: bytes, count: int, lod: int, attributes: int
) -> None:
    buf = encode_batch_bytes(
        payload,
        attributes=attributes,
        last_offset_delta=lod,
        base_timestamp=0,
        max_timestamp=0,
        records_count=count,
    )
    _decode_or_corrupt(buf)


LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.binary(max_size=8)
    | st.text(max_size=4)
)
ROWISH = st.recursive(LEAF, lambda s: st.lists(s, max_size=7), max_leaves=20)


@FUZZ
@given(
    rows=st.lists(ROWISH, max_size=4),
    codec=st.sampled_from(COMPRESSIONS),
    count=st.integers(0, 4),
)
def test_fuzz_arbitrary_rows_under_a_valid_crc(
    rows: list[object], codec: Compression, count: int
) -> None:
    from protocol.record_batch import _compress

    packed = msgpack.packb(rows, use_bin_type=True)
    buf = rebuild(
        _compress(codec, packed), records_count=count, last_offset_delta=4, attributes=int(codec)
    )
    _decode_or_corrupt(buf)


RECORD = st.builds(
    Record,
    value=st.none() | st.binary(max_size=50),
    key=st.none() | st.binary(max_size=20),
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3
    ).map(tuple),
    timestamp=st.integers(0, 2**40),
)


@FUZZ
@given(
    records=st.lists(RECORD, min_size=1, max_size=8),
    codec=st.sampled_from(COMPRESSIONS),
    base_offset=st.integers(0, 2**62),
    epoch=st.integers(0, 2**31 - 1),
    flip=st.integers(0, 10_000),
)
def test_fuzz_round_trip_stamp_and_flip(
    records: list[Record], codec: Compression, base_offset: int, epoch: int, flip: int
) -> None:
    buf = bytearray(build_batch(records, compression=codec))
    stamp(buf, 0, base_offset, epoch)
    got = decode_records(buf)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]
    assert [r.offset for r in got] == [base_offset + i for i in range(len(records))]
    protected = [*range(8, 12), *range(16, len(buf))]
    pos = protected[flip % len(protected)]
    buf[pos] ^= 0x01 << (flip % 8)
    with pytest.raises(CorruptRecordBatchError):
        decode_records(buf)


def test_zstd_frame_lying_about_its_size_is_refused() -> None:
    import zstandard

    rows = msgpack.packb([[0, 0, 0, None, b"\x00" * (4 * 1024 * 1024), []]])
    frame = bytearray(zstandard.ZstdCompressor().compress(rows))
    descriptor = frame[4]
    assert descriptor >> 6 == 2  # a 4-byte content size follows the window byte
    offset = 5 + (0 if descriptor & 0x20 else 1)
    struct.pack_into("<I", frame, offset, 1000)
    assert zstandard.get_frame_parameters(bytes(frame)).content_size == 1000
    buf = rebuild(bytes(frame), records_count=1, attributes=int(Compression.ZSTD))
    expect_corrupt(buf, "cannot decompress ZSTD records")


def test_decode_records_builds_records_through_a_factory() -> None:
    raw = bytearray(build_batch([Record(b"v0", b"k0"), Record(b"v1", headers=(("h", b"x"),))]))
    stamp(raw, 0, 40, 1)
    rows = decode_records(raw, factory=lambda *fields: fields)
    assert [r[:4] for r in rows] == [(40, 0, b"k0", b"v0"), (41, 0, None, b"v1")]
    assert rows[1][4] == (("h", b"x"),)
    raw[-1] ^= 0xFF  # the CRC no longer matches
    with pytest.raises(CorruptRecordBatchError, match="CRC"):
        decode_records(raw)
    # check.crcs=false skips only the CRC: the damaged header value is served as it is.
    assert decode_records(raw, verify_crc=False)[1].headers == (("h", bytes([ord("x") ^ 0xFF])),)
