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
    assert not BrokerConfig.from_values({}).raft_mode
