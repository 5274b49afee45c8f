"""Request/response envelopes on top of framing and the schemas (DESIGN section 3).

Request payload: msgpack `[api_key, api_version, correlation_id, client_id, body]`.
Response payload: msgpack `[correlation_id, body]`. Bodies are positional arrays (protocol.schema).
Decoding errors are RemoteProtocolError subclasses that carry whatever of the header could be
read, so a server can still answer the right correlation id with INVALID_REQUEST or
UNSUPPORTED_VERSION instead of dropping the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import msgpack

from protocol.errors import ErrorCode, RemoteProtocolError
from protocol.framing import encode_frame
from protocol.messages import REQUESTS, ApiKey, Request, Response
from protocol.schema import InvalidMessageError, from_wire, to_wire

R = TypeVar("R", bound=Response)


@dataclass(frozen=True, slots=True)
class RequestEnvelope:
    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Request


class RequestDecodeError(RemoteProtocolError):
    """A request that cannot be served. `correlation_id`/`api_key` are set when readable."""

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = ErrorCode.INVALID_REQUEST,
        correlation_id: int | None = None,
        api_key: ApiKey | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.correlation_id = correlation_id
        self.api_key = api_key


def _unpack(payload: bytes) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises ExtraData, ValueError, UnicodeDecodeError, ...
        raise RemoteProtocolError(f"payload is not valid msgpack: {exc}") from exc


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def encode_request(
    correlation_id: int, client_id: str | None, body: Request, api_version: int | None = None
) -> bytes:
    """A whole frame (length prefix included) for `body`, at its newest version by default."""
    version = type(body).MAX_VERSION if api_version is None else api_version
    return encode_frame(
        _pack([int(body.API_KEY), version, correlation_id, client_id, to_wire(body)])
    )


def decode_request(payload: bytes) -> RequestEnvelope:
    """Parse one request frame payload; raises RequestDecodeError naming what is wrong."""
    try:
        raw = _unpack(payload)
    except RemoteProtocolError as exc:
        raise RequestDecodeError(str(exc)) from exc
    if type(raw) is not list or len(raw) != 5:
        raise RequestDecodeError(
            "request must be an array [api_key, api_version, correlation_id, client_id, body]"
        )
    key, version, correlation_id, client_id, body = raw
    if type(correlation_id) is not int or not -(2**31) <= correlation_id < 2**31:
        raise RequestDecodeError("correlation_id must be a 32-bit integer")
    if type(key) is not int or type(version) is not int:
        raise RequestDecodeError(
            "api_key and api_version must be integers", correlation_id=correlation_id
        )
    if client_id is not None and type(client_id) is not str:
        raise RequestDecodeError("client_id must be a string or nil", correlation_id=correlation_id)
    try:
        api_key = ApiKey(key)
        cls = REQUESTS[api_key]
    except (ValueError, KeyError):
        raise RequestDecodeError(
            f"unknown api_key {key}",
            code=ErrorCode.UNSUPPORTED_VERSION,
            correlation_id=correlation_id,
        ) from None
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise RequestDecodeError(
            f"{cls.__name__} version {version} is not supported "
            f"(supported: {cls.MIN_VERSION}-{cls.MAX_VERSION})",
            code=ErrorCode.UNSUPPORTED_VERSION,
            correlation_id=correlation_id,
            api_key=api_key,
        )
    try:
        decoded = from_wire(cls, body)
    except InvalidMessageError as exc:
        raise RequestDecodeError(
            f"invalid {cls.__name__}: {exc}", correlation_id=correlation_id, api_key=api_key
        ) from exc
    return RequestEnvelope(api_key, version, correlation_id, client_id, decoded)


def encode_response(correlation_id: int, body: Response) -> bytes:
    """A whole frame (length prefix included) for a response."""
    return encode_frame(_pack([correlation_id, to_wire(body)]))


def decode_response_header(payload: bytes) -> tuple[int, Any]:
    """Split a response payload into (correlation_id, raw body) for matching to a request."""
    raw = _unpack(payload)
    if type(raw) is not list or len(raw) != 2 or type(raw[0]) is not int:
        raise RemoteProtocolError("response must be an array [correlation_id, body]")
    return raw[0], raw[1]


def decode_response_body(cls: type[R], raw_body: Any) -> R:
    """Validate a raw response body against the expected response type."""
    return from_wire(cls, raw_body)
