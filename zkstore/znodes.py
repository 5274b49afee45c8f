"""Kafka's ZooKeeper layout: one class per znode, with its path and the JSON Kafka writes there.

Paths, field names, versions and value types follow Kafka's kafka.zk.ZkData (3.x): timestamps,
producer-id block bounds and the cluster-id version are JSON strings there, and so they are
here. JSON is written compactly (Jackson's form); key order is not significant to any reader.
`decode` raises ZNodeDecodeError naming the znode and what is wrong with its data.

Pure: no kazoo, no I/O. The ZooKeeper stat that goes with some data (the partition state's
version is the partition epoch, a broker znode's czxid the broker epoch) is passed in by the
caller.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar
from urllib.parse import unquote_plus

from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import TriokaError
from protocol.metadata.records import BrokerEndpoint, LeaderRecoveryState
from protocol.scram import SCRAM_MECHANISMS, CredentialFormatError, ScramCredential

# Kafka's SecurityProtocol ids and names.
SECURITY_PROTOCOLS: dict[int, str] = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS: dict[str, int] = {name: id_ for id_, name in SECURITY_PROTOCOLS.items()}

PRODUCER_ID_BLOCK_SIZE = 1000
"""Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE."""
INITIAL_CONTROLLER_EPOCH = 0
"""Kafka's KafkaController.InitialControllerEpoch (the first controller gets epoch 1)."""
DEFAULT_CONFIG_ENTITY = "<default>"
"""Kafka's ZooKeeper name of the cluster-wide default entity (ConfigEntityName.Default)."""


class ZNodeDecodeError(TriokaError):
    """A znode holds data this node cannot read; says which znode and why."""


def to_json(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _parse(path: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise ZNodeDecodeError(f"{path} has no data")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZNodeDecodeError(f"{path} does not hold JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ZNodeDecodeError(f"{path} holds {type(value).__name__}, expected a JSON object")
    return value


def _field(path: str, obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in obj:
        raise ZNodeDecodeError(f"{path}: field {name!r} is missing")
    value = obj[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ZNodeDecodeError(f"{path}: field {name!r} is {value!r}, not of the expected type")
    return value


def _int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZNodeDecodeError(f"{path}: {what} must be a list of broker ids, got {value!r}")
    return tuple(value)


def _int_str(path: str, obj: Mapping[str, Any], name: str) -> int:
    raw = _field(path, obj, name, (str, int))
    try:
        return int(raw)
    except ValueError:
        raise ZNodeDecodeError(f"{path}: field {name!r} is {raw!r}, not an integer") from None


# -- cluster, controller -------------------------------------------------------------------


class ClusterIdZNode:
    """/cluster/id: {"version":"1","id":"<cluster id>"} (the version is a string in Kafka)."""

    PATH: ClassVar[str] = "/cluster/id"

    @staticmethod
    def path() -> str:
        return ClusterIdZNode.PATH

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return to_json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes | None) -> str:
        return str(_field(ClusterIdZNode.PATH, _parse(ClusterIdZNode.PATH, data), "id", str))


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    broker_id: int
    timestamp_ms: int = -1
    kraft_controller_epoch: int = -1


class ControllerZNode:
    """/controller (ephemeral): {"version":2,"brokerid":1,"timestamp":"<ms>",
    "kraftControllerEpoch":-1}."""

    PATH: ClassVar[str] = "/controller"

    @staticmethod
    def path() -> str:
        return ControllerZNode.PATH

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
        return to_json(
            {
                "version": 2,
                "brokerid": broker_id,
                "timestamp": str(timestamp_ms),
                "kraftControllerEpoch": kraft_controller_epoch,
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> ControllerInfo:
        path = ControllerZNode.PATH
        obj = _parse(path, data)
        timestamp = _int_str(path, obj, "timestamp") if "timestamp" in obj else -1
        kraft = obj.get("kraftControllerEpoch", -1)
        if not isinstance(kraft, int):
            raise ZNodeDecodeError(f"{path}: kraftControllerEpoch is {kraft!r}, not an integer")
        return ControllerInfo(_field(path, obj, "brokerid", int), timestamp, kraft)


class ControllerEpochZNode:
    """/controller_epoch: the epoch as a decimal string (not JSON)."""

    PATH: ClassVar[str] = "/controller_epoch"

    @staticmethod
    def path() -> str:
        return ControllerEpochZNode.PATH

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes | None) -> int:
        try:
            return int((data or b"").decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise ZNodeDecodeError(
                f"{ControllerEpochZNode.PATH} holds {data!r}, not an integer epoch"
            ) from None


# -- brokers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What a broker registers: Kafka's BrokerInfo (version 5 JSON)."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def endpoint_connection_string(endpoint: BrokerEndpoint) -> str:
    """Kafka's EndPoint.connectionString: LISTENER://host:port, an IPv6 host in brackets."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.name}://{host}:{endpoint.port}"


def parse_endpoint(path: str, text: str, protocol_map: Mapping[str, str]) -> BrokerEndpoint:
    name, sep, hostport = text.partition("://")
    host, _, port_text = hostport.rpartition(":")
    if not sep or not name or not port_text:
        raise ZNodeDecodeError(f"{path}: endpoint {text!r} is not LISTENER://host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ZNodeDecodeError(f"{path}: endpoint {text!r} has a bad port") from None
    protocol = protocol_map.get(name, name if name in SECURITY_PROTOCOL_IDS else "PLAINTEXT")
    if protocol not in SECURITY_PROTOCOL_IDS:
        raise ZNodeDecodeError(f"{path}: unknown security protocol {protocol!r} for {name}")
    return BrokerEndpoint(
        name=name, host=host, port=port, security_protocol=SECURITY_PROTOCOL_IDS[protocol]
    )


class BrokerIdsZNode:
    PATH: ClassVar[str] = "/brokers/ids"

    @staticmethod
    def path() -> str:
        return BrokerIdsZNode.PATH


class BrokerIdZNode:
    """/brokers/ids/<id> (ephemeral), version 5 JSON: top-level host/port of the first
    PLAINTEXT endpoint (null/-1 if none), endpoints, listener_security_protocol_map, rack (only
    when set), jmx_port, timestamp (string), features. Its czxid is the broker epoch."""

    VERSION: ClassVar[int] = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.PATH}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        plaintext = next((e for e in info.endpoints if e.security_protocol == 0), None)
        obj: dict[str, Any] = {
            "version": BrokerIdZNode.VERSION,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [endpoint_connection_string(e) for e in info.endpoints],
            "jmx_port": info.jmx_port,
            "timestamp": str(info.timestamp_ms),
        }
        if info.rack is not None:
            obj["rack"] = info.rack
        obj["listener_security_protocol_map"] = {
            e.name: SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT") for e in info.endpoints
        }
        obj["features"] = {k: dict(v) for k, v in info.features.items()}
        return to_json(obj)

    @staticmethod
    def decode(broker_id: int, data: bytes | None) -> BrokerInfo:
        path = BrokerIdZNode.path(broker_id)
        obj = _parse(path, data)
        version = _field(path, obj, "version", int)
        if version < 1:
            raise ZNodeDecodeError(f"{path}: unsupported broker registration version {version}")
        jmx_port = obj.get("jmx_port", -1)
        timestamp = _int_str(path, obj, "timestamp") if "timestamp" in obj else -1
        if version == 1:
            endpoints: tuple[BrokerEndpoint, ...] = (
                BrokerEndpoint(
                    name="PLAINTEXT",
                    host=_field(path, obj, "host", str),
                    port=_field(path, obj, "port", int),
                ),
            )
        else:
            protocol_map = obj.get("listener_security_protocol_map") or {}
            if not isinstance(protocol_map, dict):
                raise ZNodeDecodeError(f"{path}: listener_security_protocol_map is not an object")
            raw = _field(path, obj, "endpoints", list)
            endpoints = tuple(parse_endpoint(path, str(e), protocol_map) for e in raw)
        rack = obj.get("rack")
        features = obj.get("features") or {}
        return BrokerInfo(
            broker_id=broker_id,
            endpoints=endpoints,
            rack=rack if isinstance(rack, str) else None,
            jmx_port=jmx_port if isinstance(jmx_port, int) else -1,
            timestamp_ms=timestamp,
            features=features if isinstance(features, dict) else {},
        )


# -- topics and partitions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """/brokers/topics/<t>: the topic id and each partition's replica assignment."""

    topic_id: str | None
    partitions: Mapping[int, ReplicaAssignment]


class TopicsZNode:
    PATH: ClassVar[str] = "/brokers/topics"

    @staticmethod
    def path() -> str:
        return TopicsZNode.PATH


class TopicZNode:
    """/brokers/topics/<t>: {"version":3,"topic_id":"...","partitions":{"0":[1,2,3]},
    "adding_replicas":{},"removing_replicas":{}} (adding/removing list only partitions with
    some)."""

    VERSION: ClassVar[int] = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode(topic_id: str | None, partitions: Mapping[int, ReplicaAssignment]) -> bytes:
        ordered = sorted(partitions.items())
        obj: dict[str, Any] = {
            "version": TopicZNode.VERSION,
            "partitions": {str(p): list(a.replicas) for p, a in ordered},
            "adding_replicas": {
                str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas
            },
            "removing_replicas": {
                str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas
            },
        }
        if topic_id is not None:
            obj["topic_id"] = topic_id
        return to_json(obj)

    @staticmethod
    def decode(topic: str, data: bytes | None) -> TopicAssignment:
        path = TopicZNode.path(topic)
        obj = _parse(path, data)
        topic_id = obj.get("topic_id")
        if topic_id is not None and not isinstance(topic_id, str):
            raise ZNodeDecodeError(f"{path}: topic_id is {topic_id!r}, not a string")
        maps: dict[str, dict[str, Any]] = {}
        for key in ("partitions", "adding_replicas", "removing_replicas"):
            value = obj.get(key) or {}
            if not isinstance(value, dict):
                raise ZNodeDecodeError(f"{path}: {key} is not an object")
            maps[key] = value
        partitions: dict[int, ReplicaAssignment] = {}
        for key, replicas in maps["partitions"].items():
            try:
                partition = int(key)
            except ValueError:
                raise ZNodeDecodeError(f"{path}: partition {key!r} is not a number") from None
            partitions[partition] = ReplicaAssignment(
                _int_list(path, replicas, f"partition {key} replicas"),
                _int_list(path, maps["adding_replicas"].get(key, []), f"adding_replicas {key}"),
                _int_list(path, maps["removing_replicas"].get(key, []), f"removing_replicas {key}"),
            )
        return TopicAssignment(topic_id, partitions)


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A partition state znode: leader, its epoch, the ISR, who wrote it, recovery state.
    `zk_version` (the znode's version, i.e. the partition epoch) comes from the stat."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = int(LeaderRecoveryState.RECOVERED)
    zk_version: int = 0


class TopicPartitionStateZNode:
    """/brokers/topics/<t>/partitions/<p>/state: {"controller_epoch":1,"leader":1,"version":1,
    "leader_epoch":0,"isr":[1,2,3]}, plus "leader_recovery_state" only when not RECOVERED
    (Kafka omits it then). The znode's version is the partition epoch."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        controller_epoch: int,
        leader_recovery_state: int = int(LeaderRecoveryState.RECOVERED),
    ) -> bytes:
        obj: dict[str, Any] = {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": list(isr),
        }
        if leader_recovery_state != LeaderRecoveryState.RECOVERED:
            obj["leader_recovery_state"] = int(leader_recovery_state)
        return to_json(obj)

    @staticmethod
    def decode(
        topic: str, partition: int, data: bytes | None, zk_version: int = 0
    ) -> LeaderIsrAndControllerEpoch:
        path = TopicPartitionStateZNode.path(topic, partition)
        obj = _parse(path, data)
        recovery = obj.get("leader_recovery_state", int(LeaderRecoveryState.RECOVERED))
        if recovery not in (0, 1):
            raise ZNodeDecodeError(f"{path}: unknown leader_recovery_state {recovery!r}")
        return LeaderIsrAndControllerEpoch(
            leader=_field(path, obj, "leader", int),
            leader_epoch=_field(path, obj, "leader_epoch", int),
            isr=_int_list(path, _field(path, obj, "isr", list), "isr"),
            controller_epoch=_field(path, obj, "controller_epoch", int),
            leader_recovery_state=recovery,
            zk_version=zk_version,
        )


# -- admin -----------------------------------------------------------------------------------


class DeleteTopicsZNode:
    """/admin/delete_topics: one child per topic waiting for deletion."""

    PATH: ClassVar[str] = "/admin/delete_topics"

    @staticmethod
    def path() -> str:
        return DeleteTopicsZNode.PATH


class DeleteTopicZNode:
    """/admin/delete_topics/<t>: no data; its existence asks for the topic's deletion."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode() -> bytes:
        return b""


class ReassignPartitionsZNode:
    """/admin/reassign_partitions (legacy, before KIP-455):
    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}."""

    PATH: ClassVar[str] = "/admin/reassign_partitions"

    @staticmethod
    def path() -> str:
        return ReassignPartitionsZNode.PATH

    @staticmethod
    def encode(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
        return to_json(
            {
                "version": 1,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": list(r)}
                    for (t, p), r in sorted(reassignment.items())
                ],
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
        path = ReassignPartitionsZNode.PATH
        obj = _parse(path, data)
        out: dict[tuple[str, int], tuple[int, ...]] = {}
        for entry in _field(path, obj, "partitions", list):
            if not isinstance(entry, dict):
                raise ZNodeDecodeError(f"{path}: partition entry {entry!r} is not an object")
            topic = _field(path, entry, "topic", str)
            partition = _field(path, entry, "partition", int)
            out[(topic, partition)] = _int_list(path, entry.get("replicas"), "replicas")
        return out


class IsrChangeNotificationZNode:
    """/isr_change_notification (legacy, before AlterPartition; kept for the layout)."""

    PATH: ClassVar[str] = "/isr_change_notification"
    SEQUENCE_PREFIX: ClassVar[str] = "isr_change_"

    @staticmethod
    def path() -> str:
        return IsrChangeNotificationZNode.PATH

    @staticmethod
    def create_path() -> str:
        return f"{IsrChangeNotificationZNode.PATH}/{IsrChangeNotificationZNode.SEQUENCE_PREFIX}"

    @staticmethod
    def encode(partitions: Sequence[tuple[str, int]]) -> bytes:
        return to_json(
            {
                "version": 1,
                "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)],
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> set[tuple[str, int]]:
        path = IsrChangeNotificationZNode.PATH
        obj = _parse(path, data)
        return {
            (_field(path, e, "topic", str), _field(path, e, "partition", int))
            for e in _field(path, obj, "partitions", list)
        }


# -- configs -----------------------------------------------------------------------------------


class ConfigEntityZNode:
    """/config/<entity type>/<name>: {"version":1,"config":{"key":"value"}}. Entity types are
    Kafka's ConfigType names ("topics", "brokers"); the broker default is "<default>"."""

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"/config/{entity_type}/{entity_name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return to_json({"version": 1, "config": dict(sorted(config.items()))})

    @staticmethod
    def decode(data: bytes | None, path: str = "/config/<entity>") -> dict[str, str]:
        if not data:
            return {}
        obj = _parse(path, data)
        config = obj.get("config") or {}
        if not isinstance(config, dict):
            raise ZNodeDecodeError(f"{path}: config is not an object")
        return {str(k): str(v) for k, v in config.items()}


_UNRESERVED = frozenset(string.ascii_letters + string.digits + ".-_")
"""What Kafka's Sanitizer leaves as it is: Java's URLEncoder keeps these and '*', which
Sanitizer then encodes too (a JMX ObjectName pattern character)."""


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as a znode name (and a metric tag)."""
    return "".join(
        c if c in _UNRESERVED else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in name
    )


def desanitize(name: str, path: str = "/config/<entity>") -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder: '+' is a space too)."""
    try:
        return unquote_plus(name, errors="strict")
    except UnicodeDecodeError as exc:
        raise ZNodeDecodeError(f"{path}: the name is not URL-encoded UTF-8: {exc}") from None


class UserScramCredentialsZNode:
    """/config/users/<sanitized user>: a ConfigEntityZNode whose keys are SCRAM mechanism names
    and whose values are ScramCredential.to_text(), Kafka's ScramCredentialUtils form
    ({"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,
    iterations=4096"}}). Other keys (Kafka's user quotas) are not credentials: decode leaves
    them out."""

    ENTITY_TYPE: ClassVar[str] = "users"

    @staticmethod
    def path(user: str) -> str:
        return ConfigEntityZNode.path(UserScramCredentialsZNode.ENTITY_TYPE, sanitize(user))

    @staticmethod
    def encode(credentials: Mapping[int, ScramCredential]) -> bytes:
        return ConfigEntityZNode.encode(
            {
                m.mechanism_name: credentials[m].to_text()
                for m in SCRAM_MECHANISMS
                if m in credentials
            }
        )

    @staticmethod
    def decode(
        data: bytes | None, path: str = "/config/users/<user>"
    ) -> dict[int, ScramCredential]:
        """Mechanism id -> credential."""
        config = ConfigEntityZNode.decode(data, path)
        credentials: dict[int, ScramCredential] = {}
        for mechanism in SCRAM_MECHANISMS:
            text = config.get(mechanism.mechanism_name)
            if text is None:
                continue
            try:
                credentials[int(mechanism)] = ScramCredential.from_text(text)
            except CredentialFormatError as exc:
                raise ZNodeDecodeError(f"{path}: {mechanism.mechanism_name}: {exc}") from None
        return credentials


class ConfigEntityChangeNotificationZNode:
    PATH: ClassVar[str] = "/config/changes"

    @staticmethod
    def path() -> str:
        return ConfigEntityChangeNotificationZNode.PATH


class ConfigEntityChangeNotificationSequenceZNode:
    """/config/changes/config_change_<seq> (persistent sequential):
    {"version":2,"entity_path":"topics/<t>"}."""

    SEQUENCE_PREFIX: ClassVar[str] = "config_change_"

    @staticmethod
    def create_path() -> str:
        return (
            f"{ConfigEntityChangeNotificationZNode.PATH}/"
            f"{ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_PREFIX}"
        )

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return to_json({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes | None) -> str:
        path = ConfigEntityChangeNotificationZNode.PATH
        obj = _parse(path, data)
        if obj.get("version") != 2:
            raise ZNodeDecodeError(
                f"{path}: unsupported notification version {obj.get('version')!r}"
            )
        return str(_field(path, obj, "entity_path", str))


# -- ACLs (Kafka's ZK-mode AclAuthorizer: ZkAclStore, ZkAclChangeStore) ----------------------


def pascal_case(enum_name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId (the names of
    resource types, operations and permissions in ZooKeeper)."""
    return "".join(part.capitalize() for part in enum_name.split("_"))


ACL_RESOURCE_TYPES: tuple[ResourceType, ...] = tuple(
    t for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)
)
"""Kafka's AclEntry.ResourceTypes: one directory each under every ACL store."""
ACL_PATTERN_TYPES: tuple[PatternType, ...] = (PatternType.LITERAL, PatternType.PREFIXED)
"""The pattern types an ACL is stored with (Kafka's PatternType.isSpecific)."""

_OPERATIONS = {
    pascal_case(o.name): o
    for o in AclOperation
    if o not in (AclOperation.ANY, AclOperation.UNKNOWN)
}
_PERMISSIONS = {pascal_case(p.name): p for p in (AclPermissionType.ALLOW, AclPermissionType.DENY)}
_RESOURCE_TYPES_BY_NAME = {t.name.replace("_", ""): t for t in ACL_RESOURCE_TYPES}
"""Notifications name a type as TRANSACTIONAL_ID (Kafka 2.5+) or TransactionalId (before):
looked up upper-cased without underscores."""
_EXTENDED_PATTERN_TYPES = {"PREFIXED": PatternType.PREFIXED}

_ZNODE_NAME_FORBIDDEN_RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0xD800, 0xF8FF),
    (0xFFF0, 0xFFFF),
)
"""The characters ZooKeeper's PathUtils.validatePath refuses in a path."""


def _forbidden_in_znode_name(c: str) -> bool:
    return c == "/" or any(lo <= ord(c) <= hi for lo, hi in _ZNODE_NAME_FORBIDDEN_RANGES)


def znode_name_problem(name: str) -> str | None:
    """Why `name` cannot be one znode's name (Kafka writes ACL resource names unescaped), or
    None."""
    if name in ("", ".", ".."):
        return f"{name!r} is not a valid znode name"
    bad = sorted({c for c in name if _forbidden_in_znode_name(c)})
    if bad:
        return f"{name!r} holds characters ZooKeeper refuses in a znode name: {bad!r}"
    return None


@dataclass(frozen=True, slots=True, order=True)
class AclResource:
    """Kafka's ResourcePattern: the resource (or prefix) one ACL znode holds the ACLs of."""

    resource_type: ResourceType
    pattern_type: PatternType
    name: str

    @staticmethod
    def of(acl: AclBinding) -> AclResource:
        return AclResource(acl.resource_type, acl.pattern_type, acl.resource_name)


class AclStoreZNode:
    """/kafka-acl/<ResourceType>/<name> (LITERAL) and /kafka-acl-extended/prefixed/<ResourceType>/
    <name> (PREFIXED): {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
    "operation":"Read","host":"*"}]}, Kafka's ResourceZNode / AclEntry JSON (names in Kafka's
    SecurityUtils PascalCase). Empty data is no ACL, as Kafka's AclEntry.fromBytes reads it; a
    znode left without ACLs is deleted."""

    LITERAL_PATH: ClassVar[str] = "/kafka-acl"
    EXTENDED_PATH: ClassVar[str] = "/kafka-acl-extended"
    VERSION: ClassVar[int] = 1

    @staticmethod
    def store_path(pattern_type: PatternType) -> str:
        if pattern_type is PatternType.LITERAL:
            return AclStoreZNode.LITERAL_PATH
        if pattern_type is PatternType.PREFIXED:
            return f"{AclStoreZNode.EXTENDED_PATH}/{pattern_type.name.lower()}"
        raise ValueError(f"ACLs are stored LITERAL or PREFIXED, not {pattern_type.name}")

    @staticmethod
    def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
        return f"{AclStoreZNode.store_path(pattern_type)}/{pascal_case(resource_type.name)}"

    @staticmethod
    def path(resource: AclResource) -> str:
        parent = AclStoreZNode.type_path(resource.pattern_type, resource.resource_type)
        return f"{parent}/{resource.name}"

    @staticmethod
    def encode(acls: Iterable[AclBinding]) -> bytes:
        entries = sorted(
            (a.principal, a.host, pascal_case(a.operation.name), pascal_case(a.permission.name))
            for a in acls
        )
        return to_json(
            {
                "version": AclStoreZNode.VERSION,
                "acls": [
                    {"principal": p, "permissionType": perm, "operation": op, "host": h}
                    for p, h, op, perm in entries
                ],
            }
        )

    @staticmethod
    def decode(resource: AclResource, data: bytes | None) -> tuple[AclBinding, ...]:
        path = AclStoreZNode.path(resource)
        if not data:
            return ()
        obj = _parse(path, data)
        version = obj.get("version")
        if version != AclStoreZNode.VERSION:
            raise ZNodeDecodeError(f"{path}: unsupported ACL version {version!r}")
        return tuple(_acl_entry(path, resource, entry) for entry in _field(path, obj, "acls", list))


def _acl_entry(path: str, resource: AclResource, entry: Any) -> AclBinding:
    if not isinstance(entry, dict):
        raise ZNodeDecodeError(f"{path}: ACL entry {entry!r} is not an object")
    principal = _field(path, entry, "principal", str)
    if ":" not in principal:
        raise ZNodeDecodeError(f"{path}: principal {principal!r} is not Type:name")
    operation = _named(path, _OPERATIONS, _field(path, entry, "operation", str), "operation")
    permission = _named(
        path, _PERMISSIONS, _field(path, entry, "permissionType", str), "permissionType"
    )
    return AclBinding(
        resource_type=resource.resource_type,
        resource_name=resource.name,
        pattern_type=resource.pattern_type,
        principal=principal,
        host=_field(path, entry, "host", str),
        operation=operation,
        permission=permission,
    )


_V = TypeVar("_V")


def _named(path: str, names: Mapping[str, _V], name: str, what: str) -> _V:
    if name not in names:
        raise ZNodeDecodeError(f"{path}: unknown {what} {name!r}")
    return names[name]


def acl_store_paths() -> tuple[str, ...]:
    """What Kafka's KafkaZkClient.createAclPaths creates: each store with one directory per
    resource type, and both change directories (so that creating an ACL znode or a
    notification never lacks its parent)."""
    paths: list[str] = []
    for pattern_type in ACL_PATTERN_TYPES:
        paths.append(AclStoreZNode.store_path(pattern_type))
        paths.extend(AclStoreZNode.type_path(pattern_type, t) for t in ACL_RESOURCE_TYPES)
    paths.extend(AclChangeNotificationZNode.path(p) for p in ACL_PATTERN_TYPES)
    return tuple(paths)


class AclChangeNotificationZNode:
    """/kafka-acl-changes/acl_changes_<seq> (a LITERAL resource, data `TOPIC:name`: Kafka's
    LiteralAclChangeStore writes the Java enum name, and reads the type case-insensitively) and
    /kafka-acl-extended-changes/acl_changes_<seq> (data {"version":1,"resourceType":"TOPIC",
    "name":"..","patternType":"PREFIXED"}, Kafka's ExtendedAclChangeEvent), both persistent
    sequential: brokers re-read the named resource's znode."""

    LITERAL_PATH: ClassVar[str] = "/kafka-acl-changes"
    EXTENDED_PATH: ClassVar[str] = "/kafka-acl-extended-changes"
    SEQUENCE_PREFIX: ClassVar[str] = "acl_changes_"
    EXTENDED_VERSION: ClassVar[int] = 1

    @staticmethod
    def path(pattern_type: PatternType) -> str:
        if pattern_type is PatternType.LITERAL:
            return AclChangeNotificationZNode.LITERAL_PATH
        return AclChangeNotificationZNode.EXTENDED_PATH

    @staticmethod
    def create_path(pattern_type: PatternType) -> str:
        return (
            f"{AclChangeNotificationZNode.path(pattern_type)}/"
            f"{AclChangeNotificationZNode.SEQUENCE_PREFIX}"
        )

    @staticmethod
    def encode(resource: AclResource) -> bytes:
        if resource.pattern_type is PatternType.LITERAL:
            return f"{resource.resource_type.name}:{resource.name}".encode()
        return to_json(
            {
                "version": AclChangeNotificationZNode.EXTENDED_VERSION,
                "resourceType": resource.resource_type.name,
                "name": resource.name,
                "patternType": resource.pattern_type.name,
            }
        )

    @staticmethod
    def decode(change_path: str, data: bytes | None) -> AclResource:
        """`change_path`: the notification's own path (its parent says which form it has)."""
        if change_path.startswith(AclChangeNotificationZNode.EXTENDED_PATH + "/"):
            return _extended_change(change_path, data)
        try:
            text = (data or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise ZNodeDecodeError(f"{change_path} does not hold UTF-8 text") from None
        kind, sep, name = text.partition(":")
        if not sep:
            raise ZNodeDecodeError(f"{change_path}: {text!r} is not ResourceType:name")
        return AclResource(_resource_type(change_path, kind), PatternType.LITERAL, name)


def _extended_change(path: str, data: bytes | None) -> AclResource:
    obj = _parse(path, data)
    version = obj.get("version")
    if not isinstance(version, int) or version > AclChangeNotificationZNode.EXTENDED_VERSION:
        raise ZNodeDecodeError(f"{path}: unsupported ACL change version {version!r}")
    pattern = _field(path, obj, "patternType", str).upper()
    return AclResource(
        _resource_type(path, _field(path, obj, "resourceType", str)),
        _named(path, _EXTENDED_PATTERN_TYPES, pattern, "patternType"),
        _field(path, obj, "name", str),
    )


def _resource_type(path: str, name: str) -> ResourceType:
    """As Kafka's ResourceType.fromString, case-insensitive (and underscores optional)."""
    return _named(path, _RESOURCE_TYPES_BY_NAME, name.upper().replace("_", ""), "resource type")


# -- producer ids ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Kafka's ProducerIdsBlock: ids [first, last] handed to `broker_id`."""

    broker_id: int
    first_producer_id: int
    last_producer_id: int

    @property
    def next_producer_id(self) -> int:
        return self.last_producer_id + 1


class ProducerIdBlockZNode:
    """/latest_producer_id_block: {"version":1,"broker":1,"block_start":"0","block_end":"999"}
    (the bounds are strings in Kafka)."""

    PATH: ClassVar[str] = "/latest_producer_id_block"

    @staticmethod
    def path() -> str:
        return ProducerIdBlockZNode.PATH

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return to_json(
            {
                "version": 1,
                "broker": block.broker_id,
                "block_start": str(block.first_producer_id),
                "block_end": str(block.last_producer_id),
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> ProducerIdBlock:
        path = ProducerIdBlockZNode.PATH
        obj = _parse(path, data)
        return ProducerIdBlock(
            broker_id=_field(path, obj, "broker", int),
            first_producer_id=_int_str(path, obj, "block_start"),
            last_producer_id=_int_str(path, obj, "block_end"),
        )


PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",
    BrokerIdsZNode.PATH,
    TopicsZNode.PATH,
    ConfigEntityChangeNotificationZNode.PATH,
    DeleteTopicsZNode.PATH,
    "/brokers/seqid",
    IsrChangeNotificationZNode.PATH,
    ProducerIdBlockZNode.PATH,
    "/log_dir_event_notification",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)
"""Kafka's ZkData.PersistentZkPaths: created (empty) at start-up if missing."""
