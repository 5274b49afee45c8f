"""The broker's static configuration: Kafka's names and defaults (KafkaConfig), typed.

`BROKER_CONFIGS` defines every key a broker accepts; `BrokerConfig.from_values` parses a mapping
(TOML file + `--override`s, assembled by `deploy.node.config`) into a frozen, typed config and keeps
which keys were set explicitly (DescribeConfigs reports STATIC_BROKER_CONFIG for those).

Broker-level `log.*` settings are the defaults of the topic configs, as in Kafka (its
LogConfig synonyms: `log.retention.ms` -> `retention.ms`, `log.segment.bytes` ->
`segment.bytes`, ...): `BrokerConfig.topic_defaults()` gives the TOPIC_CONFIGS defaults with
the broker's values overlaid, and `topic_config_sources()` says which came from the broker.

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
  127.0.0.1): where the process serves Prometheus' `/metrics` (DESIGN section 8). Kafka exposes
  its metrics through JMX and has no such key, hence the trioka prefix.
- `metrics.interval.ms` (default 10000) and `trioka.telemetry.*` (enable, spool.dir,
  spool.max.bytes, bootstrap.servers, replication.factor): the telemetry shipper
  (deploy/telemetry/settings.py says what each does). Kafka's metrics.sample.window.ms is not
  this (it is the window of its rate samples), hence the issue's own name.

Named listeners follow Kafka's rules (KafkaConfig.validateValues): every listener needs an entry
in `listener.security.protocol.map` (default Kafka's: each protocol name mapped to itself; trioka
serves PLAINTEXT only), listener names and ports are unique, advertised.listeners names a subset
of the listeners and never the 0.0.0.0 meta-address, and in ZK mode inter.broker.listener.name is
one of the advertised listeners (other brokers dial it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from protocol.config_defs import (
    INT_MAX,
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigDefs,
    ConfigError,
)
from protocol.quorum_voters import Voter, parse_voters

_MS_PER_HOUR = 3_600_000
# Kafka's SecurityProtocol names; its default listener.security.protocol.map maps each to itself.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_PROTOCOL_MAP = tuple(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
_MS_PER_MINUTE = 60_000

BROKER_CONFIGS = ConfigDefs(
    "broker",
    [
        # Identity and listeners
        ConfigDef("node.id", "int", 1, "this node's id (Kafka has no default in KRaft mode; a "
                  "standalone trioka broker is node 1 unless told otherwise)", min=0,
                  read_only=True),
        ConfigDef("cluster.id", "string", "", "trioka: cluster id for meta.properties on first "
                  "start; empty generates one", read_only=True),
        ConfigDef("process.roles", "list", ("broker", "controller"), "roles of this process "
                  "(metadata.mode=raft): broker,controller = combined mode, the single-node "
                  "quorum's only voter; broker = a broker of a separate controller quorum "
                  "(the default when controller.quorum.voters names other nodes only)",
                  choices=("broker", "controller"), read_only=True),
        ConfigDef("listeners", "list", ("PLAINTEXT://:9092",), "listeners as NAME://host:port; "
                  "an empty host binds all interfaces, port 0 picks a free port", read_only=True),
        ConfigDef("advertised.listeners", "list", (), "addresses given to clients (default: "
                  "listeners)", read_only=True),
        ConfigDef("inter.broker.listener.name", "string", "PLAINTEXT", "listener brokers use "
                  "between themselves (replica fetchers, controller requests, forwarding); "
                  "must be one of the advertised listeners", read_only=True),
        ConfigDef("listener.security.protocol.map", "list", _DEFAULT_PROTOCOL_MAP, "listener "
                  "name -> security protocol, as NAME:PROTOCOL; every listener needs an entry "
                  "(trioka serves PLAINTEXT only)", read_only=True),
        ConfigDef("controller.listener.names", "list", (), "listeners of the controller",
                  read_only=True),
        ConfigDef("broker.rack", "string", "", "rack of this broker (empty: none)",
                  read_only=True),
        # Storage
        ConfigDef("log.dirs", "list", (), "directories of the partition logs (default: log.dir)",
                  read_only=True),
        ConfigDef("log.dir", "string", "/tmp/kafka-logs", "log directory when log.dirs is unset",
                  read_only=True),
        ConfigDef("metadata.log.dir", "string", "", "directory of the metadata log (default: "
                  "the first log dir)", read_only=True),
        ConfigDef("log.segment.bytes", "int", 1073741824, "roll a segment at this size",
                  min=14, max=INT_MAX),
        ConfigDef("log.roll.ms", "long", None, "roll a segment after this long (default: "
                  "log.roll.hours)", min=1),
        ConfigDef("log.roll.hours", "int", 168, "roll a segment after this many hours", min=1),
        ConfigDef("log.retention.ms", "long", None, "keep segments this long, -1 forever "
                  "(default: log.retention.minutes, then log.retention.hours)", min=-1),
        ConfigDef("log.retention.minutes", "int", None, "keep segments this many minutes", min=-1),
        ConfigDef("log.retention.hours", "int", 168, "keep segments this many hours", min=-1),
        ConfigDef("log.retention.bytes", "long", -1, "keep at most this many bytes per "
                  "partition (-1: no limit)", min=-1),
        ConfigDef("log.retention.check.interval.ms", "long", 300000, "how often retention runs",
                  min=1),
        ConfigDef("log.index.interval.bytes", "int", 4096, "bytes between offset index entries",
                  min=0),
        ConfigDef("log.index.size.max.bytes", "int", 10485760, "maximum size of an offset index",
                  min=4),
        ConfigDef("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many "
                  "records", min=1),
        ConfigDef("log.flush.interval.ms", "long", None, "fsync after this long (default: "
                  "never, durability comes from replication)", min=0),
        ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX, "how often the flusher "
                  "checks for logs to fsync", min=1),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, "how often recovery "
                  "points are checkpointed", min=0),
        ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "how often log "
                  "start offsets are checkpointed", min=0),
        ConfigDef("log.segment.delete.delay.ms", "long", 60000, "wait before deleting a segment "
                  "file", min=0),
        ConfigDef("log.cleanup.policy", "list", ("delete",), "default cleanup.policy",
                  choices=("delete", "compact")),
        ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, "default "
                  "delete.retention.ms", min=0),
        ConfigDef("log.cleaner.enable", "boolean", True, "run the log cleaner (compaction of "
                  "cleanup.policy=compact topics, __consumer_offsets among them)"),
        ConfigDef("log.cleaner.threads", "int", 1, "logs cleaned at the same time", min=0),
        ConfigDef("log.cleaner.backoff.ms", "long", 15000, "sleep between passes of a cleaner "
                  "thread that found nothing to clean", min=0),
        ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, "offset-map memory of "
                  "all cleaner threads (24 bytes a key)", min=0),
        ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, "default "
                  "min.cleanable.dirty.ratio", min=0, max=1),
        ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, "default "
                  "min.compaction.lag.ms", min=0),
        ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "default "
                  "max.compaction.lag.ms", min=1),
        ConfigDef("log.message.timestamp.type", "string", "CreateTime", "default "
                  "message.timestamp.type", choices=("CreateTime",)),
        ConfigDef("compression.type", "string", "producer", "default compression.type",
                  choices=("producer", "uncompressed", "lz4", "zstd")),
        ConfigDef("message.max.bytes", "int", 1048588, "largest record batch accepted (default "
                  "max.message.bytes)", min=0),
        ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "how often "
                  "high watermarks are checkpointed", min=1),
        ConfigDef("producer.id.expiration.ms", "int", 86400000, "how long a partition keeps an "
                  "idle idempotent producer's state (by its batches' timestamps); after that its "
                  "retries are no longer deduplicated", min=1),
        ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, "how often idle "
                  "producers are expired", min=1),
        ConfigDef("num.recovery.threads.per.data.dir", "int", 1, "accepted for compatibility; "
                  "recovery runs in one thread", min=1),
        ConfigDef("trioka.max.open.files", "int", 512, "trioka: open segment files kept (LRU), "
                  "so tens of thousands of partitions fit under RLIMIT_NOFILE", min=8),
        # Topics
        ConfigDef("num.partitions", "int", 1, "partitions of auto-created topics and of "
                  "CreateTopics asking for -1", min=1),
        ConfigDef("default.replication.factor", "int", 1, "replication factor of topics asking "
                  "for -1", min=1),
        ConfigDef("min.insync.replicas", "int", 1, "default min.insync.replicas", min=1),
        ConfigDef("unclean.leader.election.enable", "boolean", False, "default "
                  "unclean.leader.election.enable"),
        ConfigDef("auto.create.topics.enable", "boolean", True, "create a topic when Metadata "
                  "asks for an unknown one"),
        ConfigDef("delete.topic.enable", "boolean", True, "allow DeleteTopics"),
        # Group coordinator and __consumer_offsets (Kafka's GroupCoordinatorConfig, OffsetConfig)
        ConfigDef("offsets.topic.num.partitions", "int", 50, "partitions of __consumer_offsets "
                  "(fixed once it is created)", min=1, read_only=True),
        ConfigDef("offsets.topic.replication.factor", "int", 3, "replication factor of "
                  "__consumer_offsets; its creation fails until this many brokers are alive",
                  min=1, max=32767, read_only=True),
        ConfigDef("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of "
                  "__consumer_offsets (small, for fast compaction and loading)", min=1,
                  read_only=True),
        ConfigDef("offsets.commit.timeout.ms", "int", 5000, "an OffsetCommit waits this long for "
                  "the commit to be replicated, then REQUEST_TIMED_OUT", min=1),
        ConfigDef("offsets.load.buffer.size", "int", 5242880, "bytes read per step when loading "
                  "an offsets partition", min=1),
        ConfigDef("offset.metadata.max.bytes", "int", 4096, "largest metadata string kept with "
                  "a committed offset", min=0),
        ConfigDef("offsets.retention.minutes", "int", 10080, "offsets of a group that has been "
                  "Empty this long are deleted", min=1),
        ConfigDef("trioka.offsets.retention.ms", "long", -1, "trioka, tests only: when >= 0, "
                  "offsets.retention.minutes in milliseconds (Kafka's minimum of a minute is "
                  "too long for a test)", min=-1, read_only=True),
        ConfigDef("offsets.retention.check.interval.ms", "long", 600000, "how often expired "
                  "offsets are looked for", min=1),
        ConfigDef("group.min.session.timeout.ms", "int", 6000, "smallest session.timeout.ms a "
                  "member may ask for", min=0),
        ConfigDef("group.max.session.timeout.ms", "int", 1800000, "largest session.timeout.ms a "
                  "member may ask for", min=0),
        ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "how long the first rebalance "
                  "of a new group waits for more members", min=0),
        ConfigDef("group.max.size", "int", 2147483647, "most members a group may have", min=1),
        # Network and backpressure
        ConfigDef("socket.request.max.bytes", "int", 104857600, "largest request frame; a "
                  "bigger length prefix closes the connection before the body is read", min=1),
        ConfigDef("queued.max.requests", "int", 500, "requests read from all connections and "
                  "not yet answered; the broker stops reading sockets beyond it", min=1),
        ConfigDef("queued.max.requests.per.connection", "int", 5, "trioka: requests read from "
                  "one connection and not yet answered (pipelining window)", min=1),
        ConfigDef("connections.max.idle.ms", "long", 600000, "close connections idle this long",
                  min=1),
        ConfigDef("fetch.max.bytes", "int", 57671680, "largest Fetch response the broker "
                  "builds", min=1024),
        ConfigDef("request.timeout.ms", "int", 30000, "upper bound of acks=all waits", min=0),
        # Metadata mode and ZooKeeper
        ConfigDef("metadata.mode", "string", "raft", "trioka: where cluster metadata lives: "
                  "raft (Kafka's KRaft mode: combined single-node by default, or a quorum of "
                  "controller processes), zk (ZooKeeper, Kafka's ZK mode) or standalone (legacy "
                  "fallback: one node on a local metadata log, no Raft)",
                  choices=("standalone", "zk", "raft"), read_only=True),
        # Raft mode (KRaft's broker side)
        ConfigDef("controller.quorum.voters", "string", "", "the controller quorum as "
                  "id@host:port[,id@host:port...] (required for process.roles=broker; in "
                  "combined mode empty or this node only)",
                  read_only=True),
        ConfigDef("controller.quorum.fetch.timeout.ms", "int", 2000, "the metadata observer "
                  "looks for another leader after this long without a good fetch answer", min=1,
                  read_only=True),
        ConfigDef("controller.quorum.request.timeout.ms", "int", 2000, "timeout of requests "
                  "to the controllers (metadata fetches, registration, heartbeats)", min=1,
                  read_only=True),
        ConfigDef("controller.quorum.retry.backoff.ms", "int", 20, "backoff after an error "
                  "answer from a controller", min=0, read_only=True),
        ConfigDef("controller.quorum.append.linger.ms", "int", 25, "combined mode: how long "
                  "the controller's proposals wait to be appended to the metadata log together",
                  min=0, read_only=True),
        ConfigDef("metadata.log.max.record.bytes.between.snapshots", "long", 20971520,
                  "the broker snapshots its metadata image (and deletes its metadata log below "
                  "it) after this many bytes of records (raft mode; in combined mode its "
                  "controller does, for both)", min=1, read_only=True),
        ConfigDef("broker.heartbeat.interval.ms", "int", 2000, "time between heartbeats to "
                  "the active controller (raft mode)", min=1, read_only=True),
        ConfigDef("broker.session.timeout.ms", "int", 9000, "a broker not heard from for this "
                  "long is fenced by the controller (raft mode; the controller's value decides: "
                  "in combined mode this one)",
                  min=1, read_only=True),
        ConfigDef("zookeeper.connect", "string", "", "ZooKeeper connection string "
                  "host:port[,host:port...][/chroot] (required when metadata.mode=zk)",
                  read_only=True),
        ConfigDef("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout",
                  min=1, read_only=True),
        ConfigDef("zookeeper.connection.timeout.ms", "int", None, "wait this long for the "
                  "ZooKeeper connection (default: zookeeper.session.timeout.ms)", min=1,
                  read_only=True),
        # Controlled shutdown and leader balance
        ConfigDef("controlled.shutdown.enable", "boolean", True, "on shutdown, ask the "
                  "controller to move leadership away first (ZK mode)", read_only=True),
        ConfigDef("controlled.shutdown.max.retries", "int", 3, "attempts of controlled "
                  "shutdown before shutting down anyway", min=0, read_only=True),
        ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000, "pause between "
                  "controlled shutdown attempts", min=0, read_only=True),
        ConfigDef("auto.leader.rebalance.enable", "boolean", True, "move leadership back to "
                  "preferred replicas periodically", read_only=True),
        ConfigDef("leader.imbalance.check.interval.seconds", "long", 300, "how often the "
                  "controller checks leader balance", min=1, read_only=True),
        ConfigDef("leader.imbalance.per.broker.percentage", "int", 10, "imbalance per broker "
                  "(percent of its partitions not led by it) that triggers a rebalance", min=0,
                  read_only=True),
        # Replication
        ConfigDef("replica.lag.time.max.ms", "long", 30000, "a follower not caught up for this "
                  "long leaves the ISR", min=1, read_only=True),
        ConfigDef("replica.fetch.max.bytes", "int", 1048576, "bytes a follower fetches per "
                  "partition (at least one batch)", min=0, read_only=True),
        ConfigDef("replica.fetch.response.max.bytes", "int", 10485760, "bytes a follower "
                  "fetches per request (at least one batch)", min=0, read_only=True),
        ConfigDef("replica.fetch.wait.max.ms", "int", 500, "longest wait of a follower fetch "
                  "on the leader", min=0, read_only=True),
        ConfigDef("replica.fetch.min.bytes", "int", 1, "bytes a follower fetch waits for",
                  min=1, read_only=True),
        ConfigDef("replica.fetch.backoff.ms", "int", 1000, "pause after a failed follower "
                  "fetch", min=0, read_only=True),
        ConfigDef("replica.socket.timeout.ms", "int", 30000, "timeout of follower fetch "
                  "requests (at least replica.fetch.wait.max.ms)", min=1, read_only=True),
        ConfigDef("num.replica.fetchers", "int", 1, "fetcher tasks per source broker", min=1,
                  read_only=True),
        ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, "incremental fetch "
                  "sessions kept (KIP-227)", min=0, read_only=True),
        # Observability
        ConfigDef("trioka.metrics.port", "int", -1, "trioka: port of the Prometheus /metrics "
                  "endpoint of this process; -1 serves none, 0 picks a free port (logged as "
                  "the 'metrics serving' event)", min=-1, max=65535, read_only=True),
        ConfigDef("trioka.metrics.host", "string", "127.0.0.1", "trioka: address the /metrics "
                  "endpoint binds (empty: all interfaces)", read_only=True),
        # Telemetry shipper (deploy/telemetry; a controller process has the same keys).
        ConfigDef("metrics.interval.ms", "int", 10000, "trioka: how often the process ships a "
                  "metrics snapshot to __trioka_metrics", min=1, read_only=True),
        ConfigDef("trioka.telemetry.enable", "boolean", True, "trioka: ship metrics snapshots "
                  "and log events to __trioka_metrics / __trioka_logs", read_only=True),
        ConfigDef("trioka.telemetry.spool.dir", "string", "", "trioka: where telemetry waits "
                  "while the cluster cannot take it (default: <log.dirs[0]>/telemetry-spool)",
                  read_only=True),
        ConfigDef("trioka.telemetry.spool.max.bytes", "long", 104857600, "trioka: bound of the "
                  "telemetry spool; records beyond it are dropped and counted", min=1,
                  read_only=True),
        ConfigDef("trioka.telemetry.bootstrap.servers", "list", (), "trioka: where telemetry is "
                  "shipped (default: this broker's own listener; a controller: the registered "
                  "brokers)", read_only=True),
        ConfigDef("trioka.telemetry.replication.factor", "int", 3, "trioka: replication factor "
                  "of the telemetry topics (min(this, live brokers))", min=1, read_only=True),
        ConfigDef("trioka.replica.truncate.to.hw.on.become.follower", "boolean", False,
                  "trioka, tests only: truncate to the local high watermark on becoming a "
                  "follower, the pre-KIP-101 behaviour that can lose acknowledged records",
                  read_only=True),
    ],
)  # fmt: skip

# Topic config <- broker config (Kafka's LogConfig synonyms). Retention and roll times have
# fallbacks in several units and are handled in `_topic_value`.
TOPIC_SYNONYMS: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "compression.type": "compression.type",
    "max.message.bytes": "message.max.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

_FALLBACKS: dict[str, tuple[tuple[str, int], ...]] = {
    # (broker key, factor to ms): the first one set wins, as in Kafka.
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MS_PER_MINUTE),
        ("log.retention.hours", _MS_PER_HOUR),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _MS_PER_HOUR)),
}


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
            if protocol != "PLAINTEXT":
                raise ConfigError(
                    f"listener.security.protocol.map: listener {listener.name} uses {protocol}; "
                    "trioka serves PLAINTEXT only"
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
            inter = self.inter_broker_listener_name
            effective = [a.name for a in self.effective_advertised_listeners]
            if inter not in effective:
                raise ConfigError(
                    f"inter.broker.listener.name: {inter} must be one of the advertised "
                    f"listeners {effective}"
                )
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
        out: dict[str, str] = {}
        for entry in self.values["listener.security.protocol.map"]:
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
        out = TOPIC_CONFIGS.defaults()
        for topic_key in TOPIC_CONFIGS.defs:
            value = self._topic_value(topic_key)
            if value is not None:
                out[topic_key] = value
        return out

    def static_topic_defaults(self) -> dict[str, str]:
        """Topic configs whose default this broker's config sets (log.retention.ms ->
        retention.ms, ...), as strings: DescribeConfigs' STATIC_BROKER_CONFIG values."""
        defaults = self.topic_defaults()
        return {
            key: TOPIC_CONFIGS[key].to_string(defaults[key])
            for key, from_broker in self.topic_config_sources().items()
            if from_broker
        }

    def topic_config_sources(self) -> dict[str, bool]:
        """For each topic config: True when a broker key set explicitly decides its default."""
        out = {}
        for topic_key in TOPIC_CONFIGS.defs:
            keys = [k for k, _ in _FALLBACKS.get(topic_key, ())]
            if topic_key in TOPIC_SYNONYMS:
                keys.append(TOPIC_SYNONYMS[topic_key])
            out[topic_key] = any(k in self.explicit for k in keys)
        return out

    def _topic_value(self, topic_key: str) -> Any:
        if topic_key in _FALLBACKS:
            for broker_key, factor in _FALLBACKS[topic_key]:
                value = self.values[broker_key]
                if value is not None:
                    return value if value < 0 else value * factor
            return None
        broker_key = TOPIC_SYNONYMS.get(topic_key)
        if broker_key is None:
            return None
        value = self.values[broker_key]
        return value

    def describe_value(self, key: str) -> str | None:
        """The value of a broker key as DescribeConfigs shows it (null when unset)."""
        value = self[key]
        if value is None:
            return None
        return BROKER_CONFIGS[key].to_string(value)
