"""The broker's static configuration: Kafka's names and defaults (KafkaConfig), typed.

`BROKER_CONFIGS` is every key a broker accepts, taken from the one table of server keys
(protocol.server_configs, which a controller process's keys come from too);
`BrokerConfig.from_values` parses a mapping (TOML file + `--override`s, assembled by
`deploy.node.config`) into a frozen, typed config and keeps which keys were set explicitly
(DescribeConfigs reports STATIC_BROKER_CONFIG for those).

Broker-level `log.*` settings are the defaults of the topic configs, as in Kafka (its
LogConfig synonyms: `log.retention.ms` -> `retention.ms`, `log.segment.bytes` ->
`segment.bytes`, ...; protocol.server_configs.TOPIC_SYNONYMS): `BrokerConfig.topic_defaults()`
gives the TOPIC_CONFIGS defaults with the broker's values overlaid, and `topic_config_sources()`
says which came from the broker.

Some keys are trioka's own, each documented as such:
- `queued.max.requests.per.connection` (default 5): requests read from one connection and not
  yet answered. Kafka reads one request per connection at a time (the channel is muted while it
  is served); trioka serves a connection's requests concurrently up to this limit, answering
  them in request order. Once the limit is reached the broker stops reading that socket, so TCP
  pushes back on the client.
- `cluster.id` (default empty): the cluster id written to meta.properties on first start (what
  `kafka-storage format --cluster-id` does in Kafka); empty means generate one.
- `metadata.mode` (raft | zk | standalone, default raft): where the metadata lives. Kafka
  says this with `zookeeper.connect` vs `process.roles`; trioka names it because it has a third,
  legacy choice. raft (KRaft): with `process.roles = ["broker", "controller"]` (combined mode,
  the default for a single dev node as in Kafka 4) the process is also the metadata quorum's
  only voter: `controller.quorum.voters` empty (the voter is this node.id) or naming exactly
  this node, whose CONTROLLER listener (`controller.listener.names`, one of `listeners`, not
  advertised) then serves the quorum APIs (`trioka quorum describe`); trioka's combined mode is
  single-node only. With `process.roles = ["broker"]` (the default when
  `controller.quorum.voters` is set and does not name this node) the broker follows a quorum of
  separate controller processes: `controller.quorum.voters` required (the broker is not one of
  them) and `controller.listener.names` names the controllers' listener (not one of this
  broker's). zk: `zookeeper.connect` is required and `inter.broker.listener.name` must name one
  of the advertised listeners. standalone: the pre-Raft single-node broker on a local metadata
  log (raft.local_log) with no Raft at all, kept as an explicit fallback (no quorum state, no
  registration or heartbeats); new setups should use the raft default.
- `trioka.replica.truncate.to.hw.on.become.follower` (default false, for tests only): brings
  back the pre-KIP-101 truncation to the local high watermark, to show what it breaks.
- `trioka.offsets.retention.ms` (default -1: off; for tests only): overrides
  offsets.retention.minutes, whose smallest value (1) is too long for a test.
- `trioka.metrics.port` (default -1: off; 0: a free port) and `trioka.metrics.host` (default
  127.0.0.1): where the process serves Prometheus' `/metrics` (docs/internals.md,
  deploy/telemetry). Kafka exposes its metrics through JMX and has no such key, hence the
  trioka prefix.
- `metrics.interval.ms` (default 10000) and `trioka.telemetry.*` (enable, spool.dir,
  spool.max.bytes, bootstrap.servers, replication.factor): the telemetry shipper
  (deploy/telemetry/settings.py says what each does). Kafka's metrics.sample.window.ms is not
  this (it is the window of its rate samples), hence the issue's own name.

Named listeners follow Kafka's rules (KafkaConfig.validateValues): every listener needs an entry
in `listener.security.protocol.map` (default Kafka's: each protocol name mapped to itself; trioka
serves all four; SSL and SASL_SSL listeners need `ssl.keystore.location`), listener names and
ports are unique, advertised.listeners names a subset of the listeners and never the 0.0.0.0 meta-address, and in ZK mode inter.broker.listener.name is
one of the advertised listeners (other brokers dial it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from protocol.config_defs import ConfigError
from protocol.quorum_voters import Voter, parse_voters
from protocol.server_configs import (
    BROKER,
    SECURITY_PROTOCOLS,
    server_configs,
    static_topic_defaults,
    topic_config_sources,
    topic_defaults,
)

BROKER_CONFIGS = server_configs(BROKER)
"""Every key a broker accepts (protocol.server_configs' table: the broker's and the shared keys)."""


SERVED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""The security protocols a listener may use."""
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` entry of `listeners` / `advertised.listeners`."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, key: str, text: str) -> Listener:
        parts = urlsplit(text)
        if not parts.scheme or "://" not in text:
            raise ConfigError(f"{key}: {text!r} is not NAME://host:port")
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is None:
            raise ConfigError(f"{key}: {text!r} has no valid port")
        return cls(parts.scheme.upper(), parts.hostname or "", port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _check_unique_ports(listeners: tuple[Listener, ...]) -> None:
    """Kafka refuses two listeners on one port, except one IPv4 and one IPv6 host (KIP-797);
    port 0 (a free port each) never clashes."""
    by_port: dict[int, list[Listener]] = {}
    for listener in listeners:
        if listener.port:
            by_port.setdefault(listener.port, []).append(listener)
    for port, same in by_port.items():
        if len(same) == 1:
            continue
        families = {":" in listener.host for listener in same}
        if len(same) == 2 and len(families) == 2 and all(x.host for x in same):
            continue
        raise ConfigError(
            f"listeners: each listener must have a different port, but "
            f"{', '.join(str(x) for x in same)} share port {port}"
        )


class ListenerSecurity(Protocol):
    """What the listeners' TLS and SASL settings are read from: a broker's or a controller
    process's config."""

    @property
    def listener_security_protocol_map(self) -> dict[str, str]: ...

    def listener_value(self, listener: str, key: str, mechanism: str = "") -> Any: ...

    def __getitem__(self, key: str) -> Any: ...


def parse_protocol_map(entries: Iterable[object]) -> dict[str, str]:
    """listener.security.protocol.map's NAME:PROTOCOL entries; ConfigError names a bad one."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, protocol = str(entry).partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ConfigError(f"listener.security.protocol.map: {entry!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {entry!r} names an unknown security "
                f"protocol {protocol} (known: {', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in out:
            raise ConfigError(f"listener.security.protocol.map: {name} is mapped twice")
        out[name] = protocol
    return out


def listener_value(values: Mapping[str, Any], listener: str, key: str, mechanism: str = "") -> Any:
    """`key` as Kafka reads it for one listener: `listener.name.<listener>.<mechanism>.<key>`
    (sasl.jaas.config), then `listener.name.<listener>.<key>`, then `key`."""
    prefix = f"listener.name.{listener.lower()}."
    candidates = [f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []
    for name in (*candidates, prefix + key):
        if name in values:
            return values[name]
    return values[key]


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed broker config. `values` holds every key of BROKER_CONFIGS."""

    values: Mapping[str, Any]
    explicit: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> BrokerConfig:
        """Parse raw values (strings or TOML natives); ConfigError names any bad or unknown key."""
        resolved = BROKER_CONFIGS.resolve(values)
        config = cls(resolved, frozenset(values))
        config._check()
        return config

    def _check(self) -> None:
        """Kafka's listener rules (KafkaConfig.validateValues and listenerListToEndPoints)."""
        listeners = self.listeners
        if not listeners:
            raise ConfigError("listeners: at least one listener is required")
        names = [listener.name for listener in listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners: listener names must be unique, got {names}")
        _check_unique_ports(listeners)
        protocols = self.listener_security_protocol_map
        for listener in listeners:
            protocol = protocols.get(listener.name)
            if protocol is None:
                raise ConfigError(
                    f"listeners: no security protocol defined for listener {listener.name} in "
                    f"listener.security.protocol.map (e.g. {listener.name}:PLAINTEXT)"
                )
            if protocol not in SERVED_PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: listener {listener.name} uses {protocol}; "
                    f"trioka serves {' and '.join(SERVED_PROTOCOLS)}"
                )
            if protocol in TLS_PROTOCOLS and not self["ssl.keystore.location"]:
                raise ConfigError(
                    f"ssl.keystore.location: listener {listener.name} uses {protocol} and needs "
                    "this server's private key and certificate chain (a PEM file)"
                )
        advertised = self.advertised_listeners
        advertised_names = [a.name for a in advertised]
        if len(set(advertised_names)) != len(advertised_names):
            raise ConfigError(
                f"advertised.listeners: listener names must be unique, got {advertised_names}"
            )
        for adv in advertised:
            if adv.name not in names:
                raise ConfigError(
                    f"advertised.listeners: {adv.name} is not one of the listeners {names}"
                )
            if adv.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    f"advertised.listeners: {adv} uses the nonroutable meta-address "
                    f"{adv.host}; advertise a routable address"
                )

        if self.values["metadata.mode"] == "zk":
            if not self.values["zookeeper.connect"]:
                raise ConfigError("zookeeper.connect: required when metadata.mode is zk")
            self._check_inter_broker_listener()
        if self.values["metadata.mode"] == "raft":
            self._check_raft_mode(names)
        if self.values["replica.socket.timeout.ms"] < self.values["replica.fetch.wait.max.ms"]:
            raise ConfigError(
                "replica.socket.timeout.ms: must be at least replica.fetch.wait.max.ms "
                f"({self.values['replica.fetch.wait.max.ms']})"
            )

    def _check_raft_mode(self, listener_names: list[str]) -> None:
        """KRaft's rules (KafkaConfig.validateValues) for process.roles=broker, or trioka's
        single-node combined mode."""
        if self.combined_mode:
            self._check_combined_mode(listener_names)
            return
        roles = self.process_roles
        if roles != ("broker",):
            raise ConfigError(
                f"process.roles: a metadata.mode=raft process needs ['broker'] or ['broker', "
                f"'controller'] (combined mode), got {list(roles)} (a controller-only process is "
                "`python -m deploy.node.controller`)"
            )
        voters = self.voters  # parses: ConfigError naming controller.quorum.voters
        if not voters:
            raise ConfigError(
                "controller.quorum.voters: required when process.roles is ['broker'] (the "
                "controllers as id@host:port,...); leave process.roles unset for a single-node "
                "combined broker+controller"
            )
        if self.node_id in voters:
            raise ConfigError(
                f"node.id: {self.node_id} is one of controller.quorum.voters "
                f"({', '.join(str(v) for v in sorted(voters))}); a broker needs an id of its own"
            )
        names = self.controller_listener_names
        if not names:
            raise ConfigError(
                "controller.listener.names: required when metadata.mode is raft (the name of "
                "the controllers' listener, e.g. ['CONTROLLER'])"
            )
        for name in names:
            if name in listener_names:
                raise ConfigError(
                    f"controller.listener.names: {name} must not be one of this broker's "
                    f"listeners {listener_names} (process.roles=broker)"
                )
        self._check_inter_broker_listener()

    def _check_combined_mode(self, listener_names: list[str]) -> None:
        """process.roles=[broker, controller]: this process is the quorum's only voter."""
        voters = self.voters
        others = sorted(v for v in voters if v != self.node_id)
        if others or (voters and self.node_id not in voters):
            raise ConfigError(
                f"process.roles: combined mode (['broker', 'controller']) is single-node only "
                f"in trioka, but controller.quorum.voters names {others or sorted(voters)} "
                f"besides node.id {self.node_id}; run the controllers as separate processes "
                "(deploy.node.controller) and set process.roles = ['broker'] here"
            )
        names = self.controller_listener_names
        if voters:
            if not names:
                raise ConfigError(
                    "controller.listener.names: required when controller.quorum.voters names "
                    "this node (the listener serving the quorum APIs, e.g. ['CONTROLLER'])"
                )
            if names[0] not in listener_names:
                raise ConfigError(
                    f"controller.listener.names: {names[0]} must be one of the listeners "
                    f"{listener_names} in combined mode (it serves the quorum APIs)"
                )
            voter = voters[self.node_id]
            listener = next(x for x in self.listeners if x.name == names[0])
            if listener.port not in (0, voter.port):
                raise ConfigError(
                    f"controller.quorum.voters: node {self.node_id} is at port {voter.port} but "
                    f"its controller listener {listener} listens on {listener.port}"
                )
        elif names:
            raise ConfigError(
                f"controller.listener.names: {list(names)} set but controller.quorum.voters is "
                f"empty; a combined node serves a controller listener only when the voters name "
                f'it (controller.quorum.voters = "{self.node_id}@host:port")'
            )
        advertised = [a.name for a in self.advertised_listeners]
        for name in names:
            if name in advertised:
                raise ConfigError(
                    f"advertised.listeners: must not contain the controller listener {name}"
                )
        if self.inter_broker_listener_name in names:
            raise ConfigError(
                f"inter.broker.listener.name: {self.inter_broker_listener_name} is a controller "
                "listener; name one of the broker's listeners"
            )
        # No inter.broker.listener.name check (unlike process.roles=broker): no other broker
        # ever dials a single node, so listeners may be named freely, as in standalone mode.

    def _check_inter_broker_listener(self) -> None:
        inter = self.inter_broker_listener_name
        effective = [a.name for a in self.effective_advertised_listeners]
        if inter not in effective:
            raise ConfigError(
                f"inter.broker.listener.name: {inter} must be one of the advertised "
                f"listeners {effective}"
            )
        if self.listener_security_protocol_map.get(inter) in SASL_PROTOCOLS:
            mechanism = self["sasl.mechanism.inter.broker.protocol"]
            enabled = self.listener_value(inter, "sasl.enabled.mechanisms")
            if mechanism not in enabled:
                # Kafka refuses this at start-up: every broker's login would be refused.
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol: {mechanism} is not one of the "
                    f"mechanisms listener {inter} enables ({', '.join(enabled)})"
                )

    def listener_value(self, listener: str, key: str, mechanism: str = "") -> Any:
        return listener_value(self.values, listener, key, mechanism)

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise ConfigError(f"unknown broker config {key!r}")
        return self.values[key]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def listeners(self) -> tuple[Listener, ...]:
        return tuple(Listener.parse("listeners", s) for s in self.values["listeners"])

    @property
    def advertised_listeners(self) -> tuple[Listener, ...]:
        return tuple(
            Listener.parse("advertised.listeners", s) for s in self.values["advertised.listeners"]
        )

    @property
    def effective_advertised_listeners(self) -> tuple[Listener, ...]:
        """advertised.listeners when set, else listeners (as Kafka: a listener missing from a
        set advertised.listeners is not advertised, so clients never learn its address)."""
        return self.advertised_listeners or self.broker_listeners

    @property
    def broker_listeners(self) -> tuple[Listener, ...]:
        """The listeners that serve clients and brokers: all but a combined node's controller
        listener (Kafka's BrokerServer does not serve controller.listener.names either)."""
        if not self.combined_mode:
            return self.listeners
        names = self.controller_listener_names
        return tuple(x for x in self.listeners if x.name not in names)

    @property
    def controller_listeners(self) -> tuple[Listener, ...]:
        """A combined node's listeners that serve the quorum APIs (empty without voters)."""
        if not self.combined_mode:
            return ()
        names = self.controller_listener_names
        return tuple(x for x in self.listeners if x.name in names)

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map parsed; ConfigError names a malformed entry."""
        return parse_protocol_map(self.values["listener.security.protocol.map"])

    @property
    def metadata_mode(self) -> str:
        return str(self.values["metadata.mode"])

    @property
    def zk_mode(self) -> bool:
        return self.values["metadata.mode"] == "zk"

    @property
    def raft_mode(self) -> bool:
        return self.values["metadata.mode"] == "raft"

    @property
    def process_roles(self) -> tuple[str, ...]:
        """process.roles as set; unset: ['broker'] when controller.quorum.voters is set and does
        not name this node (a broker of a separate quorum), else ['broker', 'controller']."""
        if "process.roles" in self.explicit:
            return tuple(self.values["process.roles"])
        voters = str(self.values["controller.quorum.voters"]).strip()
        if voters and self.node_id not in parse_voters(voters):
            return ("broker",)
        return ("broker", "controller")

    @property
    def combined_mode(self) -> bool:
        """metadata.mode=raft with process.roles [broker, controller]: broker and the single
        voter of the metadata quorum in one process."""
        return self.raft_mode and set(self.process_roles) == {"broker", "controller"}

    @property
    def voters(self) -> dict[int, Voter]:
        """controller.quorum.voters parsed (ConfigError naming the key when malformed); empty
        when unset (a combined node is then the only voter)."""
        text = str(self.values["controller.quorum.voters"])
        return parse_voters(text) if text.strip() else {}

    @property
    def controller_listener_names(self) -> tuple[str, ...]:
        return tuple(str(n).upper() for n in self.values["controller.listener.names"])

    @property
    def inter_broker_listener_name(self) -> str:
        return str(self.values["inter.broker.listener.name"]).upper()

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        value = self.values["zookeeper.connection.timeout.ms"]
        return int(value if value is not None else self.values["zookeeper.session.timeout.ms"])

    @property
    def log_dirs(self) -> tuple[str, ...]:
        dirs = self.values["log.dirs"]
        return tuple(dirs) if dirs else (self.values["log.dir"],)

    @property
    def metadata_log_dir(self) -> str:
        return self.values["metadata.log.dir"] or self.log_dirs[0]

    def topic_defaults(self) -> dict[str, Any]:
        """TOPIC_CONFIGS defaults overlaid with this broker's `log.*` values (typed)."""
        return topic_defaults(self.values)

    def static_topic_defaults(self) -> dict[str, str]:
        """Topic configs whose default this broker's config sets (log.retention.ms ->
        retention.ms, ...), as strings: DescribeConfigs' STATIC_BROKER_CONFIG values."""
        return static_topic_defaults(self.values, self.explicit)

    def topic_config_sources(self) -> dict[str, bool]:
        """For each topic config: True when a broker key set explicitly decides its default."""
        return topic_config_sources(self.explicit)

    def describe_value(self, key: str) -> str | None:
        """The value of a broker key as DescribeConfigs shows it (null when unset)."""
        value = self[key]
        if value is None:
            return None
        return BROKER_CONFIGS[key].to_string(value)
