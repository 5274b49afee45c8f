"""What `trioka cluster` (deploy.cluster.supervisor) needs for a Raft-mode cluster: the controllers' and the
Raft-mode brokers' config files, the cluster id, and the quorum as the controllers describe it.

    cluster_id = new_cluster_id()                       # once per cluster, like kafka-storage.sh
    voters = voters_string([(3001, host, p1), ...])     # "3001@127.0.0.1:P1,..."
    controller_toml(3001, host, p1, voters, dir / "metadata", cluster_id, settings)
    broker_raft_lines(voters, dir / "metadata", cluster_id, settings)   # or _settings: a dict
    controller_part({"num.partitions": "3", "log.retention.ms": "1"})  # keys controllers know
    await quorum_report("127.0.0.1:P1,127.0.0.1:P2")    # deploy.cluster.quorum.QuorumReport

Controllers are node ids 3001.. (CONTROLLER_BASE_ID), so they never collide with broker ids 1..N;
they listen on the CONTROLLER listener at a port chosen before the first start (every voter must
know every other's address), pinned in their controller.toml from then on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deploy.cluster.quorum import QuorumReport, describe_quorum, parse_controllers
from deploy.node.controller_config import CONTROLLER_CONFIGS
from protocol.metadata.topic_ids import uuid_to_string

CONTROLLER_BASE_ID = 3001
CONTROLLER_LISTENER = "CONTROLLER"
# Keys that make a controller what it is: the supervisor writes them, an override must not.
_IDENTITY_KEYS = frozenset(
    {"process.roles", "node.id", "cluster.id", "controller.quorum.voters",
     "controller.listener.names", "listeners", "metadata.log.dir"}
)  # fmt: skip

__all__ = [
    "CONTROLLER_BASE_ID",
    "CONTROLLER_LISTENER",
    "broker_raft_lines",
    "broker_raft_settings",
    "controller_part",
    "controller_toml",
    "new_cluster_id",
    "quorum_report",
    "toml_lines",
    "voters_string",
]


def new_cluster_id() -> str:
    """A random Kafka Uuid string (kafka-storage.sh random-uuid); never one starting with '-',
    which command lines would take for an option (Kafka's Uuid.randomUuid avoids it too)."""
    while True:
        text = uuid_to_string(os.urandom(16))
        if not text.startswith("-"):
            return text


def voters_string(voters: Sequence[tuple[int, str, int]]) -> str:
    """controller.quorum.voters from (node id, host, port) triples."""
    return ",".join(f"{node_id}@{host}:{port}" for node_id, host, port in voters)


def controller_part(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings a controller takes as well: the policy keys brokers and controllers share
    (num.partitions, default.replication.factor, auto.leader.rebalance.enable, log.* topic
    defaults, ...). In Raft mode the controller applies them, so a cluster-wide override must
    reach it; keys only a broker knows stay with the brokers."""
    return {
        k: v for k, v in settings.items() if k in CONTROLLER_CONFIGS and k not in _IDENTITY_KEYS
    }


def toml_lines(settings: Mapping[str, object]) -> str:
    """TOML `"key" = value` lines (Kafka's dotted keys quoted) for a node's config file."""
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in settings.items())


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def controller_toml(node_id: int, host: str, port: int, voters: str, metadata_log_dir: Path,
                    cluster_id: str, settings: Mapping[str, object]) -> str:  # fmt: skip
    """A controller process's controller.toml (deploy.node.controller_config's keys)."""
    return toml_lines(
        {
            "process.roles": ["controller"],
            "node.id": node_id,
            "cluster.id": cluster_id,
            "controller.quorum.voters": voters,
            "controller.listener.names": [CONTROLLER_LISTENER],
            "listeners": [f"{CONTROLLER_LISTENER}://{host}:{port}"],
            "metadata.log.dir": str(metadata_log_dir),
            **settings,
        }
    )


def broker_raft_settings(voters: str, metadata_log_dir: Path, cluster_id: str,
                         settings: Mapping[str, object]) -> dict[str, object]:  # fmt: skip
    """The Raft-mode keys of a broker.toml (the shared contract's broker keys): the broker
    follows the metadata log as an observer and talks to the controllers' CONTROLLER listener."""
    return {
        "metadata.mode": "raft",
        "process.roles": ["broker"],
        "cluster.id": cluster_id,
        "controller.quorum.voters": voters,
        "controller.listener.names": [CONTROLLER_LISTENER],
        # As Kafka's config/kraft/broker.properties: the controllers' listener name maps to
        # a protocol although the broker does not listen on it.
        "listener.security.protocol.map": [
            f"{CONTROLLER_LISTENER}:PLAINTEXT",
            "PLAINTEXT:PLAINTEXT",
            "SSL:SSL",
            "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "SASL_SSL:SASL_SSL",
        ],
        "metadata.log.dir": str(metadata_log_dir),
        **settings,
    }


def broker_raft_lines(voters: str, metadata_log_dir: Path, cluster_id: str,
                      settings: Mapping[str, object]) -> str:  # fmt: skip
    """broker_raft_settings as broker.toml lines."""
    return toml_lines(broker_raft_settings(voters, metadata_log_dir, cluster_id, settings))


async def quorum_report(
    controller_bootstrap: str, *, timeout_s: float = 2.0, client: Mapping[str, Any] | None = None
) -> QuorumReport:
    """DescribeQuorum through deploy.cli.quorum (`trioka quorum describe`'s code): the leader's
    view. KafkaError (NOT_LEADER_OR_FOLLOWER naming each answer) when no leader answers.
    `client`: the controllers' listener's client settings (security)."""
    return await describe_quorum(parse_controllers(controller_bootstrap), timeout_s, client)
