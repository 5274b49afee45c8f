"""A small raw-wire client for tests that must control the exact bytes sent to a broker.

    async with await WireClient.connect("127.0.0.1", port) as c:
        resp = await c.request(ApiVersionsRequest())          # typed round trip
        corr = await c.send(MetadataRequest(topics=None))     # pipelining: send now ...
        corr2, body = await c.receive(MetadataResponse)        # ... receive later, in order
        await c.send_raw(b"\\x00\\x00\\x00\\x01\\xc1")           # exact bytes
        assert await c.wait_closed(5)                           # broker closed the connection

`api_versions_blocking(host, port, timeout)` does one ApiVersions round trip with a plain
blocking socket (the harness uses it to wait for readiness from sync code).
Helpers: `batch(values, ...)` builds one record batch; `records_of(raw)` decodes fetched bytes.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import trio

from protocol.codec import decode_response_body, decode_response_header, encode_request
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages import Request, Response
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.record_batch import Record, build_batch, decode_records, iter_batches

R = TypeVar("R", bound=Response)

__all__ = ["WireClient", "api_versions_blocking", "batch", "records_of"]


class WireClient:
    """One TCP connection speaking trioka's framing; nothing hidden, nothing retried."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(max_frame_bytes=2**31 - 1)
        self._corr = itertools.count(1)

    @classmethod
    async def connect(cls, host: str, port: int) -> WireClient:
        return cls(await trio.open_tcp_stream(host, port))

    async def __aenter__(self) -> WireClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(
        self,
        body: Request,
        *,
        correlation_id: int | None = None,
        api_version: int | None = None,
        client_id: str | None = "trioka-tests",
    ) -> int:
        """Send one request; returns its correlation id."""
        corr = next(self._corr) if correlation_id is None else correlation_id
        await self.stream.send_all(encode_request(corr, client_id, body, api_version))
        return corr

    async def receive_frame(self) -> bytes | None:
        """The next response payload, or None when the broker closed the connection."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not NEED_DATA:
                return frame  # type: ignore[return-value]
            try:
                data = await self.stream.receive_some(1 << 20)
            except trio.BrokenResourceError:
                return None
            if not data:
                return None
            self.decoder.feed(data)

    async def receive(self, cls: type[R]) -> tuple[int, R]:
        """The next response, decoded as `cls`; raises EOFError if the connection closed."""
        frame = await self.receive_frame()
        if frame is None:
            raise EOFError("broker closed the connection")
        corr, raw = decode_response_header(frame)
        return corr, decode_response_body(cls, raw)

    async def request(self, body: Request, *, api_version: int | None = None) -> Any:
        """Send `body` and return its typed response (checks the correlation id)."""
        corr = await self.send(body, api_version=api_version)
        got, resp = await self.receive(type(body).RESPONSE)
        assert got == corr, f"response for correlation id {got}, expected {corr}"
        return resp

    async def wait_closed(self, within: float) -> bool:
        """True once the broker closes the connection (bytes received meanwhile are dropped)."""
        with trio.move_on_after(within):
            while True:
                try:
                    data = await self.stream.receive_some(1 << 16)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return True
                if not data:
                    return True
        return False


def api_versions_blocking(host: str, port: int, timeout: float = 2.0) -> ApiVersionsResponse:
    """One ApiVersions round trip on a blocking socket; raises OSError when not answered."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(0, "trioka-harness", ApiVersionsRequest()))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection before answering")
            buf += chunk
        (size,) = struct.unpack(">i", buf[:4])
        _corr, raw = decode_response_header(buf[4 : 4 + size])
        return decode_response_body(ApiVersionsResponse, raw)


def batch(
    values: Iterable[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamp: int = 1_700_000_000_000,
) -> bytes:
    """One uncompressed record batch holding `values` (timestamps `timestamp`, +1, ...)."""
    vals = list(values)
    ks = list(keys) if keys is not None else [None] * len(vals)
    return build_batch(
        [
            Record(value=v, key=k, timestamp=timestamp + i)
            for i, (v, k) in enumerate(zip(vals, ks, strict=False))
        ]
    )


def records_of(raw: bytes) -> list[Record]:
    """Every record in fetched bytes (whole batches, CRC-checked)."""
    out: list[Record] = []
    for pos, _header in iter_batches(raw):
        out.extend(decode_records(raw, pos))
    return out
