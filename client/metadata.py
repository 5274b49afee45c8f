"""The client's metadata cache: brokers and partition leaders, from Metadata responses (pure).

Refreshed when it is older than metadata.max.age.ms, when a topic the client uses is missing,
and after NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION / connection failures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataResponse


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    """Leader broker id, -1 when none."""
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


@dataclass(slots=True)
class ClusterMetadata:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    topic_errors: dict[str, tuple[ErrorCode, str]] = field(default_factory=dict)
    """Topics the last refresh asked for and the broker refused (unknown, invalid name)."""
    cluster_id: str | None = None
    controller_id: int = -1
    updated_ms: float = -1.0
    _leaders: dict[tuple[str, int], int] = field(default_factory=dict)
    _available: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def update(self, response: MetadataResponse, now_ms: float, *, all_topics: bool) -> None:
        """Apply a Metadata response. With `all_topics`, topics it lacks are forgotten."""
        self.brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        if all_topics:
            self.topics = {}
            self.topic_errors = {}
        for t in response.topics:
            if t.error_code != ErrorCode.NONE:
                self.topics.pop(t.name, None)
                self.topic_errors[t.name] = (
                    ErrorCode.from_wire(t.error_code),
                    t.error_message or ErrorCode.from_wire(t.error_code).name,
                )
                continue
            self.topic_errors.pop(t.name, None)
            self.topics[t.name] = TopicInfo(
                name=t.name,
                topic_id=t.topic_id,
                is_internal=t.is_internal,
                partitions=tuple(
                    PartitionInfo(
                        topic=t.name,
                        partition=p.index,
                        leader=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replicas=p.replica_nodes,
                        isr=p.isr_nodes,
                        offline_replicas=p.offline_replicas,
                        error_code=p.error_code,
                    )
                    for p in sorted(t.partitions, key=lambda p: p.index)
                ),
            )
        self._index()
        self.updated_ms = now_ms

    def _index(self) -> None:
        self._leaders = {}
        self._available = {}
        for t in self.topics.values():
            avail = []
            for p in t.partitions:
                if p.leader >= 0 and p.leader in self.brokers:
                    self._leaders[(t.name, p.partition)] = p.leader
                    avail.append(p.partition)
            self._available[t.name] = tuple(avail)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's broker id, or None when unknown or without a live leader."""
        return self._leaders.get((topic, partition))

    def num_partitions(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        return None if info is None else len(info.partitions)

    def leaderless(self, topic: str) -> tuple[int, ...] | None:
        """Partitions of `topic` without a live leader; None when the topic is not known."""
        info = self.topics.get(topic)
        if info is None:
            return None
        return tuple(
            p.partition for p in info.partitions if (topic, p.partition) not in self._leaders
        )

    def no_leader_reason(self, topic: str, partition: int) -> str:
        """Why the metadata gives `topic`-`partition` no live leader, for a person."""
        info = self.topics.get(topic)
        if info is None:
            error = self.topic_errors.get(topic)
            return "the topic is not in the metadata" + (
                f" ({error[0].name}: {error[1]})" if error else ""
            )
        if not 0 <= partition < len(info.partitions):
            return f"the topic has {len(info.partitions)} partition(s) in the metadata"
        p = info.partitions[partition]
        code = ErrorCode.from_wire(p.error_code) if p.error_code else None
        replicas = (
            f"replicas {list(p.replicas)}, in-sync {list(p.isr)}, "
            f"offline {list(p.offline_replicas)}"
        )
        if p.leader < 0:
            return f"{(code or ErrorCode.LEADER_NOT_AVAILABLE).name}: no leader elected; {replicas}"
        if p.leader not in self.brokers:
            return (
                f"{(code or ErrorCode.LEADER_NOT_AVAILABLE).name}: its leader, broker "
                f"{p.leader}, is not among the live brokers; {replicas}"
            )
        if (topic, partition) not in self._leaders:
            return (
                f"broker {p.leader} answered that it no longer leads it; waiting for metadata "
                "that names the new leader"
            )
        return f"broker {p.leader} leads it"

    def complete_for(self, topics: Iterable[str]) -> bool:
        """Every topic of `topics` known, with a live leader for each of its partitions."""
        return all(self.leaderless(t) == () for t in topics)

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        return self._available.get(topic, ())

    def apply_leader_hint(
        self,
        topic: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        endpoint: BrokerInfo | None,
    ) -> bool:
        """Take a leader a broker named in an error answer (KIP-951) when it is newer than the
        one known and reachable (`endpoint`, or a broker already known); True when taken."""
        info = self.topics.get(topic)
        if info is None or leader_id < 0 or not 0 <= partition < len(info.partitions):
            return False
        current = info.partitions[partition]
        if current.partition != partition:
            return False
        if leader_epoch <= current.leader_epoch and current.leader >= 0:
            return False
        if endpoint is not None:
            self.brokers[leader_id] = endpoint
        elif leader_id not in self.brokers:
            return False
        parts = list(info.partitions)
        parts[partition] = replace(current, leader=leader_id, leader_epoch=leader_epoch)
        self.topics[topic] = replace(info, partitions=tuple(parts))
        self._leaders[(topic, partition)] = leader_id
        self._available[topic] = tuple(
            p.partition for p in parts if (topic, p.partition) in self._leaders
        )
        return True

    def invalidate_leader(self, topic: str, partition: int) -> None:
        """Forget a leader the broker says is no longer one, until the next refresh."""
        self._leaders.pop((topic, partition), None)

    def age_ms(self, now_ms: float) -> float:
        return float("inf") if self.updated_ms < 0 else now_ms - self.updated_ms
