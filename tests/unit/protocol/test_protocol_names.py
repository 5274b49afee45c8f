"""Topic names (they become directory names) and TopicPartition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode, KafkaError
from protocol.names import (
    MAX_TOPIC_NAME_LENGTH,
    TopicPartition,
    is_internal,
    topic_name_problem,
    validate_topic_name,
)


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "orders",
        "Orders.v2",
        "my_topic-1",
        "...",
        "._-",
        "-leading-dash",
        "__consumer_offsets",
        "x" * 249,
        "0123456789",
    ],
)
def test_legal_names(name: str) -> None:
    assert topic_name_problem(name) is None
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "topic name is empty"),
        (".", "topic name cannot be '.'"),
        ("..", "topic name cannot be '..'"),
        ("x" * 250, "is 250 characters long; the limit is 249"),
        ("x" * 10_000, "is 10000 characters long"),
        ("a/b", "illegal characters '/'"),
        ("a b", "illegal characters ' '"),
        ("a\\b", "illegal characters"),
        ("a\nb", "illegal characters"),
        ("a\x00b", "illegal characters"),
        ("a:b", "illegal characters ':'"),
        ("a*b?c", "illegal characters '*?'"),
        ("café", "illegal characters 'é'"),
        ("τοπικ", "illegal characters"),
        ("topic٣", "illegal characters '٣'"),  # a non-ASCII digit
        ("ｔｏｐｉｃ", "illegal characters"),  # fullwidth letters
        ("emoji🙂", "illegal characters"),
        ("x\u200b", "illegal characters"),  # zero-width space
    ],
)
def test_illegal_names(name: str, fragment: str) -> None:
    problem = topic_name_problem(name)
    assert problem is not None and fragment in problem, problem
    with pytest.raises(KafkaError) as info:
        validate_topic_name(name)
    assert info.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert fragment in str(info.value)


@pytest.mark.parametrize("name", [None, 5, b"bytes", ["a"]])
def test_non_string_names(name: object) -> None:
    with pytest.raises(KafkaError, match="topic name must be a string"):
        validate_topic_name(name)  # type: ignore[arg-type]


def test_limit_is_kafkas() -> None:
    assert MAX_TOPIC_NAME_LENGTH == 249


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=300))
def test_fuzz_names_agree_with_the_rule(name: str) -> None:
    legal = (
        1 <= len(name) <= 249
        and name not in (".", "..")
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    )
    assert (topic_name_problem(name) is None) == legal


def test_topic_partition() -> None:
    tp = TopicPartition("orders", 3)
    assert str(tp) == "orders-3"
    assert tp.dir_name == "orders-3"
    assert TopicPartition.from_dir_name("orders-3") == tp
    assert TopicPartition.from_dir_name("my-topic-12") == TopicPartition("my-topic", 12)
    assert tp == ("orders", 3)
    assert {tp: 1}[TopicPartition("orders", 3)] == 1


@pytest.mark.parametrize("name", ["orders", "orders-", "-3", "orders-x", "orders-٣", "orders--1x"])
def test_from_dir_name_refuses_non_partition_dirs(name: str) -> None:
    with pytest.raises(ValueError, match="is not a <topic>-<partition> directory name"):
        TopicPartition.from_dir_name(name)


def test_internal_topics() -> None:
    assert is_internal("__consumer_offsets")
    assert is_internal("__transaction_state")
    assert not is_internal("orders")
