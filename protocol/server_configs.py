"""The keys of a server process's config, broker and controller, in one table.

Each key is defined once, as a `ServerConfigDef` (a ConfigDef: Kafka's name, type, default,
doc, bounds) with the process kinds that accept it (`kinds`: broker, controller or both) and,
where a controller process's default differs from a broker's, `controller_default`.
`server_configs(kind)` is one kind's key set: `broker.config.BROKER_CONFIGS` (a broker process,
combined mode included) and `deploy.node.controller_config.CONTROLLER_CONFIGS` (a dedicated
Raft controller process, process.roles=controller).

A controller accepts the keys it acts on: its identity and listeners, the quorum's settings, the
policy keys it decides topics and leadership by (num.partitions, default.replication.factor,
auto.leader.rebalance.enable, ...), the `log.*` keys that set topic config defaults (Kafka's
LogConfig synonyms, `TOPIC_SYNONYMS` and `TOPIC_FALLBACKS` here: `log.retention.ms` ->
`retention.ms`, ...), and every process's /metrics and telemetry keys. The rest (log dirs,
replication, groups, ZooKeeper, ...) are a broker's only.

Pure (no I/O): the broker, the controller logic and deploy/ all read it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from protocol.config_defs import INT_MAX, LONG_MAX, TOPIC_CONFIGS, ConfigDef, ConfigDefs

BROKER = "broker"
CONTROLLER = "controller"
BROKER_ONLY = frozenset({BROKER})
CONTROLLER_ONLY = frozenset({CONTROLLER})
BOTH = frozenset({BROKER, CONTROLLER})

_MS_PER_MINUTE = 60_000
_MS_PER_HOUR = 3_600_000
# Kafka's SecurityProtocol names; its default listener.security.protocol.map maps each to itself.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
AUTHORIZER_STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_ACL = "kafka.security.authorizer.AclAuthorizer"
_DEFAULT_PROTOCOL_MAP = tuple(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


class _BrokersDefault:
    def __repr__(self) -> str:
        return "<the broker's default>"


_BROKERS_DEFAULT: Any = _BrokersDefault()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfigDef(ConfigDef):
    """A server config key: its ConfigDef (`default` is a broker's) and who accepts it."""

    kinds: frozenset[str]
    """The process kinds whose config accepts the key: BROKER_ONLY, CONTROLLER_ONLY or BOTH."""
    controller_default: Any = _BROKERS_DEFAULT
    """A controller process's default, where it differs from a broker's."""

    def for_kind(self, kind: str) -> ConfigDef:
        """The key as `kind`'s config defines it (its own default)."""
        if kind == CONTROLLER and self.controller_default is not _BROKERS_DEFAULT:
            return replace(self, default=self.controller_default)
        return self


TELEMETRY_CLIENT_PREFIX = "trioka.telemetry."
TELEMETRY_CLIENT_KEYS = (
    ("security.protocol", "string"),
    ("ssl.ca.location", "string"),
    ("ssl.certificate.location", "string"),
    ("ssl.key.location", "string"),
    ("ssl.key.password", "password"),
    ("sasl.mechanism", "string"),
    ("sasl.username", "string"),
    ("sasl.password", "password"),
)
"""The telemetry shipper's client keys (deploy.telemetry.settings)."""

SERVER_CONFIGS = ConfigDefs(
    "server",
    [
        # Identity and listeners
        ServerConfigDef("node.id", "int", 1, "this node's id; a controller's must be one of "
                        "controller.quorum.voters (Kafka has no default in KRaft mode; a broker is "
                        "node 1 unless told otherwise, a controller must set it)", min=0,
                        read_only=True, kinds=BOTH, controller_default=-1),
        ServerConfigDef("cluster.id", "string", "", "trioka: the cluster id; a broker writes it to "
                        "meta.properties on first start (empty: the one there, else a new one), a "
                        "controller's quorum checks it in every request (empty: not checked)",
                        read_only=True, kinds=BOTH),
        ServerConfigDef("process.roles", "list", ("broker", "controller"), "roles of this process. "
                        "A broker's (metadata.mode=raft): broker,controller = combined mode, the "
                        "single-node quorum's only voter; broker = a broker of a separate "
                        "controller quorum (the default when controller.quorum.voters names other "
                        "nodes only). A controller process's: controller only",
                        choices=("broker", "controller"), read_only=True, kinds=BOTH,
                        controller_default=("controller",)),
        ServerConfigDef("listeners", "list", ("PLAINTEXT://:9092",), "listeners as "
                        "NAME://host:port; an empty host binds all interfaces, port 0 picks a free "
                        "port", read_only=True, kinds=BOTH,
                        controller_default=("CONTROLLER://:9093",)),
        ServerConfigDef("advertised.listeners", "list", (), "addresses given to clients (default: "
                        "listeners)", read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("inter.broker.listener.name", "string", "PLAINTEXT", "listener brokers use "
                        "between themselves (replica fetchers, controller requests, forwarding); "
                        "must be one of the advertised listeners", read_only=True,
                        kinds=BROKER_ONLY),
        ServerConfigDef("listener.security.protocol.map", "list", _DEFAULT_PROTOCOL_MAP, "listener "
                        "name -> security protocol, as NAME:PROTOCOL; every listener needs an "
                        "entry (trioka serves PLAINTEXT and SSL)", read_only=True, kinds=BOTH),
        # TLS for the listeners mapped to SSL (Kafka's ssl.* keys, PEM files only).
        ServerConfigDef("ssl.keystore.type", "string", "PEM", "format of the keystore: PEM (a "
                        "private key and its certificate chain in one file)", read_only=True,
                        kinds=BOTH, choices=("PEM",)),
        ServerConfigDef("ssl.keystore.location", "string", "", "PEM file with this server's "
                        "private key and certificate chain; required by an SSL listener",
                        read_only=True, kinds=BOTH, per_listener=True),
        ServerConfigDef("ssl.key.password", "password", "", "password of the private key in the "
                        "keystore (empty: not encrypted)", read_only=True, kinds=BOTH, per_listener=True),
        ServerConfigDef("ssl.truststore.type", "string", "PEM", "format of the truststore: PEM",
                        read_only=True, kinds=BOTH, choices=("PEM",)),
        ServerConfigDef("ssl.truststore.location", "string", "", "PEM file of the CA "
                        "certificates that client certificates are checked against (empty: the "
                        "system's)", read_only=True, kinds=BOTH, per_listener=True),
        ServerConfigDef("ssl.endpoint.identification.algorithm", "string", "https", "https: a "
                        "peer's certificate must name the host this node dials (inter-broker "
                        "listener); empty: any name (the chain is still checked)",
                        read_only=True, kinds=BOTH, choices=("https", "")),
        ServerConfigDef("sasl.mechanism.inter.broker.protocol", "string", "PLAIN", "SASL mechanism "
                        "brokers log in with on a SASL inter-broker listener (Kafka's default, "
                        "GSSAPI, is not served)", read_only=True, kinds=BROKER_ONLY,
                        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
        ServerConfigDef("sasl.mechanism.controller.protocol", "string", "PLAIN", "SASL "
                        "mechanism nodes log in with on a SASL controller listener: PLAIN (SCRAM "
                        "credentials live in the metadata log the controllers replicate)",
                        read_only=True, kinds=BOTH, choices=("PLAIN",)),
        ServerConfigDef("ssl.client.auth", "string", "none", "client certificates on SSL "
                        "listeners: none, requested (checked when given) or required (mTLS)",
                        read_only=True, kinds=BOTH, per_listener=True,
                        choices=("none", "requested", "required")),
        # Authorization (Kafka's ACLs; checked only with an authorizer configured).
        ServerConfigDef("authorizer.class.name", "string", "", "the authorizer: empty for none "
                        "(every request allowed), or Kafka's StandardAuthorizer / AclAuthorizer "
                        "class name (both are trioka's ACL authorizer)", read_only=True,
                        kinds=BOTH, choices=("", AUTHORIZER_STANDARD, AUTHORIZER_ACL)),
        ServerConfigDef("super.users", "string", "", "principals allowed everything, separated "
                        "by ';' (User:admin;User:ANONYMOUS)", read_only=True, kinds=BOTH),
        ServerConfigDef("allow.everyone.if.no.acl.found", "boolean", False, "allow a request on a "
                        "resource that no ACL names", read_only=True, kinds=BROKER_ONLY),
        # SASL on the listeners mapped to SASL_PLAINTEXT or SASL_SSL.
        ServerConfigDef("sasl.enabled.mechanisms", "list", ("SCRAM-SHA-256", "SCRAM-SHA-512"),
                        "SASL mechanisms the SASL listeners offer (Kafka's default, GSSAPI, is not "
                        "served); PLAIN needs users in sasl.jaas.config", read_only=True,
                        kinds=BOTH, choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                        per_listener=True),
        ServerConfigDef("sasl.server.max.receive.size", "int", 524288, "largest request a SASL "
                        "listener reads before the client has authenticated", read_only=True,
                        kinds=BOTH, min=1),
        ServerConfigDef("sasl.jaas.config", "password", "", "PlainLoginModule entry whose "
                        'user_<name>="<password>" options are the PLAIN users; Kafka\'s form '
                        "listener.name.<listener>.plain.sasl.jaas.config is taken first",
                        read_only=True, kinds=BOTH, per_listener=True),
        ServerConfigDef("controller.listener.names", "list", (), "listeners of the controller; the "
                        "first is where the voters reach each other (a broker with "
                        "process.roles=broker: the controllers' listener, not one of its own)",
                        read_only=True, kinds=BOTH, controller_default=("CONTROLLER",)),
        ServerConfigDef("broker.rack", "string", "", "rack of this broker (empty: none)",
                        read_only=True, kinds=BROKER_ONLY),
        # Storage
        ServerConfigDef("log.dirs", "list", (), "directories of the partition logs (default: "
                        "log.dir)", read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("log.dir", "string", "/tmp/kafka-logs", "log directory when log.dirs is "
                        "unset", read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("metadata.log.dir", "string", "", "directory of the metadata log and its "
                        "quorum-state file (a broker's default: the first log dir; required for a "
                        "controller)", read_only=True, kinds=BOTH),
        ServerConfigDef("log.segment.bytes", "int", 1073741824, "roll a segment at this size",
                        min=14, max=INT_MAX, kinds=BOTH),
        ServerConfigDef("log.roll.ms", "long", None, "roll a segment after this long (default: "
                        "log.roll.hours)", min=1, kinds=BOTH),
        ServerConfigDef("log.roll.hours", "int", 168, "roll a segment after this many hours",
                        min=1, kinds=BOTH),
        ServerConfigDef("log.retention.ms", "long", None, "keep segments this long, -1 forever "
                        "(default: log.retention.minutes, then log.retention.hours)", min=-1,
                        kinds=BOTH),
        ServerConfigDef("log.retention.minutes", "int", None, "keep segments this many minutes",
                        min=-1, kinds=BOTH),
        ServerConfigDef("log.retention.hours", "int", 168, "keep segments this many hours", min=-1,
                        kinds=BOTH),
        ServerConfigDef("log.retention.bytes", "long", -1, "keep at most this many bytes per "
                        "partition (-1: no limit)", min=-1, kinds=BOTH),
        ServerConfigDef("log.retention.check.interval.ms", "long", 300000, "how often retention "
                        "runs", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("log.index.interval.bytes", "int", 4096, "bytes between offset index "
                        "entries", min=0, kinds=BOTH),
        ServerConfigDef("log.index.size.max.bytes", "int", 10485760, "maximum size of an offset "
                        "index", min=4, kinds=BOTH),
        ServerConfigDef("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many "
                        "records", min=1, kinds=BOTH),
        ServerConfigDef("log.flush.interval.ms", "long", None, "fsync after this long (default: "
                        "never, durability comes from replication)", min=0, kinds=BOTH),
        ServerConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX, "how often the "
                        "flusher checks for logs to fsync", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, "how often "
                        "recovery points are checkpointed", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "how often "
                        "log start offsets are checkpointed", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("log.segment.delete.delay.ms", "long", 60000, "wait before deleting a "
                        "segment file", min=0, kinds=BOTH),
        ServerConfigDef("log.cleanup.policy", "list", ("delete",), "default cleanup.policy",
                        choices=("delete", "compact"), kinds=BOTH),
        ServerConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, "default "
                        "delete.retention.ms", min=0, kinds=BOTH),
        ServerConfigDef("log.cleaner.enable", "boolean", True, "run the log cleaner (compaction of "
                        "cleanup.policy=compact topics, __consumer_offsets among them)",
                        kinds=BROKER_ONLY),
        ServerConfigDef("log.cleaner.threads", "int", 1, "logs cleaned at the same time", min=0,
                        kinds=BROKER_ONLY),
        ServerConfigDef("log.cleaner.backoff.ms", "long", 15000, "sleep between passes of a "
                        "cleaner thread that found nothing to clean", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, "offset-map memory of "
                        "all cleaner threads (24 bytes a key)", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, "default "
                        "min.cleanable.dirty.ratio", min=0, max=1, kinds=BOTH),
        ServerConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, "default "
                        "min.compaction.lag.ms", min=0, kinds=BOTH),
        ServerConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "default "
                        "max.compaction.lag.ms", min=1, kinds=BOTH),
        ServerConfigDef("log.message.timestamp.type", "string", "CreateTime", "default "
                        "message.timestamp.type", choices=("CreateTime",), kinds=BOTH),
        ServerConfigDef("compression.type", "string", "producer", "default compression.type",
                        choices=("producer", "uncompressed", "lz4", "zstd"), kinds=BOTH),
        ServerConfigDef("message.max.bytes", "int", 1048588, "largest record batch accepted "
                        "(default max.message.bytes)", min=0, kinds=BOTH),
        ServerConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "how often "
                        "high watermarks are checkpointed", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("producer.id.expiration.ms", "int", 86400000, "how long a partition keeps "
                        "an idle idempotent producer's state (by its batches' timestamps); after "
                        "that its retries are no longer deduplicated", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, "how often idle "
                        "producers are expired", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("num.recovery.threads.per.data.dir", "int", 1, "accepted for "
                        "compatibility; recovery runs in one thread", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("trioka.max.open.files", "int", 512, "trioka: open segment files kept "
                        "(LRU), so tens of thousands of partitions fit under RLIMIT_NOFILE", min=8,
                        kinds=BROKER_ONLY),
        # Topics
        ServerConfigDef("num.partitions", "int", 1, "partitions of auto-created topics and of "
                        "CreateTopics asking for -1", min=1, kinds=BOTH),
        ServerConfigDef("default.replication.factor", "int", 1, "replication factor of topics "
                        "asking for -1", min=1, kinds=BOTH),
        ServerConfigDef("min.insync.replicas", "int", 1, "default min.insync.replicas", min=1,
                        kinds=BOTH),
        ServerConfigDef("unclean.leader.election.enable", "boolean", False, "default "
                        "unclean.leader.election.enable", kinds=BOTH),
        ServerConfigDef("auto.create.topics.enable", "boolean", True, "create a topic when "
                        "Metadata asks for an unknown one", kinds=BROKER_ONLY),
        ServerConfigDef("delete.topic.enable", "boolean", True, "allow DeleteTopics", kinds=BOTH),
        # Group coordinator and __consumer_offsets (Kafka's GroupCoordinatorConfig, OffsetConfig)
        ServerConfigDef("offsets.topic.num.partitions", "int", 50, "partitions of "
                        "__consumer_offsets (fixed once it is created)", min=1, read_only=True,
                        kinds=BROKER_ONLY),
        ServerConfigDef("offsets.topic.replication.factor", "int", 3, "replication factor of "
                        "__consumer_offsets; its creation fails until this many brokers are alive",
                        min=1, max=32767, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of "
                        "__consumer_offsets (small, for fast compaction and loading)", min=1,
                        read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("offsets.commit.timeout.ms", "int", 5000, "an OffsetCommit waits this long "
                        "for the commit to be replicated, then REQUEST_TIMED_OUT", min=1,
                        kinds=BROKER_ONLY),
        ServerConfigDef("offsets.load.buffer.size", "int", 5242880, "bytes read per step when "
                        "loading an offsets partition", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("offset.metadata.max.bytes", "int", 4096, "largest metadata string kept "
                        "with a committed offset", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("offsets.retention.minutes", "int", 10080, "offsets of a group that has "
                        "been Empty this long are deleted", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("trioka.offsets.retention.ms", "long", -1, "trioka, tests only: when >= 0, "
                        "offsets.retention.minutes in milliseconds (Kafka's minimum of a minute is "
                        "too long for a test)", min=-1, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("offsets.retention.check.interval.ms", "long", 600000, "how often expired "
                        "offsets are looked for", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("group.min.session.timeout.ms", "int", 6000, "smallest session.timeout.ms "
                        "a member may ask for", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("group.max.session.timeout.ms", "int", 1800000, "largest "
                        "session.timeout.ms a member may ask for", min=0, kinds=BROKER_ONLY),
        ServerConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "how long the first "
                        "rebalance of a new group waits for more members", min=0,
                        kinds=BROKER_ONLY),
        ServerConfigDef("group.max.size", "int", 2147483647, "most members a group may have",
                        min=1, kinds=BROKER_ONLY),
        # Network and backpressure
        ServerConfigDef("socket.request.max.bytes", "int", 104857600, "largest request frame; a "
                        "bigger length prefix closes the connection before the body is read",
                        min=1, kinds=BROKER_ONLY),
        ServerConfigDef("queued.max.requests", "int", 500, "requests read from all connections and "
                        "not yet answered; the broker stops reading sockets beyond it", min=1,
                        kinds=BROKER_ONLY),
        ServerConfigDef("queued.max.requests.per.connection", "int", 5, "trioka: requests read "
                        "from one connection and not yet answered (pipelining window)", min=1,
                        kinds=BROKER_ONLY),
        ServerConfigDef("connections.max.idle.ms", "long", 600000, "close connections idle this "
                        "long", min=1, kinds=BROKER_ONLY),
        ServerConfigDef("fetch.max.bytes", "int", 57671680, "largest Fetch response the broker "
                        "builds", min=1024, kinds=BROKER_ONLY),
        ServerConfigDef("request.timeout.ms", "int", 30000, "upper bound of acks=all waits", min=0,
                        kinds=BROKER_ONLY),
        # Metadata mode and ZooKeeper
        ServerConfigDef("metadata.mode", "string", "raft", "trioka: where cluster metadata lives: "
                        "raft (Kafka's KRaft mode: combined single-node by default, or a quorum of "
                        "controller processes), zk (ZooKeeper, Kafka's ZK mode) or standalone "
                        "(legacy fallback: one node on a local metadata log, no Raft)",
                        choices=("standalone", "zk", "raft"), read_only=True, kinds=BROKER_ONLY),
        # Raft mode: the controller quorum (a controller's keys, and the broker side of KRaft)
        ServerConfigDef("controller.quorum.voters", "string", "", "the controller quorum as "
                        "id@host:port[,id@host:port...] (required for a controller and for "
                        "process.roles=broker; in combined mode empty or this node only)",
                        read_only=True, kinds=BOTH),
        ServerConfigDef("controller.quorum.fetch.timeout.ms", "int", 2000, "a voter without a good "
                        "fetch answer for this long starts an election; a broker (the metadata "
                        "observer) looks for another leader", min=1, read_only=True, kinds=BOTH),
        ServerConfigDef("controller.quorum.election.timeout.ms", "int", 1000, "election timeout "
                        "(randomized in [T, 2T))", min=1, kinds=CONTROLLER_ONLY),
        ServerConfigDef("controller.quorum.election.backoff.max.ms", "int", 1000, "maximum backoff "
                        "after a lost election", min=0, kinds=CONTROLLER_ONLY),
        ServerConfigDef("controller.quorum.request.timeout.ms", "int", 2000, "timeout of requests "
                        "to the controllers (between voters; a broker's metadata fetches, "
                        "registration, heartbeats)", min=1, read_only=True, kinds=BOTH),
        ServerConfigDef("controller.quorum.retry.backoff.ms", "int", 20, "backoff after an error "
                        "answer from a controller", min=0, read_only=True, kinds=BOTH),
        ServerConfigDef("controller.quorum.append.linger.ms", "int", 25, "how long the "
                        "controller's proposals wait to be appended to the metadata log together "
                        "(a broker's: in combined mode)", min=0, read_only=True, kinds=BOTH),
        ServerConfigDef("metadata.log.max.record.bytes.between.snapshots", "long", 20971520,
                        "write a metadata snapshot (and delete the metadata log below it) once "
                        "this many bytes of records were applied since the last one (raft mode; in "
                        "combined mode the controller's snapshots serve both)", min=1,
                        read_only=True, kinds=BOTH),
        ServerConfigDef("metadata.max.idle.interval.ms", "int", 500, "the active controller "
                        "appends a NoOpRecord when nothing was written for this long (0: never)",
                        min=0, kinds=CONTROLLER_ONLY),
        ServerConfigDef("broker.heartbeat.interval.ms", "int", 2000, "time between a broker's "
                        "heartbeats to the active controller (raft mode)", min=1, read_only=True,
                        kinds=BOTH),
        ServerConfigDef("broker.session.timeout.ms", "int", 9000, "a broker not heard from for "
                        "this long is fenced by the controller (raft mode; the controller's value "
                        "decides: in combined mode this one)", min=1, read_only=True, kinds=BOTH),
        ServerConfigDef("broker.session.fast.fencing.enable", "boolean", True, "trioka: when the "
                        "connection a broker's heartbeats (raft mode) or the controller's requests "
                        "(zk mode) came on ends, the active controller probes the broker's "
                        "listeners and fences it at once if every one refuses connections twice "
                        "(its process is gone) instead of waiting out its session "
                        "(controller.liveness has the rule)", read_only=True, kinds=BOTH),
        ServerConfigDef("zookeeper.connect", "string", "", "ZooKeeper connection string "
                        "host:port[,host:port...][/chroot] (required when metadata.mode=zk)",
                        read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout",
                        min=1, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("zookeeper.connection.timeout.ms", "int", None, "wait this long for the "
                        "ZooKeeper connection (default: zookeeper.session.timeout.ms)", min=1,
                        read_only=True, kinds=BROKER_ONLY),
        # Controlled shutdown and leader balance
        ServerConfigDef("controlled.shutdown.enable", "boolean", True, "on shutdown, ask the "
                        "controller to move leadership away first (ZK mode)", read_only=True,
                        kinds=BROKER_ONLY),
        ServerConfigDef("controlled.shutdown.max.retries", "int", 3, "attempts of controlled "
                        "shutdown before shutting down anyway", min=0, read_only=True,
                        kinds=BROKER_ONLY),
        ServerConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000, "pause between "
                        "controlled shutdown attempts", min=0, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("auto.leader.rebalance.enable", "boolean", True, "move leadership back to "
                        "preferred replicas periodically", read_only=True, kinds=BOTH),
        ServerConfigDef("leader.imbalance.check.interval.seconds", "long", 300, "how often the "
                        "controller checks leader balance", min=1, read_only=True, kinds=BOTH),
        ServerConfigDef("leader.imbalance.per.broker.percentage", "int", 10, "imbalance per broker "
                        "(percent of its partitions not led by it) that triggers a rebalance",
                        min=0, read_only=True, kinds=BOTH),
        # Replication
        ServerConfigDef("replica.lag.time.max.ms", "long", 30000, "a follower not caught up for "
                        "this long leaves the ISR", min=1, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("replica.fetch.max.bytes", "int", 1048576, "bytes a follower fetches per "
                        "partition (at least one batch)", min=0, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("replica.fetch.response.max.bytes", "int", 10485760, "bytes a follower "
                        "fetches per request (at least one batch)", min=0, read_only=True,
                        kinds=BROKER_ONLY),
        ServerConfigDef("replica.fetch.wait.max.ms", "int", 500, "longest wait of a follower fetch "
                        "on the leader", min=0, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("replica.fetch.min.bytes", "int", 1, "bytes a follower fetch waits for",
                        min=1, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("replica.fetch.backoff.ms", "int", 1000, "pause after a failed follower "
                        "fetch", min=0, read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("replica.socket.timeout.ms", "int", 30000, "timeout of follower fetch "
                        "requests (at least replica.fetch.wait.max.ms)", min=1, read_only=True,
                        kinds=BROKER_ONLY),
        ServerConfigDef("num.replica.fetchers", "int", 1, "fetcher tasks per source broker", min=1,
                        read_only=True, kinds=BROKER_ONLY),
        ServerConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, "incremental "
                        "fetch sessions kept (KIP-227)", min=0, read_only=True, kinds=BROKER_ONLY),
        # Observability
        ServerConfigDef("trioka.metrics.port", "int", -1, "trioka: port of the Prometheus /metrics "
                        "endpoint of this process; -1 serves none, 0 picks a free port (logged as "
                        "the 'metrics serving' event)", min=-1, max=65535, read_only=True,
                        kinds=BOTH),
        ServerConfigDef("trioka.metrics.host", "string", "127.0.0.1", "trioka: address the "
                        "/metrics endpoint binds (empty: all interfaces)", read_only=True,
                        kinds=BOTH),
        # Telemetry shipper (deploy/telemetry; a controller process has the same keys).
        ServerConfigDef("metrics.interval.ms", "int", 10000, "trioka: how often the process ships "
                        "a metrics snapshot to __trioka_metrics", min=1, read_only=True,
                        kinds=BOTH),
        ServerConfigDef("trioka.telemetry.enable", "boolean", True, "trioka: ship metrics "
                        "snapshots and log events to __trioka_metrics / __trioka_logs",
                        read_only=True, kinds=BOTH),
        ServerConfigDef("trioka.telemetry.spool.dir", "string", "", "trioka: where telemetry waits "
                        "while the cluster cannot take it (default: <log.dirs[0]>/telemetry-spool)",
                        read_only=True, kinds=BOTH),
        ServerConfigDef("trioka.telemetry.spool.max.bytes", "long", 104857600, "trioka: bound of "
                        "the telemetry spool; records beyond it are dropped and counted", min=1,
                        read_only=True, kinds=BOTH),
        ServerConfigDef("trioka.telemetry.bootstrap.servers", "list", (), "trioka: where telemetry "
                        "is shipped (default: this broker's own listener; a controller: the "
                        "registered brokers)", read_only=True, kinds=BOTH),
        ServerConfigDef("trioka.telemetry.replication.factor", "int", 3, "trioka: replication "
                        "factor of the telemetry topics (min(this, live brokers))", min=1,
                        read_only=True, kinds=BOTH),
        # The shipper's client security, Kafka's client keys under the prefix (as Cruise
        # Control's metrics reporter takes `cruise.control.metrics.reporter.<client key>`).
        *(ServerConfigDef(f"{TELEMETRY_CLIENT_PREFIX}{key}", kind, "", "trioka: the telemetry "
                          f"client's {key} (Kafka's client setting; empty: the client's default)",
                          read_only=True, kinds=BOTH)
          for key, kind in TELEMETRY_CLIENT_KEYS),
        ServerConfigDef("trioka.replica.truncate.to.hw.on.become.follower", "boolean", False,
                        "trioka, tests only: truncate to the local high watermark on becoming a "
                        "follower, the pre-KIP-101 behaviour that can lose acknowledged records",
                        read_only=True, kinds=BROKER_ONLY),
    ],
)  # fmt: skip


def server_configs(kind: str) -> ConfigDefs:
    """The keys a `kind` (BROKER or CONTROLLER) process accepts, with its defaults; an unknown
    key is refused as an "unknown <kind> config"."""
    if kind not in BOTH:
        raise ValueError(f"no such process kind {kind!r}")
    return ConfigDefs(
        kind, [d.for_kind(kind) for d in SERVER_CONFIGS.defs.values() if kind in d.kinds]
    )


# Topic config <- server config (Kafka's LogConfig synonyms). Retention and roll times have
# fallbacks in several units (TOPIC_FALLBACKS).
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

TOPIC_FALLBACKS: dict[str, tuple[tuple[str, int], ...]] = {
    # (server key, factor to ms): the first one set wins, as in Kafka.
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MS_PER_MINUTE),
        ("log.retention.hours", _MS_PER_HOUR),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _MS_PER_HOUR)),
}


def topic_default_keys(topic_key: str) -> tuple[str, ...]:
    """The server keys that set topic config `topic_key`'s default (log.retention.ms,
    log.retention.minutes, log.retention.hours for retention.ms), the first set one winning."""
    if topic_key in TOPIC_FALLBACKS:
        return tuple(key for key, _ in TOPIC_FALLBACKS[topic_key])
    synonym = TOPIC_SYNONYMS.get(topic_key)
    return (synonym,) if synonym is not None else ()


def topic_defaults(values: Mapping[str, Any]) -> dict[str, Any]:
    """TOPIC_CONFIGS defaults overlaid with a resolved server config's `log.*` values (typed)."""
    out = TOPIC_CONFIGS.defaults()
    for topic_key in TOPIC_CONFIGS.defs:
        value = _topic_value(values, topic_key)
        if value is not None:
            out[topic_key] = value
    return out


def topic_config_sources(explicit: Collection[str]) -> dict[str, bool]:
    """For each topic config: True when a server key set explicitly decides its default."""
    return {
        topic_key: any(key in explicit for key in topic_default_keys(topic_key))
        for topic_key in TOPIC_CONFIGS.defs
    }


def static_topic_defaults(values: Mapping[str, Any], explicit: Collection[str]) -> dict[str, str]:
    """Topic configs whose default the explicitly set server keys decide (log.retention.hours =
    1 -> retention.ms = 3600000), as strings: DescribeConfigs' STATIC_BROKER_CONFIG values."""
    defaults = topic_defaults(values)
    return {
        key: TOPIC_CONFIGS[key].to_string(defaults[key])
        for key, from_server in topic_config_sources(explicit).items()
        if from_server
    }


def _topic_value(values: Mapping[str, Any], topic_key: str) -> Any:
    if topic_key in TOPIC_FALLBACKS:
        for server_key, factor in TOPIC_FALLBACKS[topic_key]:
            value = values[server_key]
            if value is not None:
                return value if value < 0 else value * factor
        return None
    server_key = TOPIC_SYNONYMS.get(topic_key)
    return None if server_key is None else values[server_key]


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """broker.heartbeat.interval.ms for a broker.session.timeout.ms: Kafka's 2 s heartbeat (the
    key's default), shorter for short sessions: at least three beats per session, so one late
    beat does not fence a live broker; never below 100 ms."""
    default = int(SERVER_CONFIGS["broker.heartbeat.interval.ms"].default)
    return max(100, min(default, session_timeout_ms // 3))
