"""Request/response envelopes on top of framing and the schemas (docs/internals.md, protocol/).

Request payload: msgpack `[api_key, api_version, correlation_id, client_id, body]`.
Response payload: msgpack `[correlation_id, body]`. Bodies are positional arrays (protocol.schema).
Decoding errors are RemoteProtocolError subclasses that carry whatever of the header could be
read, so a server can still answer the right correlation id with INVALID_REQUEST or
UNSUPPORTED_VERSION instead of dropping the connection: `error_response_for(exc)` builds that
answer. ApiVersions is special, as in Kafka (KIP-511): a client may send it at a version newer
than the broker's, and the broker answers with UNSUPPORTED_VERSION *and* its own version ranges
so that the client can pick a version both understand.

msgpack is given explicit size limits derived from the payload (no declared length may exceed
the bytes actually present), so a hostile 5-byte payload claiming a 4 GiB array allocates
nothing; the payload itself is bounded by the frame limit (socket.request.max.bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import msgpack

from protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from protocol.framing import encode_frame
from protocol.messages import REQUESTS, ApiKey, Request, Response, error_response
from protocol.messages.api_versions import ApiVersionsResponse, supported_versions
from protocol.schema import InvalidMessageError, from_wire, to_wire

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

R = TypeVar("R", bound=Response)


@dataclass(frozen=True, slots=True)
class RequestEnvelope:
    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Request


class RequestDecodeError(RemoteProtocolError):
    """A request that cannot be served. `correlation_id`, `api_key` and `api_version` are set
    when readable (`api_key` only when it names an API this broker serves)."""

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = ErrorCode.INVALID_REQUEST,
        correlation_id: int | None = None,
        api_key: ApiKey | None = None,
        api_version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version


def unpack_payload(payload: bytes | bytearray | memoryview) -> Any:
    """msgpack-decode a whole payload with limits no larger than the payload itself.

    Raises RemoteProtocolError naming the problem (truncated, trailing bytes, bad type byte,
    too deeply nested, invalid UTF-8, non-string map key, ...).
    """
    n = len(payload)
    try:
        return msgpack.unpackb(
            payload,
            raw=False,
            use_list=True,
            strict_map_key=True,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n // 2,
            max_ext_len=n,
        )
    except Exception as exc:  # msgpack raises ExtraData, ValueError, UnicodeDecodeError, ...
        raise RemoteProtocolError(
            f"payload is not valid msgpack: {type(exc).__name__}: {exc}"
        ) from exc


_unpack = unpack_payload


def _pack(obj: Any) -> bytes:
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"cannot encode as msgpack: {exc}") from exc


def encode_request(
    correlation_id: int, client_id: str | None, body: Request, api_version: int | None = None
) -> bytes:
    """A whole frame (length prefix included) for `body`, at its newest version by default.

    `api_version` is not checked against the type's range, so a test can send a version the
    peer does not support. Raises LocalProtocolError (MessageEncodeError naming the field for a
    bad body) when the request cannot be encoded.
    """
    version = type(body).MAX_VERSION if api_version is None else api_version
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        raise LocalProtocolError(f"correlation_id {correlation_id!r} is not a 32-bit integer")
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
        raise _bad_envelope(raw)
    key, version, correlation_id, client_id, body = raw
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        raise RequestDecodeError("correlation_id must be a 32-bit integer")
    if type(key) is not int or type(version) is not int:
        raise RequestDecodeError(
            "api_key and api_version must be integers", correlation_id=correlation_id
        )
    try:
        api_key = ApiKey(key)
        cls = REQUESTS[api_key]
    except (ValueError, KeyError):
        raise RequestDecodeError(
            f"unknown api_key {key}",
            code=ErrorCode.UNSUPPORTED_VERSION,
            correlation_id=correlation_id,
            api_version=version,
        ) from None
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        # For ApiVersions the body is not even looked at (a newer version may have a different
        # shape); error_response_for() answers with this broker's ranges all the same.
        raise RequestDecodeError(
            f"{cls.__name__} version {version} is not supported "
            f"(supported: {cls.MIN_VERSION}-{cls.MAX_VERSION})",
            code=ErrorCode.UNSUPPORTED_VERSION,
            correlation_id=correlation_id,
            api_key=api_key,
            api_version=version,
        )
    if client_id is not None and type(client_id) is not str:
        raise RequestDecodeError(
            "client_id must be a string or nil",
            correlation_id=correlation_id,
            api_key=api_key,
            api_version=version,
        )
    try:
        decoded = from_wire(cls, body)
    except InvalidMessageError as exc:
        raise RequestDecodeError(
            f"invalid {cls.__name__}: {exc}",
            correlation_id=correlation_id,
            api_key=api_key,
            api_version=version,
        ) from exc
    return RequestEnvelope(api_key, version, correlation_id, client_id, decoded)


def _bad_envelope(raw: Any) -> RequestDecodeError:
    """Name the shape problem, keeping whatever header fields are readable for the answer."""
    shape = f"a {_type_name(raw)}" if type(raw) is not list else f"an array of {len(raw)}"
    message = (
        "request must be an array [api_key, api_version, correlation_id, client_id, body], "
        f"got {shape}"
    )
    if type(raw) is not list or len(raw) < 3:
        return RequestDecodeError(message)
    key, version, correlation_id = raw[:3]
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        return RequestDecodeError(message)
    api_key = None
    if type(key) is int and key in REQUESTS and type(version) is int:  # IntEnum keys hash as ints
        api_key = ApiKey(key)
    return RequestDecodeError(
        message,
        correlation_id=correlation_id,
        api_key=api_key,
        api_version=version if type(version) is int else None,
    )


def _type_name(value: Any) -> str:
    return "nil" if value is None else type(value).__name__


def api_versions_response(
    error_code: int = ErrorCode.NONE, error_message: str | None = None
) -> ApiVersionsResponse:
    """This broker's ApiVersions answer: every registered API with its version range."""
    return ApiVersionsResponse(
        api_keys=supported_versions(), error_code=int(error_code), error_message=error_message
    )


def error_response_for(exc: RequestDecodeError) -> Response | None:
    """The response a server sends for a request it could not decode, or None when it cannot
    answer (correlation id unreadable, or an API it does not serve, whose response shape it
    cannot know): the server then closes the connection, as Kafka does.

    ApiVersions of any version, even one newer than ours or with a body we cannot parse, is
    answered with our supported ranges and the error, so that the client can downgrade.
    """
    if exc.correlation_id is None or exc.api_key is None:
        return None
    if exc.api_key is ApiKey.API_VERSIONS:
        return api_versions_response(exc.code, str(exc))
    return error_response(REQUESTS[exc.api_key], exc.code, str(exc))


def encode_error_response(exc: RequestDecodeError) -> bytes | None:
    """`error_response_for(exc)` as a whole frame, or None when the connection must close."""
    body = error_response_for(exc)
    if body is None or exc.correlation_id is None:
        return None
    return encode_response(exc.correlation_id, body)


def encode_response(correlation_id: int, body: Response) -> bytes:
    """A whole frame (length prefix included) for a response."""
    return encode_frame(_pack([correlation_id, to_wire(body)]))


def decode_response_header(payload: bytes) -> tuple[int, Any]:
    """Split a response payload into (correlation_id, raw body) for matching to a request."""
    raw = _unpack(payload)
    if (
        type(raw) is not list
        or len(raw) != 2
        or type(raw[0]) is not int
        or not INT32_MIN <= raw[0] <= INT32_MAX
    ):
        raise RemoteProtocolError(
            "response must be an array [correlation_id (32-bit integer), body]"
        )
    return raw[0], raw[1]


def decode_response_body(cls: type[R], raw_body: Any) -> R:
    """Validate a raw response body against the expected response type; raises
    InvalidMessageError naming the field."""
    return from_wire(cls, raw_body)
