"""Client configs with Kafka's names, defaults and checks (ProducerConfig, ConsumerConfig, ...).

Configs come as a mapping with Kafka's dotted names and/or as keyword arguments with underscores
(`linger_ms=5` is `linger.ms`); values may be strings (from the CLI) or native values.
Unknown keys and bad values raise protocol.config_defs.ConfigError naming the key.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from client.sasl import SASL_SETTINGS
from client.tls import TLS_SETTINGS
from protocol.config_defs import INT_MAX, ConfigDef, ConfigDefs, ConfigError

_COMMON = [
    ConfigDef("bootstrap.servers", "list", ("localhost:9092",),
              "host:port pairs used to find the cluster"),
    ConfigDef("client.id", "string", "", "name sent with every request, for the broker's logs "
              "(empty: Kafka's producer-N / consumer-GROUP-N)"),
    ConfigDef("request.timeout.ms", "int", 30000, "how long to wait for a response", min=1),
    ConfigDef("socket.connection.setup.timeout.ms", "long", 10000,
              "how long to wait for a TCP connection", min=1),
    ConfigDef("retry.backoff.ms", "long", 100, "first wait before retrying a failed request",
              min=0),
    ConfigDef("retry.backoff.max.ms", "long", 1000, "longest wait between retries", min=0),
    ConfigDef("reconnect.backoff.ms", "long", 50,
              "first wait before connecting again to a broker that refused", min=0),
    ConfigDef("reconnect.backoff.max.ms", "long", 1000,
              "longest wait between connects to a broker that keeps refusing", min=0),
    ConfigDef("metadata.max.age.ms", "long", 300000,
              "refresh metadata at least this often", min=0),
    ConfigDef("max.in.flight.requests.per.connection", "int", 5,
              "unanswered requests allowed per connection", min=1),
    ConfigDef("default.api.timeout.ms", "int", 60000,
              "deadline of blocking calls that have no other timeout", min=0),
    *TLS_SETTINGS,
    *SASL_SETTINGS,
]  # fmt: skip

PRODUCER_CONFIGS = ConfigDefs(
    "producer",
    [
        *_COMMON,
        ConfigDef("acks", "string", "all", "0: no answer; 1: the leader has it; all: the ISR",
                  choices=("all", "-1", "0", "1")),
        ConfigDef("batch.size", "int", 16384, "bytes per partition batch", min=0),
        ConfigDef("linger.ms", "long", 5, "wait this long for a batch to fill", min=0),
        ConfigDef("buffer.memory", "long", 33554432, "bytes of records waiting to be sent",
                  min=0),
        ConfigDef("max.block.ms", "long", 60000,
                  "how long send() may block on metadata or buffer.memory", min=0),
        ConfigDef("compression.type", "string", "none", "batch compression",
                  choices=("none", "lz4", "zstd")),
        ConfigDef("retries", "int", INT_MAX, "retries of a failed batch", min=0),
        ConfigDef("delivery.timeout.ms", "int", 120000,
                  "upper bound on the time to report success or failure of a send", min=0),
        ConfigDef("max.request.size", "int", 1048576, "largest Produce request", min=0),
        ConfigDef("partitioner.ignore.keys", "boolean", False,
                  "use the sticky partitioner even for keyed records"),
        ConfigDef("partitioner.adaptive.partitioning.enable", "boolean", True,
                  "the sticky partitioner favours partitions with shorter queues"),
        ConfigDef("enable.idempotence", "boolean", True,
                  "producer id + per-partition sequences: retries write no duplicates (needs "
                  "acks=all, retries > 0, max.in.flight.requests.per.connection <= 5)"),
    ],
)  # fmt: skip

CONSUMER_CONFIGS = ConfigDefs(
    "consumer",
    [
        *_COMMON,
        ConfigDef("group.id", "string", "",
                  "consumer group; needed by subscribe() and commits (empty: no group)"),
        ConfigDef("enable.auto.commit", "boolean", True,
                  "commit the positions every auto.commit.interval.ms, before a rebalance and "
                  "on close (only with a group.id)"),
        ConfigDef("auto.commit.interval.ms", "int", 5000, "how often positions are committed",
                  min=0),
        ConfigDef("session.timeout.ms", "int", 45000,
                  "the coordinator removes a member it has not heard from for this long", min=1),
        ConfigDef("heartbeat.interval.ms", "int", 3000,
                  "how often a member tells the coordinator it is alive", min=1),
        ConfigDef("max.poll.interval.ms", "int", 300000,
                  "a member that does not call poll() for this long leaves the group", min=1),
        ConfigDef("partition.assignment.strategy", "list", ("range",),
                  "assignors in preference order: range, roundrobin"),
        ConfigDef("auto.offset.reset", "string", "latest",
                  "where to start without a valid position", choices=("latest", "earliest", "none")),
        ConfigDef("fetch.min.bytes", "int", 1, "bytes a fetch waits for", min=0),
        ConfigDef("fetch.max.wait.ms", "int", 500, "longest a fetch waits for fetch.min.bytes",
                  min=0),
        ConfigDef("fetch.max.bytes", "int", 52428800, "bytes per fetch response", min=0),
        ConfigDef("max.partition.fetch.bytes", "int", 1048576, "bytes per partition per fetch",
                  min=0),
        ConfigDef("max.poll.records", "int", 500, "records returned by one poll()", min=1),
        ConfigDef("check.crcs", "boolean", True, "verify the CRC of fetched batches"),
        ConfigDef("allow.auto.create.topics", "boolean", True,
                  "let Metadata requests create unknown topics (if the broker allows it)"),
        ConfigDef("isolation.level", "string", "read_uncommitted", "transactions do not exist yet",
                  choices=("read_uncommitted", "read_committed")),
    ],
)  # fmt: skip

ADMIN_CONFIGS = ConfigDefs("admin", _COMMON)


def resolve(
    defs: ConfigDefs, config: Mapping[str, Any] | None, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """Defaults overlaid with `config` and keyword `overrides` (underscores -> dots)."""
    merged: dict[str, Any] = dict(config or {})
    for key, value in overrides.items():
        merged[key.replace("_", ".")] = value
    values = defs.resolve(merged)
    if not values["bootstrap.servers"]:
        raise ConfigError("bootstrap.servers: at least one host:port is needed")
    for server in values["bootstrap.servers"]:
        parse_host_port(server)
    if values["retry.backoff.max.ms"] < values["retry.backoff.ms"]:
        values["retry.backoff.max.ms"] = values["retry.backoff.ms"]
    if values["reconnect.backoff.max.ms"] < values["reconnect.backoff.ms"]:
        values["reconnect.backoff.max.ms"] = values["reconnect.backoff.ms"]
    return values


# Kafka's default client ids (ProducerConfig / ConsumerConfig): per-process sequences, so the
# broker's logs and `trioka group describe` tell the clients of a process apart.
_PRODUCER_IDS = itertools.count(1)
_CONSUMER_IDS = itertools.count(1)

MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
"""The broker keeps the last five batches per producer and partition for duplicate checks."""


def producer_config(config: Mapping[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    values = resolve(PRODUCER_CONFIGS, config, overrides)
    delivery = values["delivery.timeout.ms"]
    floor = values["linger.ms"] + values["request.timeout.ms"]
    if delivery < floor:
        # Kafka refuses this combination too: a batch could expire before its first attempt.
        raise ConfigError(
            f"delivery.timeout.ms: {delivery} must be at least linger.ms + request.timeout.ms "
            f"({floor})"
        )
    values["acks"] = -1 if values["acks"] in ("all", "-1") else int(values["acks"])
    if not values["client.id"]:
        values["client.id"] = f"producer-{next(_PRODUCER_IDS)}"
    if values["enable.idempotence"]:
        explicit = "enable.idempotence" in (config or {}) or any(
            k.replace("_", ".") == "enable.idempotence" for k in overrides
        )
        values["enable.idempotence"] = _idempotence_allowed(values, explicit=explicit)
    return values


def _idempotence_allowed(values: Mapping[str, Any], *, explicit: bool) -> bool:
    """Kafka 3's rule: a conflicting config is an error when the user asked for idempotence,
    and quietly turns it off when idempotence was only the default."""
    conflicts = []
    if values["retries"] == 0:
        conflicts.append("retries to non-zero")
    if values["acks"] != -1:
        conflicts.append("acks to all")
    if values["max.in.flight.requests.per.connection"] > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(
            f"max.in.flight.requests.per.connection to at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE}"
        )
    if not conflicts:
        return True
    if explicit:
        raise ConfigError(
            f"enable.idempotence: must set {' and '.join(conflicts)} to use the idempotent "
            "producer (otherwise retries may write duplicates)"
        )
    return False


def consumer_config(config: Mapping[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    values = resolve(CONSUMER_CONFIGS, config, overrides)
    strategies = tuple(s.strip() for s in values["partition.assignment.strategy"])
    for name in strategies:
        if name not in _ASSIGNOR_NAMES:
            raise ConfigError(
                f"partition.assignment.strategy: unknown assignor {name!r} "
                f"(known: {', '.join(_ASSIGNOR_NAMES)})"
            )
    if not strategies:
        raise ConfigError("partition.assignment.strategy: name at least one assignor")
    values["partition.assignment.strategy"] = strategies
    if not values["client.id"]:
        group = values["group.id"]
        n = next(_CONSUMER_IDS)
        values["client.id"] = f"consumer-{group}-{n}" if group else f"consumer-{n}"
    if values["heartbeat.interval.ms"] >= values["session.timeout.ms"]:
        # Kafka's Heartbeat refuses this too: the session would expire between heartbeats
        raise ConfigError(
            f"heartbeat.interval.ms: {values['heartbeat.interval.ms']} must be lower than "
            f"session.timeout.ms ({values['session.timeout.ms']})"
        )
    return values


_ASSIGNOR_NAMES = ("range", "roundrobin")


def admin_config(config: Mapping[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    return resolve(ADMIN_CONFIGS, config, overrides)


def parse_host_port(server: str) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`) -> (host, port); ConfigError naming the bad entry."""
    host, sep, port = server.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bootstrap.servers: {server!r} is not host:port")
    return host, int(port)


__all__ = [
    "ADMIN_CONFIGS",
    "CONSUMER_CONFIGS",
    "MAX_IN_FLIGHT_FOR_IDEMPOTENCE",
    "PRODUCER_CONFIGS",
    "admin_config",
    "consumer_config",
    "parse_host_port",
    "producer_config",
]
