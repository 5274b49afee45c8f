"""A connection's first bytes when they are not trioka's protocol, and what to answer them.

A trioka connection starts with a frame: a 4-byte big-endian length, then a msgpack request
`[api_key, api_version, correlation_id, client_id, body]`, so the payload's first byte is a
msgpack array's (0x90-0x9f, 0xdc, 0xdd). Three other protocols reach a broker's port by
mistake, and each gives itself away in its first bytes:

- Kafka's binary protocol (a Kafka client or tool pointed at trioka): the same length prefix,
  then a request header of int16 api_key, int16 api_version, int32 correlation_id and a
  nullable int16-length client id; the payload's first byte is the api key's high byte, 0.
  Kafka clients open with ApiVersions (key 18, KIP-35). The answer a Kafka broker gives an
  ApiVersions version it does not serve (a version 0 response, header v0, error
  UNSUPPORTED_VERSION; Kafka clients parse it whatever version they asked, KIP-511) here with
  no API listed: a Java client retries at version 0, gets the same answer, logs "Received error
  UNSUPPORTED_VERSION ... when making an ApiVersionsRequest" and disconnects; librdkafka logs
  "ApiVersionRequest failed: Broker: Unsupported version". Nothing is answered to any other
  Kafka request.
- HTTP (curl, a browser, a Prometheus scrape of the wrong port): an ASCII method and a space,
  answered `HTTP/1.0 400 Bad Request` with a one-line body.
- TLS (a client with security.protocol=SSL on a PLAINTEXT listener): a handshake record,
  0x16 0x03 0x00-0x04. Not answered (a plaintext port cannot speak TLS).

`sniff(head)` classifies the first bytes received on a connection (up to SNIFF_BYTES of them).
Pure: no I/O.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final

from protocol.errors import ErrorCode
from protocol.messages import ApiKey

SNIFF_BYTES: Final = 64
"""How many of a connection's first bytes `sniff` looks at, at most."""

KAFKA_API_VERSIONS_KEY: Final = 18
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_HTTP_METHODS: Final = frozenset(
    {b"GET ", b"HEAD", b"POST", b"PUT ", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC", b"PRI "}
)
"""The first four bytes of an HTTP/1.x request (and of HTTP/2's preface, `PRI * HTTP/2.0`)."""
TRIOKA_PROTOCOL: Final = "trioka's msgpack protocol"

HTTP_BODY: Final = (
    "This port speaks trioka's msgpack protocol (length-prefixed frames), not HTTP: point a "
    "trioka client at it; a broker's Prometheus metrics are served on trioka.metrics.port.\n"
)


class Verdict(enum.Enum):
    NATIVE = "native"
    """Looks like trioka's protocol, or like nothing this module knows: decode as usual."""
    NEED_MORE = "need more"
    """Too few bytes to tell."""


@dataclass(frozen=True, slots=True)
class ForeignProtocol:
    """What the peer speaks instead of trioka's protocol."""

    protocol: str
    """kafka, http or tls."""
    description: str
    """For the log: e.g. `the Kafka binary protocol (ApiVersions v3, client id 'x')`."""
    api_key: int | None = None
    """Kafka only: the first request's header."""
    api_version: int | None = None
    correlation_id: int | None = None

    def answer(self) -> bytes | None:
        """What to send back before closing, None for nothing."""
        if self.protocol == "http":
            return http_refusal()
        if self.api_key == KAFKA_API_VERSIONS_KEY and self.correlation_id is not None:
            return kafka_api_versions_refusal(self.correlation_id)
        return None


def sniff(head: bytes, max_frame_bytes: int | None = None) -> ForeignProtocol | Verdict:
    """Classify the first bytes of a connection (all of them up to SNIFF_BYTES). A length
    prefix above `max_frame_bytes` is left to the framing, which refuses it as too large."""
    if len(head) < 4:
        return Verdict.NEED_MORE
    if head[0] == 0x16 and head[1] == 0x03 and head[2] <= 0x04:
        return ForeignProtocol("tls", "TLS (a handshake record: a client with SSL)")
    if head[:4] in _HTTP_METHODS:
        line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("latin-1")
        words = line.split(" ")
        shown = " ".join(words[:2]) if len(words) > 1 else words[0]
        return ForeignProtocol("http", f"HTTP ({shown.strip()[:60]})")
    (size,) = struct.unpack_from(">i", head)
    available = len(head) - 4
    complete = size >= 0 and available >= size
    if available == 0:
        return Verdict.NEED_MORE
    if head[4] != 0 or size < 0:  # trioka's payloads start 0x9X/0xdc/0xdd, Kafka's with 0
        return Verdict.NATIVE
    if max_frame_bytes is not None and size > max_frame_bytes:
        return Verdict.NATIVE
    if available < _HEADER.size:
        return Verdict.NATIVE if complete else Verdict.NEED_MORE
    return _kafka(head[4:], size) or Verdict.NATIVE


def _kafka(payload: bytes, size: int) -> ForeignProtocol | None:
    """A Kafka request header (api key and version below 256, correlation id >= 0, a client
    id that fits in the frame), or None."""
    if size < _HEADER.size:
        return None
    api_key, api_version, correlation_id = _HEADER.unpack_from(payload)
    if not (0 <= api_key < 256 and 0 <= api_version < 256 and correlation_id >= 0):
        return None
    client = ""
    if len(payload) >= _HEADER.size + 2:
        (length,) = struct.unpack_from(">h", payload, _HEADER.size)
        if length < -1 or _HEADER.size + 2 + length > size:
            return None
        start = _HEADER.size + 2
        if length > 0 and len(payload) >= start + length:
            name = payload[start : start + length].decode("utf-8", "replace")
            client = f", client id {name!r}"
    return ForeignProtocol(
        "kafka",
        f"the Kafka binary protocol ({kafka_api_name(api_key)} v{api_version}{client})",
        api_key,
        api_version,
        correlation_id,
    )


def kafka_api_name(api_key: int) -> str:
    """Kafka's name of an API (`ApiVersions`), `api key N` for one trioka does not know."""
    try:
        return ApiKey(api_key).name.title().replace("_", "")
    except ValueError:
        return f"api key {api_key}"


def kafka_request_header(payload: bytes) -> tuple[int, int, int] | None:
    """(api_key, api_version, correlation_id) of a frame payload in Kafka's binary protocol."""
    found = _kafka(payload, len(payload))
    if found is None:
        return None
    assert found.api_key is not None and found.api_version is not None
    assert found.correlation_id is not None
    return found.api_key, found.api_version, found.correlation_id


def kafka_api_versions_refusal(correlation_id: int) -> bytes:
    """A whole frame in Kafka's binary protocol: ApiVersionsResponse v0 (header v0: the
    correlation id; body: int16 error_code UNSUPPORTED_VERSION, int32 count 0 of api_keys)."""
    body = struct.pack(">ihi", correlation_id, int(ErrorCode.UNSUPPORTED_VERSION), 0)
    return struct.pack(">i", len(body)) + body


def http_refusal() -> bytes:
    body = HTTP_BODY.encode()
    head = (
        "HTTP/1.0 400 Bad Request\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body
