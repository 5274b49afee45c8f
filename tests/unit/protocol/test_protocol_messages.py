"""The API registry and message schemas: every type is complete, documented and answerable.

These tests iterate the registry and the modules of protocol.messages, so an API added later
is checked without touching this file.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import textwrap
import typing

import pytest

import protocol.messages
from protocol.errors import ErrorCode
from protocol.messages import REQUESTS, ApiKey, Request, Response, error_response
from protocol.messages.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
    supported_versions,
)
from protocol.messages.base import register
from protocol.schema import from_wire, to_wire


def _message_modules() -> list[object]:
    return [
        importlib.import_module(f"protocol.messages.{info.name}")
        for info in pkgutil.iter_modules(protocol.messages.__path__)
        if not info.ispkg
    ]


def _message_classes() -> list[type]:
    out = []
    for mod in _message_modules():
        for obj in vars(mod).values():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == mod.__name__  # type: ignore[attr-defined]
            ):
                out.append(obj)
    return sorted(out, key=lambda c: (c.__module__, c.__name__))


MESSAGES = _message_classes()
REQUEST_TYPES = [REQUESTS[k] for k in sorted(REQUESTS)]
RESPONSE_TYPES = [cls.RESPONSE for cls in REQUEST_TYPES]


def _ids(classes: list[type]) -> list[str]:
    return [c.__name__ for c in classes]


def test_registry_is_not_empty_and_has_the_issue_2_apis() -> None:
    for key in (
        ApiKey.API_VERSIONS,
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ):
        assert key in REQUESTS, key.name


@pytest.mark.parametrize(
    ("key", "number"),
    [
        (ApiKey.PRODUCE, 0),
        (ApiKey.FETCH, 1),
        (ApiKey.LIST_OFFSETS, 2),
        (ApiKey.METADATA, 3),
        (ApiKey.LEADER_AND_ISR, 4),
        (ApiKey.OFFSET_COMMIT, 8),
        (ApiKey.API_VERSIONS, 18),
        (ApiKey.CREATE_TOPICS, 19),
        (ApiKey.DELETE_TOPICS, 20),
        (ApiKey.INIT_PRODUCER_ID, 22),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, 23),
        (ApiKey.DESCRIBE_CONFIGS, 32),
        (ApiKey.CREATE_PARTITIONS, 37),
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, 44),
        (ApiKey.VOTE, 52),
        (ApiKey.ALTER_PARTITION, 56),
        (ApiKey.FETCH_SNAPSHOT, 59),
        (ApiKey.DESCRIBE_CLUSTER, 60),
        (ApiKey.BROKER_REGISTRATION, 62),
        (ApiKey.BROKER_HEARTBEAT, 63),
    ],
)
def test_api_keys_are_kafkas(key: ApiKey, number: int) -> None:
    assert int(key) == number


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=_ids(REQUEST_TYPES))
def test_every_request_declares_key_versions_and_response(cls: type[Request]) -> None:
    for attr in ("API_KEY", "MAX_VERSION", "RESPONSE"):  # MIN_VERSION defaults to 0
        assert attr in vars(cls), f"{cls.__name__} does not set {attr} itself"
    assert isinstance(cls.API_KEY, ApiKey)
    assert REQUESTS[cls.API_KEY] is cls
    assert type(cls.MIN_VERSION) is int and type(cls.MAX_VERSION) is int
    assert 0 <= cls.MIN_VERSION <= cls.MAX_VERSION
    assert issubclass(cls, Request)
    assert issubclass(cls.RESPONSE, Response)
    assert dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(cls.RESPONSE)
    assert cls.__name__.endswith("Request")
    assert cls.RESPONSE.__name__ == cls.__name__.removesuffix("Request") + "Response"
    assert cls.__name__.removesuffix("Request").upper() == cls.API_KEY.name.replace("_", "")


@pytest.mark.parametrize("cls", RESPONSE_TYPES, ids=_ids(RESPONSE_TYPES))
def test_every_response_carries_error_code_and_message(cls: type[Response]) -> None:
    hints = typing.get_type_hints(cls)
    assert hints["error_code"] is int
    assert hints["error_message"] == str | None
    # The default response is a success, so request-level errors are opt-in.
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert fields["error_code"].default == 0
    assert fields["error_message"].default is None


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=_ids(REQUEST_TYPES))
def test_error_response_builds_for_every_request(cls: type[Request]) -> None:
    resp = error_response(cls, ErrorCode.UNSUPPORTED_VERSION, "too new")
    assert type(resp) is cls.RESPONSE
    assert resp.error_code == 35
    assert resp.error_message == "too new"
    assert from_wire(cls.RESPONSE, to_wire(resp)) == resp


def _field_docstrings(cls: type) -> dict[str, str]:
    """Attribute docstrings: a string literal right after an annotated class attribute."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    node = tree.body[0]
    assert isinstance(node, ast.ClassDef)
    docs: dict[str, str] = {}
    body = node.body
    for stmt, nxt in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[stmt.target.id] = nxt.value.value
    return docs


def test_message_modules_were_found() -> None:
    assert len(MESSAGES) >= 20
    assert ApiVersionsRequest in MESSAGES and ApiVersionRange in MESSAGES


@pytest.mark.parametrize("cls", MESSAGES, ids=_ids(MESSAGES))
def test_every_message_field_has_a_docstring(cls: type) -> None:
    docs = _field_docstrings(cls)
    for f in dataclasses.fields(cls):
        assert f.name in docs, f"{cls.__name__}.{f.name} has no docstring"
        assert docs[f.name].strip(), f"{cls.__name__}.{f.name} has an empty docstring"


@pytest.mark.parametrize("cls", MESSAGES, ids=_ids(MESSAGES))
def test_required_fields_come_before_defaulted_ones(cls: type) -> None:
    """Positional encoding: only trailing fields may be missing on the wire."""
    seen_default = None
    for f in dataclasses.fields(cls):
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        if has_default:
            seen_default = f.name
        else:
            assert seen_default is None, (
                f"{cls.__name__}.{f.name} is required but follows defaulted {seen_default}"
            )


@pytest.mark.parametrize("cls", MESSAGES, ids=_ids(MESSAGES))
def test_messages_are_frozen_keyword_only_dataclasses(cls: type) -> None:
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert all(f.kw_only for f in dataclasses.fields(cls))


def test_supported_versions_lists_every_registered_api_in_key_order() -> None:
    ranges = supported_versions()
    assert [r.api_key for r in ranges] == sorted(int(k) for k in REQUESTS)
    for r in ranges:
        cls = REQUESTS[ApiKey(r.api_key)]
        assert (r.min_version, r.max_version) == (cls.MIN_VERSION, cls.MAX_VERSION)
    resp = ApiVersionsResponse(api_keys=ranges)
    assert from_wire(ApiVersionsResponse, to_wire(resp)) == resp


def test_register_refuses_a_duplicate_api_key() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register(ApiVersionsRequest)
