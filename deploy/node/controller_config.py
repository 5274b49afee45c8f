"""A controller process's config (process.roles=controller), ControllerProcessConfig: Kafka's
KRaft names, a TOML file plus `--override key=value`, read as deploy.node.config reads a broker's.
Its keys, CONTROLLER_CONFIGS, are the controller's of the one table of server keys
(protocol.server_configs): a controller has no log dirs, no replication, no ZooKeeper.

    process.roles = ["controller"]
    node.id = 1
    controller.quorum.voters = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
    controller.listener.names = ["CONTROLLER"]
    listeners = ["CONTROLLER://127.0.0.1:9093"]
    metadata.log.dir = "/var/lib/trioka/controller-1"

Unknown keys and bad values raise ConfigError naming the key (and the file).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.config import TLS_PROTOCOLS, Listener, listener_value, parse_protocol_map
from controller.config import ControllerConfig
from deploy.node.config import parse_overrides, read_config_file
from protocol.config_defs import ConfigError
from protocol.quorum_voters import Voter, parse_voters
from protocol.server_configs import CONTROLLER, server_configs
from raft.core import RaftConfig

CONTROLLER_CONFIGS = server_configs(CONTROLLER)
"""Every key a controller process accepts (protocol.server_configs' table: its own keys and the
ones it shares with brokers: the quorum's, the policy keys, the log.* topic defaults, telemetry)."""


@dataclass(frozen=True)
class ControllerProcessConfig:
    """A controller process's resolved config (the controller logic's settings are
    controller.config.ControllerConfig: `controller_config()`)."""

    values: Mapping[str, Any]
    voters: Mapping[int, Voter]
    listeners: tuple[Listener, ...]
    explicit: frozenset[str] = frozenset()
    """The keys the file and overrides set (the rest are defaults)."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> ControllerProcessConfig:
        resolved = CONTROLLER_CONFIGS.resolve(values)
        roles = tuple(resolved["process.roles"])
        if roles != ("controller",):
            raise ConfigError(
                f"process.roles: a controller process needs exactly ['controller'], got "
                f"{list(roles)} (combined broker+controller processes are not supported yet)"
            )
        voters = parse_voters(resolved["controller.quorum.voters"])
        node_id = resolved["node.id"]
        if node_id < 0:
            raise ConfigError("node.id: required for a controller")
        if node_id not in voters:
            raise ConfigError(
                f"node.id: {node_id} is not one of controller.quorum.voters "
                f"({', '.join(str(v) for v in sorted(voters))})"
            )
        if not resolved["metadata.log.dir"]:
            raise ConfigError("metadata.log.dir: required for a controller")
        listeners = tuple(Listener.parse("listeners", text) for text in resolved["listeners"])
        names = tuple(n.upper() for n in resolved["controller.listener.names"])
        if not names:
            raise ConfigError("controller.listener.names: name at least one listener")
        for name in names:
            if name not in {lst.name for lst in listeners}:
                raise ConfigError(
                    f"controller.listener.names: {name} is not one of the listeners "
                    f"({', '.join(str(lst) for lst in listeners)})"
                )
        made = cls(resolved, voters, listeners, frozenset(values))
        made._check_security()
        return made

    def _check_security(self) -> None:
        protocols = self.listener_security_protocol_map
        for listener in self.listeners:
            # A controller listener not in the map is PLAINTEXT (Kafka's
            # effectiveListenerSecurityProtocolMap does the same for KRaft controllers).
            protocol = protocols.get(listener.name, "PLAINTEXT")
            if protocol in TLS_PROTOCOLS and not self["ssl.keystore.location"]:
                raise ConfigError(
                    f"ssl.keystore.location: listener {listener.name} uses {protocol} and needs "
                    "this server's private key and certificate chain (a PEM file)"
                )

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self.values["listener.security.protocol.map"])

    def listener_value(self, listener: str, key: str, mechanism: str = "") -> Any:
        return listener_value(self.values, listener, key, mechanism)

    def __getitem__(self, key: str) -> Any:
        """A resolved value by its config name, as BrokerConfig's."""
        return self.values[key]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def controller_listener_names(self) -> tuple[str, ...]:
        return tuple(n.upper() for n in self.values["controller.listener.names"])

    @property
    def cluster_id(self) -> str | None:
        return str(self.values["cluster.id"]) or None

    @property
    def metadata_log_dir(self) -> str:
        return str(self.values["metadata.log.dir"])

    def raft_config(self) -> RaftConfig:
        v = self.values
        return RaftConfig(
            node_id=self.node_id,
            voters=frozenset(self.voters),
            election_timeout_ms=v["controller.quorum.election.timeout.ms"],
            fetch_timeout_ms=v["controller.quorum.fetch.timeout.ms"],
            election_backoff_max_ms=v["controller.quorum.election.backoff.max.ms"],
            request_timeout_ms=v["controller.quorum.request.timeout.ms"],
            retry_backoff_ms=v["controller.quorum.retry.backoff.ms"],
            append_linger_ms=v["controller.quorum.append.linger.ms"],
        )

    def controller_config(self) -> ControllerConfig:
        """The QuorumController's settings (controller.config.ControllerConfig); the log.*
        keys set here become its topic defaults (STATIC_BROKER_CONFIG)."""
        return ControllerConfig.from_server_config(self.values, self.explicit)

    @property
    def broker_session_timeout_ms(self) -> int:
        return int(self.values["broker.session.timeout.ms"])

    @property
    def metadata_max_idle_interval_ms(self) -> int:
        return int(self.values["metadata.max.idle.interval.ms"])

    @property
    def snapshot_max_record_bytes(self) -> int:
        """metadata.log.max.record.bytes.between.snapshots"""
        return int(self.values["metadata.log.max.record.bytes.between.snapshots"])


def load_controller_config(
    path: str | Path | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()
) -> ControllerProcessConfig:
    """File (optional) + overrides -> ControllerProcessConfig. Raises ConfigError naming the
    key."""
    values = read_config_file(path, CONTROLLER_CONFIGS) if path is not None else {}
    if isinstance(overrides, Mapping):
        values.update(overrides)
    else:
        values.update(parse_overrides(overrides))
    return ControllerProcessConfig.from_values(values)
