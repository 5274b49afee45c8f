"""deploy.node.controller_config (ControllerProcessConfig): Kafka's controller keys, and bad input refused naming the key;
deploy.cli.quorum's report (Kafka's lag and lag-time arithmetic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BROKER_CONFIGS
from deploy.cluster.quorum import report_from
from deploy.node.controller_config import (
    CONTROLLER_CONFIGS,
    Voter,
    load_controller_config,
    parse_voters,
)
from deploy.telemetry.settings import TELEMETRY_KEYS
from protocol.config_defs import ConfigError
from protocol.messages import describe_quorum as dq

GOOD = {
    "node.id": "2",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@[::1]:9095",
    "listeners": "CONTROLLER://127.0.0.1:9094",
    "metadata.log.dir": "/tmp/x",
}


def test_good_config_from_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'process.roles = ["controller"]\n"node.id" = 2\n'
        '"controller.quorum.voters" = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@[::1]:9095"\n'
        'listeners = ["CONTROLLER://127.0.0.1:9094"]\n"metadata.log.dir" = "/tmp/x"\n'
        '[controller.quorum]\n"election.timeout.ms" = 300\n'
    )
    config = load_controller_config(path, ["controller.quorum.fetch.timeout.ms=700"])
    assert config.node_id == 2
    assert config.voters[3] == Voter(3, "::1", 9095)
    raft = config.raft_config()
    assert raft.voters == frozenset({1, 2, 3})
    assert (raft.election_timeout_ms, raft.fetch_timeout_ms) == (300, 700)
    assert config.cluster_id is None


@pytest.mark.parametrize(
    "change,message",
    [
        ({"controller.quorum.voters": ""}, "controller.quorum.voters: required"),
        ({"controller.quorum.voters": "1@host"}, "'1@host' is not id@host:port"),
        ({"controller.quorum.voters": "x@h:1"}, "'x@h:1' is not id@host:port"),
        ({"controller.quorum.voters": "1@h:1,1@h:2"}, "voter id 1 is listed twice"),
        ({"node.id": "7"}, "node.id: 7 is not one of controller.quorum.voters (1, 2, 3)"),
        ({"metadata.log.dir": ""}, "metadata.log.dir: required"),
        ({"process.roles": "broker,controller"}, "process.roles: a controller process needs"),
        ({"controller.listener.names": "OTHER"}, "controller.listener.names: OTHER is not"),
        ({"controller.quorum.election.timeout.ms": "0"}, "election.timeout.ms: 0 is below"),
        ({"log.dirs": "/x"}, "unknown controller config 'log.dirs'"),
    ],
)
def test_bad_config_names_the_problem(change: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_controller_config(None, {**GOOD, **change})
    assert message in info.value.message


def test_unknown_key_in_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('"zookeeper.connect" = "x"\n')
    with pytest.raises(ConfigError, match=r"unknown controller config 'zookeeper\.connect' in"):
        load_controller_config(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_controller_config(tmp_path / "missing.toml")


def test_parse_voters_keeps_order_and_hosts() -> None:
    assert list(parse_voters("3@a:1, 1@b:2")) == [3, 1]


def test_quorum_report_lag_as_kafka() -> None:
    part = dq.DescribeQuorumPartitionResponse(
        partition_index=0,
        error_code=0,
        leader_id=2,
        leader_epoch=5,
        high_watermark=90,
        current_voters=(
            dq.QuorumReplicaState(
                replica_id=1,
                log_end_offset=90,
                last_fetch_timestamp=990,
                last_caught_up_timestamp=900,
            ),
            dq.QuorumReplicaState(
                replica_id=2,
                log_end_offset=100,
                last_fetch_timestamp=1000,
                last_caught_up_timestamp=1000,
            ),
            dq.QuorumReplicaState(
                replica_id=3,
                log_end_offset=100,
                last_fetch_timestamp=995,
                last_caught_up_timestamp=995,
            ),
        ),
        observers=(dq.QuorumReplicaState(replica_id=7, log_end_offset=-1),),
    )
    report = report_from(part, now_ms=1000)
    assert [(r.node_id, r.status, r.lag) for r in report.replicas] == [
        (2, "Leader", 0),
        (1, "Follower", 10),
        (3, "Follower", 0),
        (7, "Observer", -1),
    ]
    assert report.max_follower_lag == 10
    assert report.max_follower_lag_time_ms == 100
    assert report.current_observers == [7]


def test_quorum_controller_keys_have_kafkas_defaults_and_map_to_controller_settings() -> None:
    base = {
        "node.id": 3001,
        "controller.quorum.voters": "3001@127.0.0.1:9093",
        "metadata.log.dir": "/tmp/unused",
        "listeners": ["CONTROLLER://127.0.0.1:9093"],
    }
    config = load_controller_config(None, base)
    assert config.broker_session_timeout_ms == 9000
    assert config.values["broker.heartbeat.interval.ms"] == 2000
    assert config.snapshot_max_record_bytes == 20971520
    assert config.metadata_max_idle_interval_ms == 500
    settings = config.controller_config()
    assert (settings.num_partitions, settings.default_replication_factor) == (1, 1)
    assert settings.delete_topic_enable and settings.auto_leader_rebalance_enable
    assert settings.leader_imbalance_check_interval_seconds == 300
    assert settings.leader_imbalance_per_broker_percentage == 10
    assert dict(settings.topic_defaults) == {}  # nothing set: no STATIC_BROKER_CONFIG

    config = load_controller_config(
        None,
        {
            **base,
            "num.partitions": 6,
            "default.replication.factor": 3,
            "auto.leader.rebalance.enable": False,
            "log.retention.hours": 1,
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": True,
        },
    )
    settings = config.controller_config()
    assert (settings.num_partitions, settings.default_replication_factor) == (6, 3)
    assert not settings.auto_leader_rebalance_enable
    assert dict(settings.topic_defaults) == {
        "retention.ms": "3600000",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
    }


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("broker.session.timeout.ms", 0, "broker.session.timeout.ms"),
        ("metadata.max.idle.interval.ms", -1, "metadata.max.idle.interval.ms"),
        ("num.partitions", 0, "num.partitions"),
    ],
)
def test_quorum_controller_keys_are_checked(key: str, value: int, problem: str) -> None:
    base = {
        "node.id": 3001,
        "controller.quorum.voters": "3001@127.0.0.1:9093",
        "metadata.log.dir": "/tmp/unused",
        "listeners": ["CONTROLLER://127.0.0.1:9093"],
    }
    with pytest.raises(ConfigError) as raised:
        load_controller_config(None, {**base, key: value})
    assert problem in raised.value.message


def test_every_process_ships_telemetry_and_serves_metrics_with_the_same_keys() -> None:
    for key in (*TELEMETRY_KEYS, "trioka.metrics.port", "trioka.metrics.host"):
        assert CONTROLLER_CONFIGS[key] == BROKER_CONFIGS[key], key
