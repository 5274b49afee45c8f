"""Hypothesis over every registered API: round trips, and arbitrary or mutated bodies.

Iterates protocol.messages.REQUESTS, so a new API is fuzzed without touching this file. The
property: any input yields a decoded request or a RequestDecodeError - never another exception.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.codec import (
    RequestDecodeError,
    decode_request,
    decode_response_body,
    decode_response_header,
    encode_error_response,
    encode_request,
    encode_response,
    error_response_for,
)
from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder
from protocol.messages import REQUESTS, Request, Response
from protocol.schema import INT64_MAX, INT64_MIN, InvalidMessageError, MessageEncodeError, to_wire

REQUEST_TYPES = [REQUESTS[k] for k in sorted(REQUESTS)]
RESPONSE_TYPES = [cls.RESPONSE for cls in REQUEST_TYPES]

# A fixed budget shared by all APIs, so the suite's time stays flat as APIs are added (each
# still gets a floor of examples).
FUZZ = settings(
    deadline=None,
    max_examples=int(os.environ.get("TRIOKA_FUZZ_EXAMPLES", max(15, 450 // len(REQUEST_TYPES)))),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _ids(classes: list[type]) -> list[str]:
    return [c.__name__ for c in classes]


def payload_of(frame: bytes) -> bytes:
    dec = FrameDecoder()
    dec.feed(frame)
    (payload,) = dec.frames()
    return payload


def ints_fit(value: Any) -> bool:
    """Every int in a message (nested) fits in a signed 64-bit int."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    if isinstance(value, tuple):
        return all(ints_fit(v) for v in value)
    if dataclasses.is_dataclass(value):
        return all(ints_fit(getattr(value, f.name)) for f in dataclasses.fields(value))
    return True


def clamp_ints(value: Any) -> Any:
    """The same message with every int folded into the signed 64-bit range."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if INT64_MIN <= value <= INT64_MAX else value % INT64_MAX
    if isinstance(value, tuple):
        return tuple(clamp_ints(v) for v in value)
    if dataclasses.is_dataclass(value):
        changes = {f.name: clamp_ints(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    return value


# A msgpack-able value of any shape, for bodies that ignore the schema entirely.
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
ANY_VALUE = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=_ids(REQUEST_TYPES))
@FUZZ
@given(data=st.data(), corr=st.integers(-(2**31), 2**31 - 1))
def test_request_round_trip_from_type(cls: type[Request], data: Any, corr: int) -> None:
    body = data.draw(st.from_type(cls))
    client = data.draw(st.none() | st.text(max_size=10))
    version = data.draw(st.integers(cls.MIN_VERSION, cls.MAX_VERSION))
    if not ints_fit(body):
        with pytest.raises(MessageEncodeError, match="does not fit in a signed 64-bit int"):
            encode_request(corr, client, body, api_version=version)
        return
    env = decode_request(payload_of(encode_request(corr, client, body, api_version=version)))
    assert env.body == body
    assert (env.api_key, env.api_version, env.correlation_id, env.client_id) == (
        cls.API_KEY,
        version,
        corr,
        client,
    )


@pytest.mark.parametrize("cls", RESPONSE_TYPES, ids=_ids(RESPONSE_TYPES))
@FUZZ
@given(data=st.data(), corr=st.integers(-(2**31), 2**31 - 1))
def test_response_round_trip_from_type(cls: type[Response], data: Any, corr: int) -> None:
    body = data.draw(st.from_type(cls))
    if not ints_fit(body):
        with pytest.raises(MessageEncodeError, match="does not fit in a signed 64-bit int"):
            encode_response(corr, body)
        return
    got_corr, raw = decode_response_header(payload_of(encode_response(corr, body)))
    assert got_corr == corr
    assert decode_response_body(cls, raw) == body


def _decode_or_clear_error(payload: bytes) -> None:
    """The property: a request, or a RequestDecodeError a server can act on."""
    try:
        env = decode_request(payload)
    except RequestDecodeError as exc:
        assert str(exc)
        answer = encode_error_response(exc)
        if answer is not None:
            corr, raw = decode_response_header(payload_of(answer))
            assert corr == exc.correlation_id
            resp = error_response_for(exc)
            assert resp is not None
            assert decode_response_body(type(resp), raw) == resp
        return
    assert isinstance(env.body, REQUESTS[env.api_key])


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=_ids(REQUEST_TYPES))
@FUZZ
@given(body=ANY_VALUE, version=st.integers(-2, 5), client=ANY_VALUE)
def test_arbitrary_bodies_decode_or_raise_request_decode_error(
    cls: type[Request], body: Any, version: int, client: Any
) -> None:
    payload = msgpack.packb([int(cls.API_KEY), version, 1, client, body], use_bin_type=True)
    _decode_or_clear_error(payload)


def _mutate(wire: Any, data: Any) -> Any:
    """Replace, drop, append or retype one node somewhere in a wire value."""
    if isinstance(wire, list) and wire and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(wire) - 1))
        copy = list(wire)
        copy[i] = _mutate(copy[i], data)
        return copy
    action = data.draw(st.sampled_from(["replace", "truncate", "append", "wrap"]))
    if action == "replace":
        return data.draw(ANY_VALUE)
    if action == "truncate" and isinstance(wire, list):
        return wire[: data.draw(st.integers(0, len(wire)))]
    if action == "append" and isinstance(wire, list):
        return [*wire, data.draw(ANY_VALUE)]
    return [wire]


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=_ids(REQUEST_TYPES))
@FUZZ
@given(data=st.data())
def test_mutated_valid_bodies_decode_or_raise_request_decode_error(
    cls: type[Request], data: Any
) -> None:
    body = data.draw(st.from_type(cls).map(clamp_ints))
    wire = [int(cls.API_KEY), cls.MAX_VERSION, 5, "c", to_wire(body)]
    for _ in range(data.draw(st.integers(1, 4))):
        wire = _mutate(wire, data)
    try:
        payload = msgpack.packb(wire, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        return  # not msgpack-encodable; nothing to send
    _decode_or_clear_error(payload)


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=_ids(REQUEST_TYPES))
@FUZZ
@given(data=st.data())
def test_mutated_encoded_bytes_decode_or_raise_request_decode_error(
    cls: type[Request], data: Any
) -> None:
    body = data.draw(st.from_type(cls).map(clamp_ints))
    payload = bytearray(payload_of(encode_request(3, None, body)))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    _decode_or_clear_error(bytes(payload[:cut]) if data.draw(st.booleans()) else bytes(payload))


@settings(deadline=None, max_examples=int(os.environ.get("TRIOKA_FUZZ_EXAMPLES", "500")))
@given(payload=st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_request_decode_error(payload: bytes) -> None:
    _decode_or_clear_error(payload)


@settings(deadline=None, max_examples=int(os.environ.get("TRIOKA_FUZZ_EXAMPLES", "300")))
@given(payload=st.binary(max_size=200))
def test_arbitrary_response_bytes_raise_only_protocol_errors(payload: bytes) -> None:
    for cls in RESPONSE_TYPES:
        try:
            _corr, raw = decode_response_header(payload)
            decode_response_body(cls, raw)
        except ProtocolError:
            pass


@pytest.mark.parametrize("cls", RESPONSE_TYPES, ids=_ids(RESPONSE_TYPES))
@FUZZ
@given(body=ANY_VALUE)
def test_arbitrary_response_bodies_raise_only_invalid_message(
    cls: type[Response], body: Any
) -> None:
    try:
        decoded = decode_response_body(cls, body)
    except InvalidMessageError as exc:
        assert str(exc)
    else:
        assert isinstance(decoded, cls)
