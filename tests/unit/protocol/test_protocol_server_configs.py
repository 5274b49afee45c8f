"""protocol.server_configs: one table of server config keys, each process kind's set built from
it (a shared key has one definition), the log.* -> topic config synonyms, the heartbeat rule."""

from __future__ import annotations

import pytest

from protocol.config_defs import TOPIC_CONFIGS, ConfigDef, ConfigDefs, ConfigError
from protocol.server_configs import (
    BOTH,
    BROKER,
    CONTROLLER,
    SERVER_CONFIGS,
    heartbeat_interval_ms,
    server_configs,
    static_topic_defaults,
    topic_default_keys,
)

BROKER_KEYS = server_configs(BROKER)
CONTROLLER_KEYS = server_configs(CONTROLLER)


def test_each_kind_takes_its_keys_from_the_one_table() -> None:
    assert (BROKER_KEYS.what, CONTROLLER_KEYS.what) == ("broker", "controller")
    assert set(BROKER_KEYS.defs) | set(CONTROLLER_KEYS.defs) == set(SERVER_CONFIGS.defs)
    for name, d in SERVER_CONFIGS.defs.items():
        assert d.kinds and d.kinds <= BOTH, name
        assert (name in BROKER_KEYS, name in CONTROLLER_KEYS) == (
            BROKER in d.kinds,
            CONTROLLER in d.kinds,
        )


@pytest.mark.parametrize("name", sorted(set(BROKER_KEYS.defs) & set(CONTROLLER_KEYS.defs)))
def test_a_shared_key_is_one_definition(name: str) -> None:
    broker, controller = BROKER_KEYS[name], CONTROLLER_KEYS[name]
    assert broker.doc == controller.doc and broker.doc.strip()
    assert (broker.type, broker.min, broker.max, broker.choices) == (
        controller.type,
        controller.min,
        controller.max,
        controller.choices,
    )


def test_a_controller_process_has_its_own_defaults_for_its_identity() -> None:
    own = {name: d.default for name, d in CONTROLLER_KEYS.defs.items()
           if d.default != SERVER_CONFIGS[name].default}  # fmt: skip
    assert own == {
        "process.roles": ("controller",),
        "node.id": -1,
        "listeners": ("CONTROLLER://:9093",),
        "controller.listener.names": ("CONTROLLER",),
    }
    assert BROKER_KEYS["process.roles"].default == ("broker", "controller")
    assert BROKER_KEYS["node.id"].default == 1


@pytest.mark.parametrize("name", sorted(SERVER_CONFIGS.defs))
def test_every_server_key_is_documented_and_round_trips_its_default(name: str) -> None:
    d = BROKER_KEYS[name] if name in BROKER_KEYS else CONTROLLER_KEYS[name]
    assert d.name == name and d.doc.strip()
    if d.default is not None:
        assert d.parse(d.to_string(d.default)) == d.default


@pytest.mark.parametrize("topic_key", sorted(TOPIC_CONFIGS.defs))
def test_the_keys_setting_topic_defaults_are_a_brokers_and_a_controllers(topic_key: str) -> None:
    for key in topic_default_keys(topic_key):
        assert SERVER_CONFIGS[key].kinds == BOTH, key


def test_static_topic_defaults_are_the_explicit_keys_only() -> None:
    values = BROKER_KEYS.resolve({"log.retention.minutes": 2, "log.cleanup.policy": "compact"})
    assert static_topic_defaults(values, {"log.retention.minutes", "log.cleanup.policy"}) == {
        "retention.ms": "120000",
        "cleanup.policy": "compact",
    }
    assert static_topic_defaults(values, ()) == {}


def test_unknown_keys_are_refused_naming_the_kind() -> None:
    with pytest.raises(ConfigError, match=r"unknown controller config 'log\.dirs'"):
        CONTROLLER_KEYS.parse({"log.dirs": "/x"})
    with pytest.raises(ConfigError, match=r"unknown broker config 'metadata\.max\.idle\."):
        BROKER_KEYS.parse({"metadata.max.idle.interval.ms": "1"})
    with pytest.raises(ValueError, match="no such process kind"):
        server_configs("zookeeper")


def test_a_key_defined_twice_is_refused() -> None:
    d = ConfigDef("x", "int", 1, "an x")
    with pytest.raises(ValueError, match="'x' is defined twice"):
        ConfigDefs("test", [d, d])


@pytest.mark.parametrize(
    ("session_ms", "heartbeat_ms"), [(9000, 2000), (18000, 2000), (3000, 1000), (150, 100)]
)
def test_heartbeat_interval_is_kafkas_or_a_third_of_the_session(
    session_ms: int, heartbeat_ms: int
) -> None:
    assert heartbeat_interval_ms(session_ms) == heartbeat_ms
