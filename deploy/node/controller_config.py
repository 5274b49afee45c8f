"""A controller process's config (process.roles=controller): Kafka's KRaft names, a TOML file
plus `--override key=value`, as deploy.node.config does for brokers (its own key set: a controller
has no log dirs, no topics, no ZooKeeper).

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

from broker.config import _FALLBACKS, BROKER_CONFIGS, TOPIC_SYNONYMS, Listener
from controller.config import ControllerConfig as ControllerSettings
from deploy.node.config import flatten, parse_overrides
from deploy.telemetry.settings import TELEMETRY_KEYS
from protocol.config_defs import TOPIC_CONFIGS, ConfigDef, ConfigDefs, ConfigError
from protocol.quorum_voters import Voter, parse_voters
from raft.core import RaftConfig

POLICY_KEYS = (
    "num.partitions",
    "default.replication.factor",
    "delete.topic.enable",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage",
    "unclean.leader.election.enable",
)
"""What the QuorumController decides by (controller.config.ControllerConfig)."""
TOPIC_DEFAULT_KEYS = tuple(
    sorted({*TOPIC_SYNONYMS.values(), *(k for keys in _FALLBACKS.values() for k, _ in keys)})
)
"""The broker keys that set topic config defaults (log.retention.ms -> retention.ms, ...):
a controller describes the ones set in its config as STATIC_BROKER_CONFIG, as the ZK-mode
controller does with its broker's."""

# fmt: off
CONTROLLER_CONFIGS = ConfigDefs(
    "controller",
    [
        ConfigDef("process.roles", "list", ("controller",), "roles of this process: a "
                  "controller process is only a controller", choices=("broker", "controller")),
        ConfigDef("node.id", "int", -1, "this controller's id; must be one of "
                  "controller.quorum.voters", min=0),
        ConfigDef("cluster.id", "string", "", "trioka: the cluster id the quorum checks in "
                  "every request (empty: not checked)"),
        ConfigDef("controller.quorum.voters", "string", "", "the voters as "
                  "id@host:port[,id@host:port...]"),
        ConfigDef("controller.listener.names", "list", ("CONTROLLER",), "listeners of the "
                  "controller; the first is where the voters reach each other"),
        ConfigDef("listeners", "list", ("CONTROLLER://:9093",), "listeners as "
                  "NAME://host:port; port 0 picks a free port"),
        ConfigDef("metadata.log.dir", "string", "", "directory of the metadata log and its "
                  "quorum-state file (required)"),
        ConfigDef("controller.quorum.election.timeout.ms", "int", 1000, "election timeout "
                  "(randomized in [T, 2T))", min=1),
        ConfigDef("controller.quorum.fetch.timeout.ms", "int", 2000, "a follower without a "
                  "good fetch answer for this long starts an election", min=1),
        ConfigDef("controller.quorum.election.backoff.max.ms", "int", 1000, "maximum backoff "
                  "after a lost election", min=0),
        ConfigDef("controller.quorum.request.timeout.ms", "int", 2000, "quorum request "
                  "timeout", min=1),
        ConfigDef("controller.quorum.retry.backoff.ms", "int", 20, "backoff after an error "
                  "answer", min=0),
        ConfigDef("controller.quorum.append.linger.ms", "int", 25, "how long proposals wait "
                  "to be appended together", min=0),
        # The QuorumController (Kafka's names and defaults).
        ConfigDef("broker.session.timeout.ms", "int", 9000, "a broker not heard from for "
                  "longer is fenced (its leaderships re-elected)", min=1),
        ConfigDef("broker.heartbeat.interval.ms", "int", 2000, "how often brokers are "
                  "expected to heartbeat", min=1),
        ConfigDef("metadata.log.max.record.bytes.between.snapshots", "long", 20971520,
                  "write a metadata snapshot once this many bytes of records were applied "
                  "since the last one", min=1),
        ConfigDef("metadata.max.idle.interval.ms", "int", 500, "the active controller "
                  "appends a NoOpRecord when nothing was written for this long (0: never)",
                  min=0),
        # Controller policy and topic defaults: the broker's definitions, same names/defaults.
        *(BROKER_CONFIGS[key] for key in POLICY_KEYS),
        *(BROKER_CONFIGS[key] for key in TOPIC_DEFAULT_KEYS if key not in POLICY_KEYS),
        # The telemetry shipper's keys (deploy/telemetry/settings.py), as a broker's.
        *(BROKER_CONFIGS[key] for key in TELEMETRY_KEYS),
        # Every process serves /metrics (deploy.telemetry.metrics_server): the broker's keys.
        BROKER_CONFIGS["trioka.metrics.port"],
        BROKER_CONFIGS["trioka.metrics.host"],
    ],
)
# fmt: on


@dataclass(frozen=True)
class ControllerConfig:
    values: Mapping[str, Any]
    voters: Mapping[int, Voter]
    listeners: tuple[Listener, ...]
    explicit: frozenset[str] = frozenset()
    """The keys the file and overrides set (the rest are defaults)."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> ControllerConfig:
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
        return cls(resolved, voters, listeners, frozenset(values))

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

    def controller_config(self) -> ControllerSettings:
        """The QuorumController's settings (controller.config.ControllerConfig)."""
        v = self.values
        return ControllerSettings(
            num_partitions=int(v["num.partitions"]),
            default_replication_factor=int(v["default.replication.factor"]),
            delete_topic_enable=bool(v["delete.topic.enable"]),
            auto_leader_rebalance_enable=bool(v["auto.leader.rebalance.enable"]),
            leader_imbalance_check_interval_seconds=int(
                v["leader.imbalance.check.interval.seconds"]
            ),
            leader_imbalance_per_broker_percentage=int(v["leader.imbalance.per.broker.percentage"]),
            topic_defaults=self.static_topic_defaults(),
        )

    def static_topic_defaults(self) -> dict[str, str]:
        """Topic configs whose default this config sets explicitly (log.retention.hours = 1
        -> retention.ms = 3600000), as strings; as broker.config.BrokerConfig's."""
        out: dict[str, str] = {}
        for topic_key in TOPIC_CONFIGS.defs:
            value = self._topic_default(topic_key)
            if value is not None:
                out[topic_key] = TOPIC_CONFIGS[topic_key].to_string(value)
        return out

    def _topic_default(self, topic_key: str) -> Any:
        for broker_key, factor in _FALLBACKS.get(topic_key, ()):
            if broker_key in self.explicit and self.values[broker_key] is not None:
                value = self.values[broker_key]
                return value if value < 0 else value * factor
        broker_key = TOPIC_SYNONYMS.get(topic_key)
        if broker_key is not None and broker_key in self.explicit:
            return self.values[broker_key]
        return None

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
) -> ControllerConfig:
    """File (optional) + overrides -> ControllerConfig. Raises ConfigError naming the key."""
    import tomllib

    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            with path.open("rb") as f:
                values = flatten(tomllib.load(f))
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
        for key in values:
            if key not in CONTROLLER_CONFIGS:
                raise ConfigError(f"unknown controller config {key!r} in {str(path)!r}")
    if isinstance(overrides, Mapping):
        values.update(overrides)
    else:
        values.update(parse_overrides(overrides))
    return ControllerConfig.from_values(values)
