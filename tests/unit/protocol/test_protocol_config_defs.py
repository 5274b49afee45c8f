"""ConfigDef parsing (Kafka's types, names and defaults) and the topic config set."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.config_defs import (
    INT_MAX,
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigDefs,
    ConfigError,
)
from protocol.errors import ErrorCode, KafkaError

DEFS = ConfigDefs(
    "test",
    [
        ConfigDef("i", "int", 1, "an int", min=0, max=100),
        ConfigDef("l", "long", 1, "a long", min=-1),
        ConfigDef("b", "boolean", False, "a boolean"),
        ConfigDef("s", "string", "a", "a string", choices=("a", "b")),
        ConfigDef("free", "string", "", "any string"),
        ConfigDef("xs", "list", ("x",), "a list", choices=("x", "y")),
        ConfigDef("d", "double", 0.5, "a double", min=0, max=1),
    ],
)


@pytest.mark.parametrize(
    ("key", "raw", "typed"),
    [
        ("i", "42", 42),
        ("i", " 7 ", 7),
        ("i", 0, 0),
        ("i", "+5", 5),
        ("i", "100", 100),
        ("l", "-1", -1),
        ("l", str(LONG_MAX), LONG_MAX),
        ("l", LONG_MAX, LONG_MAX),
        ("b", "true", True),
        ("b", "FALSE", False),
        ("b", " True ", True),
        ("b", True, True),
        ("s", "b", "b"),
        ("free", "anything at all", "anything at all"),
        ("xs", "x,y", ("x", "y")),
        ("xs", " x , y ,", ("x", "y")),
        ("xs", "", ()),
        ("xs", ["y"], ("y",)),
        ("d", "0.25", 0.25),
        ("d", 1, 1.0),
        ("d", "1e-1", 0.1),
    ],
)
def test_parse_good_values(key: str, raw: Any, typed: Any) -> None:
    assert DEFS[key].parse(raw) == typed
    assert DEFS.parse({key: raw}) == {key: typed}


@pytest.mark.parametrize(
    ("key", "raw", "fragment"),
    [
        ("i", "abc", "i: expected an integer, got 'abc'"),
        ("i", "1.5", "expected an integer"),
        ("i", 1.5, "expected an integer"),
        ("i", "1_000", "expected an integer"),
        ("i", "1e3", "expected an integer"),
        ("i", "", "expected an integer"),
        ("i", True, "expected an integer, got True"),
        ("i", None, "expected an integer, got None"),
        ("i", "٣", "expected an integer"),  # a non-ASCII digit int() would accept
        ("i", "-1", "i: -1 is below the minimum 0"),
        ("i", "101", "i: 101 is above the maximum 100"),
        ("i", str(INT_MAX + 1), "does not fit in a 32-bit int"),
        ("l", str(LONG_MAX + 1), "does not fit in a 64-bit long"),
        ("l", "9" * 5000, "does not fit in a 64-bit integer"),
        ("l", "-2", "l: -2 is below the minimum -1"),
        ("b", "yes", "b: expected true or false, got 'yes'"),
        ("b", 1, "expected true or false"),
        ("s", "c", "s: 'c' is not one of a, b"),
        ("s", 5, "s: expected a string, got 5"),
        ("xs", "x,z", "xs: 'z' is not one of x, y"),
        ("xs", [1], "xs: expected a string, got 1"),
        ("d", "abc", "d: expected a number"),
        ("d", "nan", "expected a finite number"),
        ("d", "inf", "expected a finite number"),
        ("d", True, "expected a number"),
        ("d", [0.5], "expected a number"),
        ("d", "2", "d: 2.0 is above the maximum 1"),
    ],
)
def test_parse_bad_values_name_the_key(key: str, raw: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        DEFS.parse({key: raw})
    assert fragment in str(info.value), str(info.value)
    assert info.value.code is ErrorCode.INVALID_CONFIG
    assert isinstance(info.value, KafkaError)


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"unknown test config 'retention\.mss'"):
        DEFS.parse({"retention.mss": "1"})
    assert "i" in DEFS and "nope" not in DEFS


def test_resolve_overlays_defaults() -> None:
    assert DEFS.resolve({"i": "5"}) == {**DEFS.defaults(), "i": 5}
    assert DEFS.resolve({}) == DEFS.defaults()


@pytest.mark.parametrize(
    ("value", "text"), [(True, "true"), (False, "false"), (("a", "b"), "a,b"), ((), ""), (5, "5")]
)
def test_to_string(value: Any, text: str) -> None:
    assert DEFS["free"].to_string(value) == text


# --- Kafka's topic configs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("cleanup.policy", ("delete",)),
        ("retention.ms", 604800000),
        ("retention.bytes", -1),
        ("segment.bytes", 1073741824),
        ("segment.ms", 604800000),
        ("segment.index.bytes", 10485760),
        ("index.interval.bytes", 4096),
        ("max.message.bytes", 1048588),
        ("min.insync.replicas", 1),
        ("unclean.leader.election.enable", False),
        ("flush.messages", LONG_MAX),
        ("flush.ms", LONG_MAX),
        ("file.delete.delay.ms", 60000),
        ("delete.retention.ms", 86400000),
        ("compression.type", "producer"),
        ("message.timestamp.type", "CreateTime"),
    ],
)
def test_topic_config_defaults_are_kafkas(name: str, default: Any) -> None:
    assert TOPIC_CONFIGS[name].default == default


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS.defs))
def test_every_topic_config_is_documented_and_round_trips_its_default(name: str) -> None:
    d = TOPIC_CONFIGS[name]
    assert d.name == name and d.doc.strip()
    assert d.type in ("int", "long", "boolean", "string", "list", "double")
    assert d.parse(d.default) == d.default
    assert d.parse(d.to_string(d.default)) == d.default


@pytest.mark.parametrize(
    ("name", "raw", "fragment"),
    [
        ("segment.bytes", "13", "segment.bytes: 13 is below the minimum 14"),
        ("segment.bytes", str(INT_MAX + 1), "segment.bytes"),
        ("retention.ms", "-2", "retention.ms: -2 is below the minimum -1"),
        ("min.insync.replicas", "0", "min.insync.replicas: 0 is below the minimum 1"),
        ("cleanup.policy", "bogus", "cleanup.policy: 'bogus' is not one of delete"),
        ("compression.type", "gzip", "compression.type: 'gzip' is not one of"),
        ("unclean.leader.election.enable", "maybe", "unclean.leader.election.enable"),
        ("segment.ms", "0", "segment.ms: 0 is below the minimum 1"),
    ],
)
def test_topic_config_bad_values(name: str, raw: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        TOPIC_CONFIGS.parse({name: raw})
    assert fragment in str(info.value)


@settings(deadline=None, max_examples=300)
@given(
    key=st.sampled_from(sorted(TOPIC_CONFIGS.defs)),
    raw=st.text(max_size=30)
    | st.integers()
    | st.booleans()
    | st.none()
    | st.floats()
    | st.lists(st.text(max_size=5), max_size=3),
)
def test_fuzz_topic_configs_parse_or_raise_config_error(key: str, raw: Any) -> None:
    try:
        typed = TOPIC_CONFIGS.parse({key: raw})[key]
    except ConfigError as exc:
        assert key in str(exc)
        return
    d = TOPIC_CONFIGS[key]
    assert d.parse(d.to_string(typed)) == typed
