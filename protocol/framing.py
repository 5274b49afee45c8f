"""Sans-I/O framing: a 4-byte big-endian length, then that many bytes of payload.

`FrameDecoder.feed()` takes whatever bytes arrived; `next_frame()` returns one complete payload
or NEED_DATA. A length above `max_frame_bytes` raises FrameTooLargeError as soon as the four
prefix bytes are in, before any of the body is buffered (socket.request.max.bytes).
"""

from __future__ import annotations

import struct
from typing import Final

from protocol.errors import FrameTooLargeError, RemoteProtocolError

LENGTH = struct.Struct(">i")
PREFIX_SIZE: Final = 4
DEFAULT_MAX_FRAME_BYTES: Final = 104857600  # Kafka's socket.request.max.bytes (100 MiB)


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


class FrameDecoder:
    """Splits a byte stream into frames. Keeps at most one partial frame buffered."""

    __slots__ = ("_buf", "_closed", "_expected", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._expected = -1
        self._closed = False

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes. Empty bytes mean the peer closed the stream."""
        if not data:
            self._closed = True
            return
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next_frame(self) -> bytes | _NeedData:
        """The next complete payload, or NEED_DATA. Raises on a bad or oversized prefix, or
        when the peer closed the stream part-way through a frame."""
        if self._expected < 0:
            if len(self._buf) < PREFIX_SIZE:
                return self._need_more()
            (size,) = LENGTH.unpack_from(self._buf)
            if size < 0:
                raise RemoteProtocolError(f"negative frame length {size}")
            if size > self.max_frame_bytes:
                raise FrameTooLargeError(size, self.max_frame_bytes)
            self._expected = size
        end = PREFIX_SIZE + self._expected
        if len(self._buf) < end:
            return self._need_more()
        frame = bytes(self._buf[PREFIX_SIZE:end])
        del self._buf[:end]
        self._expected = -1
        return frame

    def _need_more(self) -> _NeedData:
        if self._closed and self._buf:
            raise RemoteProtocolError(
                f"connection closed in the middle of a frame ({len(self._buf)} bytes buffered)"
            )
        return NEED_DATA

    def frames(self) -> list[bytes]:
        """Every complete frame now buffered."""
        out = []
        while True:
            frame = self.next_frame()
            if frame is NEED_DATA:
                return out
            out.append(frame)  # type: ignore[arg-type]


def encode_frame(payload: bytes) -> bytes:
    return LENGTH.pack(len(payload)) + payload
