"""A controller process's config (process.roles=controller): Kafka's KRaft names, a TOML file
plus `--override key=value`, as deploy.config does for brokers (its own key set: a controller
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

from broker.config import Listener
from deploy.config import flatten, parse_overrides
from protocol.config_defs import ConfigDef, ConfigDefs, ConfigError
from protocol.quorum_voters import Voter, parse_voters
from raft.core import RaftConfig

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
    ],
)
# fmt: on


@dataclass(frozen=True)
class ControllerConfig:
    values: Mapping[str, Any]
    voters: Mapping[int, Voter]
    listeners: tuple[Listener, ...]

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
        return cls(resolved, voters, listeners)

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
