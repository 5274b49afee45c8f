"""Sans-I/O framing: a 4-byte big-endian length, then that many bytes of payload.

`FrameDecoder.feed()` takes whatever bytes arrived; `next_frame()` returns one complete payload
or NEED_DATA. A length above `max_frame_bytes` (socket.request.max.bytes) is refused from the
four prefix bytes alone: `feed()` looks at each prefix as soon as it is complete and stops
buffering, so none of an oversized body is ever kept, and `next_frame()` raises
FrameTooLargeError once the frames before it have been taken. A negative length is refused the
same way. After such an error the decoder is poisoned: the stream has lost its framing, every
later `next_frame()` raises the same error, and the caller closes the connection.
"""

from __future__ import annotations

import struct
from typing import Final

from protocol.errors import (
    FrameTooLargeError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)

LENGTH = struct.Struct(">i")
PREFIX_SIZE: Final = 4
DEFAULT_MAX_FRAME_BYTES: Final = 104857600  # Kafka's socket.request.max.bytes (100 MiB)
# Consumed bytes are dropped from the front of the buffer only once they are at least this
# many, so that a chunk holding many small frames is split in linear, not quadratic, time.
_COMPACT_AT: Final = 65536


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


class FrameDecoder:
    """Splits a byte stream into frames. Keeps at most one partial frame buffered (plus whole
    frames fed but not yet taken)."""

    __slots__ = ("_buf", "_checked", "_closed", "_error", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must not be negative, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._start = 0  # first unconsumed byte of _buf
        self._checked = 0  # prefixes before this position have been checked by feed()
        self._closed = False
        self._error: ProtocolError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes. Empty bytes mean the peer closed the stream. Never raises for
        bad input: errors surface from `next_frame()` after the good frames before them."""
        if not data:
            self._closed = True
            return
        if self._error is not None:
            return  # the stream is already unframeable; keep nothing more
        self._buf += data
        self._check_prefixes()

    def _check_prefixes(self) -> None:
        """Look at every complete length prefix not yet looked at; stop at a bad one and drop
        everything after it, so an oversized frame's body is never buffered."""
        buf = self._buf
        pos = max(self._checked, self._start)
        while len(buf) - pos >= PREFIX_SIZE:
            (size,) = LENGTH.unpack_from(buf, pos)
            if size < 0:
                self._error = RemoteProtocolError(f"negative frame length {size}")
            elif size > self.max_frame_bytes:
                self._error = FrameTooLargeError(size, self.max_frame_bytes)
            if self._error is not None:
                del buf[pos + PREFIX_SIZE :]
                self._checked = pos
                return
            pos += PREFIX_SIZE + size
        self._checked = pos

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return len(self._buf) - self._start

    def next_frame(self) -> bytes | _NeedData:
        """The next complete payload, or NEED_DATA. Raises RemoteProtocolError (or its
        subclass FrameTooLargeError) on a negative or oversized prefix, and when the peer
        closed the stream part-way through a frame."""
        buf = self._buf
        start = self._start
        available = len(buf) - start
        if available >= PREFIX_SIZE:
            (size,) = LENGTH.unpack_from(buf, start)
            if self._error is not None and start >= self._checked:
                raise self._error
            end = start + PREFIX_SIZE + size
            if len(buf) >= end:
                # One copy: slicing the bytearray itself would copy twice.
                with memoryview(buf) as view:
                    frame = view[start + PREFIX_SIZE : end].tobytes()
                self._start = end
                if end == len(buf):
                    buf.clear()
                    self._start = self._checked = 0
                elif end >= _COMPACT_AT:
                    del buf[:end]
                    self._start = 0
                    self._checked -= end
                return frame
        elif self._error is not None:
            raise self._error
        if self._closed and available:
            raise RemoteProtocolError(
                f"connection closed in the middle of a frame ({available} bytes buffered)"
            )
        return NEED_DATA

    def frames(self) -> list[bytes]:
        """Every complete frame now buffered (raises as `next_frame()` does)."""
        out = []
        while True:
            frame = self.next_frame()
            if frame is NEED_DATA:
                return out
            out.append(frame)  # type: ignore[arg-type]


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its length. Raises LocalProtocolError when it cannot be framed."""
    if len(payload) > 0x7FFFFFFF:
        raise LocalProtocolError(f"payload of {len(payload)} bytes cannot be framed (max 2 GiB)")
    return LENGTH.pack(len(payload)) + payload
