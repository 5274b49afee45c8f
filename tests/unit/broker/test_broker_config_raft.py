"""broker.config in metadata.mode=raft: the shared contract's keys and KRaft's broker rules."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from protocol.config_defs import ConfigError
from protocol.quorum_voters import Voter

RAFT = {
    "metadata.mode": "raft",
    "process.roles": ["broker"],
    "controller.quorum.voters": "3001@127.0.0.1:9093,3002@127.0.0.1:9094,3003@[::1]:9095",
    "controller.listener.names": ["CONTROLLER"],
}


def test_raft_mode_parses_voters_and_has_kafka_defaults() -> None:
    config = BrokerConfig.from_values(RAFT)
    assert config.raft_mode and not config.zk_mode
    assert config.voters[3003] == Voter(3003, "::1", 9095)
    assert config.controller_listener_names == ("CONTROLLER",)
    assert config["broker.heartbeat.interval.ms"] == 2000
    assert config["broker.session.timeout.ms"] == 9000
    assert config["controller.quorum.request.timeout.ms"] == 2000
    assert config["controller.quorum.fetch.timeout.ms"] == 2000
    assert config["controller.quorum.retry.backoff.ms"] == 20
    assert config["metadata.log.max.record.bytes.between.snapshots"] == 20971520


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ({"controller.quorum.voters": ""}, "controller.quorum.voters: required"),
        ({"controller.quorum.voters": "3001@host"}, "'3001@host' is not id@host:port"),
        ({"process.roles": ["broker", "controller"]}, "process.roles"),
        ({"node.id": 3002}, "node.id: 3002 is one of controller.quorum.voters"),
        ({"controller.listener.names": []}, "controller.listener.names: required"),
        ({"controller.listener.names": ["PLAINTEXT"]}, "must not be one of this broker"),
        ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
    ],
)
def test_raft_mode_errors_name_the_key(override: dict, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_values({**RAFT, **override})
    assert named in info.value.message


def test_other_modes_ignore_the_raft_keys() -> None:
    assert not BrokerConfig.from_values({"metadata.mode": "standalone"}).raft_mode
    assert not BrokerConfig.from_values({"metadata.mode": "standalone"}).combined_mode


def test_unset_roles_with_other_voters_mean_a_broker_of_that_quorum() -> None:
    """Wave 1's Raft-mode broker configs need not say process.roles = ["broker"]."""
    config = BrokerConfig.from_values({k: v for k, v in RAFT.items() if k != "process.roles"})
    assert config.process_roles == ("broker",) and not config.combined_mode


CONTROLLER_MAP = {"listener.security.protocol.map": ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]}


def test_combined_mode_is_the_default_single_voter() -> None:
    config = BrokerConfig.from_values({})
    assert config.raft_mode and config.combined_mode
    assert config.process_roles == ("broker", "controller")
    assert config.voters == {}
    assert config.controller_listeners == ()
    assert config.broker_listeners == config.listeners


def test_combined_mode_with_its_own_controller_listener() -> None:
    config = BrokerConfig.from_values(
        {
            "node.id": 1,
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": ["PLAINTEXT://127.0.0.1:9092", "CONTROLLER://127.0.0.1:9093"],
            "controller.listener.names": ["CONTROLLER"],
            **CONTROLLER_MAP,
        }
    )
    assert config.combined_mode
    assert [x.name for x in config.broker_listeners] == ["PLAINTEXT"]
    assert [x.name for x in config.controller_listeners] == ["CONTROLLER"]
    # Clients are never told about the controller listener.
    assert [x.name for x in config.effective_advertised_listeners] == ["PLAINTEXT"]


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (
            {"controller.quorum.voters": "1@h:9093,2@h:9094"},
            "process.roles: combined mode (['broker', 'controller']) is single-node only",
        ),
        (
            {"process.roles": ["broker", "controller"], "controller.quorum.voters": "2@h:9093"},
            "is single-node only",
        ),
        ({"process.roles": ["controller"]}, "deploy.node.controller"),
        ({"process.roles": ["broker"]}, "controller.quorum.voters: required when process.roles"),
        ({"controller.quorum.voters": "1@h:9093"}, "controller.listener.names: required"),
        ({"controller.listener.names": ["CONTROLLER"]}, "controller.quorum.voters is empty"),
        (
            {
                "controller.quorum.voters": "1@h:9094",
                "listeners": ["PLAINTEXT://:9092", "CONTROLLER://:9093"],
                "controller.listener.names": ["CONTROLLER"],
                **CONTROLLER_MAP,
            },
            "controller.quorum.voters: node 1 is at port 9094",
        ),
        (
            {
                "controller.quorum.voters": "1@h:9093",
                "controller.listener.names": ["CONTROLLER"],
            },
            "must be one of the listeners",
        ),
    ],
)
def test_combined_mode_errors_name_the_key(values: dict, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_values(values)
    assert named in info.value.message
