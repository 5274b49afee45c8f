"""FrameDecoder tables and fuzzing: frames, a ProtocolError, or NEED_DATA - nothing else."""

from __future__ import annotations

import itertools
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import FrameTooLargeError, ProtocolError, RemoteProtocolError
from protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    NEED_DATA,
    PREFIX_SIZE,
    FrameDecoder,
    encode_frame,
)

FUZZ = settings(
    deadline=None,
    max_examples=int(os.environ.get("TRIOKA_FUZZ_EXAMPLES", "300")),
    suppress_health_check=[HealthCheck.too_slow],
)


def prefix(n: int) -> bytes:
    return struct.pack(">i", n)


def drain(dec: FrameDecoder) -> list[bytes]:
    return dec.frames()


def test_encode_frame_prefixes_big_endian_length() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"
    assert encode_frame(bytearray(b"xy")) == b"\x00\x00\x00\x02xy"
    assert encode_frame(memoryview(b"xy")) == b"\x00\x00\x00\x02xy"


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 104857600
    assert FrameDecoder().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


PAYLOADS = [b"", b"a", b"hello", bytes(range(256)) * 3, b"\x00" * 1000]


@pytest.mark.parametrize("payloads", [PAYLOADS, [b""], [b"x" * 70000, b"y"]])
def test_one_byte_at_a_time(payloads: list[bytes]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    dec = FrameDecoder()
    got: list[bytes] = []
    for i in range(len(stream)):
        dec.feed(stream[i : i + 1])
        got.extend(drain(dec))
        assert dec.buffered <= i + 1
    assert got == payloads
    assert dec.buffered == 0
    assert dec.next_frame() is NEED_DATA


def test_many_frames_in_one_chunk() -> None:
    payloads = [str(i).encode() * (i % 7) for i in range(5000)]
    dec = FrameDecoder()
    dec.feed(b"".join(encode_frame(p) for p in payloads))
    assert drain(dec) == payloads
    assert dec.buffered == 0


def test_next_frame_returns_one_at_a_time() -> None:
    dec = FrameDecoder()
    dec.feed(encode_frame(b"one") + encode_frame(b"two"))
    assert dec.next_frame() == b"one"
    assert dec.next_frame() == b"two"
    assert dec.next_frame() is NEED_DATA


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5, 8])
def test_trailing_partial_frame_is_kept_for_later(cut: int) -> None:
    whole = encode_frame(b"first") + encode_frame(b"second!")
    split = len(encode_frame(b"first")) + cut
    dec = FrameDecoder()
    dec.feed(whole[:split])
    assert drain(dec) == [b"first"]
    assert dec.buffered == cut
    assert dec.next_frame() is NEED_DATA
    dec.feed(whole[split:])
    assert drain(dec) == [b"second!"]


def test_chunks_of_every_size_give_the_same_frames() -> None:
    payloads = [b"a" * n for n in (0, 1, 3, 4, 5, 100)]
    stream = b"".join(encode_frame(p) for p in payloads)
    for size in range(1, len(stream) + 1):
        dec = FrameDecoder()
        got: list[bytes] = []
        for i in range(0, len(stream), size):
            dec.feed(stream[i : i + size])
            got.extend(drain(dec))
        assert got == payloads, size


def test_accepts_bytearray_and_memoryview() -> None:
    dec = FrameDecoder()
    dec.feed(bytearray(encode_frame(b"ab")))
    dec.feed(memoryview(encode_frame(b"cd")))
    assert drain(dec) == [b"ab", b"cd"]


def test_exact_max_size_is_accepted() -> None:
    dec = FrameDecoder(max_frame_bytes=10)
    dec.feed(encode_frame(b"x" * 10))
    assert dec.next_frame() == b"x" * 10


def test_max_plus_one_refused_from_prefix_alone() -> None:
    dec = FrameDecoder(max_frame_bytes=10)
    dec.feed(prefix(11))
    with pytest.raises(FrameTooLargeError) as info:
        dec.next_frame()
    assert info.value.size == 11
    assert info.value.limit == 10
    assert "11 bytes" in str(info.value) and "socket.request.max.bytes" in str(info.value)


def test_oversized_body_is_never_buffered() -> None:
    dec = FrameDecoder(max_frame_bytes=1000)
    dec.feed(prefix(2_000_000_000) + b"z" * 5000)
    assert dec.buffered == PREFIX_SIZE
    dec.feed(b"z" * 5000)  # more of the refused body arriving later is dropped too
    assert dec.buffered == PREFIX_SIZE
    with pytest.raises(FrameTooLargeError):
        dec.next_frame()


def test_oversized_frame_refused_before_its_prefix_is_complete_frames_still_served() -> None:
    dec = FrameDecoder(max_frame_bytes=100)
    dec.feed(encode_frame(b"ok") + prefix(101) + b"body")
    assert dec.next_frame() == b"ok"
    with pytest.raises(FrameTooLargeError):
        dec.next_frame()


def test_decoder_stays_failed_after_an_error() -> None:
    dec = FrameDecoder(max_frame_bytes=5)
    dec.feed(prefix(6))
    for _ in range(3):
        with pytest.raises(FrameTooLargeError):
            dec.next_frame()
    dec.feed(encode_frame(b"ok"))
    with pytest.raises(FrameTooLargeError):
        dec.next_frame()


@pytest.mark.parametrize("length", [-1, -(2**31), -100])
def test_negative_length_refused(length: int) -> None:
    dec = FrameDecoder()
    dec.feed(prefix(length) + b"rest")
    with pytest.raises(RemoteProtocolError, match=f"negative frame length {length}"):
        dec.next_frame()
    assert dec.buffered == PREFIX_SIZE


@pytest.mark.parametrize(
    "data", [b"\x00", b"\x00\x00\x00", encode_frame(b"abc")[:-1], encode_frame(b"abc")[:4]]
)
def test_eof_mid_frame_is_an_error(data: bytes) -> None:
    dec = FrameDecoder()
    dec.feed(data)
    assert dec.next_frame() is NEED_DATA
    dec.feed(b"")
    with pytest.raises(RemoteProtocolError, match="closed in the middle of a frame"):
        dec.next_frame()


def test_eof_between_frames_is_clean() -> None:
    dec = FrameDecoder()
    dec.feed(encode_frame(b"a") + encode_frame(b"b"))
    dec.feed(b"")
    assert drain(dec) == [b"a", b"b"]
    assert dec.next_frame() is NEED_DATA


def test_eof_after_whole_frames_then_partial_serves_whole_ones_first() -> None:
    dec = FrameDecoder()
    dec.feed(encode_frame(b"a") + b"\x00\x00")
    dec.feed(b"")
    assert dec.next_frame() == b"a"
    with pytest.raises(RemoteProtocolError):
        dec.next_frame()


def test_zero_limit_allows_only_empty_frames() -> None:
    dec = FrameDecoder(max_frame_bytes=0)
    dec.feed(encode_frame(b""))
    assert dec.next_frame() == b""
    dec.feed(encode_frame(b"x"))
    with pytest.raises(FrameTooLargeError):
        dec.next_frame()


def test_negative_limit_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=-1)


def test_big_chunk_of_small_frames_memory_is_released() -> None:
    dec = FrameDecoder()
    dec.feed(b"".join(encode_frame(b"x" * 10) for _ in range(20000)))
    for _ in range(20000):
        assert dec.next_frame() == b"x" * 10
    assert dec.buffered == 0


# --- fuzzing ---------------------------------------------------------------------------------


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@FUZZ
@given(
    data=st.binary(max_size=600),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
    limit=st.sampled_from([0, 1, 16, 100, 2**31 - 1]),
    eof=st.booleans(),
)
def test_fuzz_arbitrary_stream_yields_frames_errors_or_need_data(
    data: bytes, cuts: list[int], limit: int, eof: bool
) -> None:
    dec = FrameDecoder(max_frame_bytes=limit)
    frames: list[bytes] = []
    failed = False
    for chunk in [*_chunked(data, cuts), *([b""] if eof else [])]:
        dec.feed(chunk)
        try:
            while (frame := dec.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes)
                assert len(frame) <= limit
                frames.append(frame)
        except ProtocolError:
            failed = True
            break
        assert dec.buffered <= len(data)
    # Whatever came out is a prefix of what a one-shot decode of the same bytes gives.
    ref = FrameDecoder(max_frame_bytes=limit)
    ref.feed(data)
    expected: list[bytes] = []
    try:
        while (frame := ref.next_frame()) is not NEED_DATA:
            expected.append(frame)  # type: ignore[arg-type]
    except ProtocolError:
        pass
    assert frames == expected[: len(frames)]
    if not failed:
        assert frames == expected


@FUZZ
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=15),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=30),
)
def test_fuzz_valid_stream_round_trips_in_any_chunking(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    dec = FrameDecoder(max_frame_bytes=300)
    got: list[bytes] = []
    for chunk in _chunked(stream, cuts):
        dec.feed(chunk)
        got.extend(dec.frames())
    dec.feed(b"")
    assert got == payloads
    assert dec.next_frame() is NEED_DATA
