"""Schema machinery: frozen dataclasses <-> msgpack-ready positional arrays, with validation.

A message is a frozen dataclass whose fields are `int`, `bool`, `float`, `str`, `bytes`,
`X | None`, `tuple[X, ...]` or another message. On the wire it is a msgpack array of its field
values in declaration order (compact, like Kafka's positional schemas). A newer peer may append
fields: extra trailing values are ignored; missing trailing fields take their defaults, so a
field added in a later version must have one. Anything else is an InvalidMessageError that names
the field path and what was wrong, never another exception type.

An `int` is a signed 64-bit integer (Kafka's int64, the widest type it has) in both directions:
msgpack can carry unsigned 64-bit values that no Kafka field can hold, so decoding refuses them,
and `to_wire` refuses to send one (LocalProtocolError naming the field) rather than let msgpack
fail without saying where.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from protocol.errors import LocalProtocolError, RemoteProtocolError

T = TypeVar("T")
_MISSING = dataclasses.MISSING
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class InvalidMessageError(RemoteProtocolError):
    """A body that does not match its schema (Kafka's INVALID_REQUEST)."""


class MessageEncodeError(LocalProtocolError):
    """A message this side was asked to send that its schema cannot carry; names the field."""


class _OutOfRange(Exception):
    """Raised by the fast encoders; `to_wire` then walks the message again to name the field."""


Decoder = Callable[[Any, str], Any]
Encoder = Callable[[Any], Any]

_decoders: dict[Any, Decoder] = {}
_encoders: dict[Any, Encoder] = {}


def _type_name(value: Any) -> str:
    return "nil" if value is None else type(value).__name__


def _fail(path: str, expected: str, value: Any) -> typing.NoReturn:
    raise InvalidMessageError(f"{path}: expected {expected}, got {_type_name(value)}")


def _int_decoder(value: Any, path: str) -> int:
    if type(value) is not int:
        _fail(path, "an integer", value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidMessageError(f"{path}: integer {value} does not fit in a signed 64-bit int")
    return value


def _bool_decoder(value: Any, path: str) -> bool:
    if type(value) is not bool:
        _fail(path, "a boolean", value)
    return value


def _float_decoder(value: Any, path: str) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    _fail(path, "a number", value)


def _str_decoder(value: Any, path: str) -> str:
    if type(value) is not str:
        _fail(path, "a string", value)
    return value


def _bytes_decoder(value: Any, path: str) -> bytes:
    if type(value) is not bytes:
        _fail(path, "bytes", value)
    return value


_SCALARS: dict[Any, Decoder] = {
    int: _int_decoder,
    bool: _bool_decoder,
    float: _float_decoder,
    str: _str_decoder,
    bytes: _bytes_decoder,
}


def _identity(value: Any) -> Any:
    return value


def _int_encoder(value: Any) -> Any:
    # The exact-type test first: the common case is one comparison chain and no call.
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    # int subclasses (ErrorCode, ApiKey, bool) pack as msgpack ints/bools as they are.
    if isinstance(value, int) and INT64_MIN <= value <= INT64_MAX:
        return value
    raise _OutOfRange


def _int_list_encoder(values: Any) -> list[Any]:
    for v in values:
        if not isinstance(v, int) or not INT64_MIN <= v <= INT64_MAX:
            raise _OutOfRange
    return list(values)


def decoder_for(tp: Any) -> Decoder:
    """A validating decoder for a field type (cached per type)."""
    try:
        return _decoders[tp]
    except KeyError:
        pass
    dec = _build_decoder(tp)
    _decoders[tp] = dec
    return dec


def _build_decoder(tp: Any) -> Decoder:
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"only `X | None` unions are supported, not {tp}")
        inner = decoder_for(args[0])

        def optional(value: Any, path: str) -> Any:
            return None if value is None else inner(value, path)

        return optional
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"only tuple[X, ...] is supported, not {tp}")
        item = decoder_for(args[0])

        def sequence(value: Any, path: str) -> tuple[Any, ...]:
            if type(value) is not list and type(value) is not tuple:
                _fail(path, "an array", value)
            return tuple(item(v, f"{path}[{i}]") for i, v in enumerate(value))

        return sequence
    if dataclasses.is_dataclass(tp):
        return _message_decoder(tp)
    raise TypeError(f"unsupported schema type {tp!r}")


def _message_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        default = f.default
        if default is _MISSING and f.default_factory is not _MISSING:
            default = f.default_factory()
        specs.append((f.name, decoder_for(hints[f.name]), default))
    required = sum(1 for _, _, d in specs if d is _MISSING)
    name = cls.__name__

    def message(value: Any, path: str) -> Any:
        if type(value) is not list and type(value) is not tuple:
            _fail(path or name, f"an array for {name}", value)
        if len(value) < required:
            missing = specs[len(value)][0]
            raise InvalidMessageError(
                f"{path or name}: {name} has {len(value)} fields, needs at least {required} "
                f"(missing {missing!r})"
            )
        kwargs = {}
        for i, (fname, dec, default) in enumerate(specs):
            fpath = f"{path}.{fname}" if path else fname
            if i < len(value):
                kwargs[fname] = dec(value[i], fpath)
            else:
                kwargs[fname] = default
        return cls(**kwargs)

    return message


def encoder_for(tp: Any) -> Encoder:
    try:
        return _encoders[tp]
    except KeyError:
        pass
    enc = _build_encoder(tp)
    _encoders[tp] = enc
    return enc


def _build_encoder(tp: Any) -> Encoder:
    if tp is int:
        return _int_encoder
    if tp in _SCALARS:
        return _identity
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = encoder_for(args[0])
        if inner is _identity:
            return _identity
        return lambda v: None if v is None else inner(v)
    if origin is tuple:
        item = encoder_for(typing.get_args(tp)[0])
        if item is _identity:
            return list
        if item is _int_encoder:
            return _int_list_encoder
        return lambda v: [item(x) for x in v]
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        getters = [(f.name, encoder_for(hints[f.name])) for f in dataclasses.fields(tp)]
        if getattr(tp, "WIRE_MEMO", False):
            return _memo_encoder(getters)
        return lambda v: [enc(getattr(v, n)) for n, enc in getters]
    raise TypeError(f"unsupported schema type {tp!r}")


def _memo_encoder(getters: list[tuple[str, Encoder]]) -> Encoder:
    """An immutable message's encoding, kept on the instance (`reused_message`): a value sent
    in many responses is walked once. The kept lists are never handed out to be changed:
    msgpack only reads them."""

    def memo(v: Any) -> Any:
        kept = v.__dict__
        wire = kept.get(_WIRE)
        if wire is None:
            wire = kept[_WIRE] = [enc(getattr(v, n)) for n, enc in getters]
        return wire

    return memo


_WIRE = "_wire"


def to_wire(message: Any) -> list[Any]:
    """Turn a message into nested lists ready for msgpack.

    Only int fields are checked on this fast path (msgpack cannot say which field overflowed);
    a value of the wrong type elsewhere is packed as it is and refused by the peer's decoder.
    Raises MessageEncodeError naming the field when an int field holds something that is not
    an integer or does not fit in 64 signed bits, or when a field cannot be walked at all.
    """
    try:
        return encoder_for(type(message))(message)
    except (_OutOfRange, TypeError, AttributeError) as exc:
        name = type(message).__name__
        problem = _explain(type(message), message, "") or str(exc)
        raise MessageEncodeError(f"cannot encode {name}: {problem}") from None


_EXPECTED = {int: "an integer", bool: "a boolean", float: "a number", str: "a string"}


def _explain(tp: Any, value: Any, path: str) -> str:
    """Slow path of to_wire: the first field whose value does not fit its type, or ""."""
    if tp is int:
        if not isinstance(value, int):
            return f"{path}: expected an integer, got {_type_name(value)}"
        if not INT64_MIN <= value <= INT64_MAX:
            return f"{path}: integer {value} does not fit in a signed 64-bit int"
        return ""
    if tp in _SCALARS:
        ok = isinstance(value, (bytes, bytearray, memoryview) if tp is bytes else tp)
        if tp is float:
            ok = isinstance(value, (int, float))
        return (
            "" if ok else f"{path}: expected {_EXPECTED.get(tp, 'bytes')}, got {_type_name(value)}"
        )
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return ""
        inner = next(a for a in typing.get_args(tp) if a is not type(None))
        return _explain(inner, value, path)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return f"{path}: expected a tuple, got {_type_name(value)}"
        item = typing.get_args(tp)[0]
        for i, v in enumerate(value):
            if problem := _explain(item, v, f"{path}[{i}]"):
                return problem
        return ""
    if dataclasses.is_dataclass(tp):
        if type(value) is not tp:
            return f"{path or tp.__name__}: expected {tp.__name__}, got {_type_name(value)}"
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            fpath = f"{path}.{f.name}" if path else f.name
            if problem := _explain(hints[f.name], getattr(value, f.name), fpath):
                return problem
    return ""


def from_wire(cls: type[T], value: Any) -> T:
    """Validate and build a message of type `cls`; raises InvalidMessageError naming the field."""
    return decoder_for(cls)(value, "")
