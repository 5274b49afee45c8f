"""Broker configs -> the controller's rebalance settings: auto.leader.rebalance.enable,
leader.imbalance.check.interval.seconds and leader.imbalance.per.broker.percentage reach the
ControllerConfig a ZK-mode broker builds (deploy.node.broker._controller_config) and the
ControllerService's check interval, with Kafka's defaults and bad values refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from broker.config import BrokerConfig
from controller.config import ControllerConfig
from deploy.node.broker_base import controller_config as _controller_config
from deploy.node.controller_services import zk_controller_service
from protocol.config_defs import ConfigError


def broker_config(**overrides: Any) -> BrokerConfig:
    return BrokerConfig.from_values(
        {
            "node.id": 1,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "metadata.mode": "zk",
            "zookeeper.connect": "127.0.0.1:2181",
            **overrides,
        }
    )


def controller_config(**overrides: Any) -> ControllerConfig:
    return _controller_config(broker_config(**overrides), max_partitions_per_request=1_000_000)


def test_kafkas_defaults() -> None:
    config = controller_config()
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_check_interval_seconds == 300
    assert config.leader_imbalance_per_broker_percentage == 10


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {
                "auto.leader.rebalance.enable": False,
                "leader.imbalance.check.interval.seconds": 1,
                "leader.imbalance.per.broker.percentage": 25,
            },
            (False, 1, 25),
        ),
        (  # strings, as from --override key=value
            {
                "auto.leader.rebalance.enable": "true",
                "leader.imbalance.check.interval.seconds": "7",
                "leader.imbalance.per.broker.percentage": "0",
            },
            (True, 7, 0),
        ),
    ],
)
def test_broker_configs_reach_the_controller_config(
    overrides: dict[str, Any], expected: tuple[bool, int, int]
) -> None:
    config = controller_config(**overrides)
    assert (
        config.auto_leader_rebalance_enable,
        config.leader_imbalance_check_interval_seconds,
        config.leader_imbalance_per_broker_percentage,
    ) == expected


def test_the_check_interval_drives_the_zk_controllers_rebalance_task() -> None:
    config = controller_config(**{"leader.imbalance.check.interval.seconds": 3})
    service = zk_controller_service(object(), 1, object(), config=config)  # type: ignore[arg-type]
    assert service.rebalance_interval_s == 3.0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("leader.imbalance.check.interval.seconds", 0),
        ("leader.imbalance.check.interval.seconds", "often"),
        ("leader.imbalance.per.broker.percentage", -1),
        ("auto.leader.rebalance.enable", "sometimes"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        broker_config(**{key: value})
