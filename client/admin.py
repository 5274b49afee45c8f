"""The Admin client: topics, configs and consumer groups (Kafka's Admin API, awaited directly;
the group operations are in client.admin_groups).

Every failure is a protocol.errors.KafkaError carrying the broker's own message, e.g.
`TOPIC_ALREADY_EXISTS: Topic 'events' already exists.`
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import trio

from client.admin_acls import AclAdmin
from client.admin_groups import GroupAdmin
from client.admin_users import UserAdmin
from client.cluster import ClusterClient, backoff_ms, now_ms
from client.config import admin_config
from client.errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from client.lifecycle import ClientBase
from client.metadata import BrokerInfo, PartitionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ResourceType,
)
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopic,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.names import TopicPartition, validate_topic_name

K = TypeVar("K")
ItemResult = tuple[ErrorCode, Any]
"""An item's error code and what the caller keeps of its answer."""

__all__ = [
    "Admin",
    "AlterConfigOp",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "CreatedTopic",
    "ElectionType",
    "NewPartitions",
    "NewTopic",
    "PartitionReassignment",
    "ResourceType",
    "TopicDescription",
]


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    """-1: the broker's num.partitions."""
    replication_factor: int = -1
    """-1: the broker's default.replication.factor."""
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    """Manual placement: partition -> broker ids, preferred leader first."""


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Kafka's NewPartitions.increaseTo(total_count, new_assignments): grow a topic to
    `total_count` partitions; `new_assignments` gives the replicas of each new partition in
    order (preferred leader first), None lets the controller place them."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class ConfigResource(NamedTuple):
    type: ResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int) -> ConfigResource:
        return cls(ResourceType.BROKER, str(node_id))


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    read_only: bool = False
    is_sensitive: bool = False
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """An ongoing reassignment (Kafka's PartitionReassignment): `replicas` is the full set
    while it moves, original and target replicas together."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


class Admin(GroupAdmin, UserAdmin, AclAdmin, ClientBase):
    """Use as `async with Admin(bootstrap_servers=...) as admin:`."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        super().__init__(admin_config(config, **overrides))
        self._api_timeout_ms: float = self.config["default.api.timeout.ms"]

    def _client(self) -> ClusterClient:
        if self._closed or self._cluster is None:
            raise ClientClosedError("admin client")
        return self._cluster

    async def _call(
        self, request: Request, *, to_controller: bool = False, deadline: float | None = None
    ) -> Any:
        """Send with retries on connection errors and NOT_CONTROLLER until
        default.api.timeout.ms (or `deadline`, in now_ms() terms)."""
        cluster = self._client()
        if deadline is None:
            deadline = now_ms() + self._api_timeout_ms
        attempt = 0
        while True:
            attempt += 1
            try:
                node = cluster.metadata.controller_id if to_controller else -1
                if node >= 0 and node in cluster.metadata.brokers:
                    response = await cluster.send(node, request)
                else:
                    response = await cluster.send_any(request)
                code = ErrorCode.from_wire(response.error_code)
                if code is ErrorCode.NONE:
                    return response
                error: KafkaError = KafkaError(code, response.error_message or code.name)
                if code is not ErrorCode.NOT_CONTROLLER:
                    raise error
                await cluster.refresh_metadata(())
            except KafkaConnectionError as exc:
                error = exc
                if attempt == 1 and not cluster.metadata.brokers:
                    raise
                cluster.drop(cluster.metadata.controller_id)
                # As Kafka's AdminClient: a dead controller is replaced; without fresh
                # metadata every retry would go to the dead one until the deadline.
                with contextlib.suppress(KafkaConnectionError):
                    await cluster.refresh_metadata(())
            remaining = deadline - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"{type(request).__name__} failed until default.api.timeout.ms: {error}"
                )
            await trio.sleep(
                min(backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms),
                    remaining) / 1000
            )  # fmt: skip

    async def _call_per_item(
        self,
        keys: Sequence[K] | None,
        build: Callable[[Sequence[K] | None], Request],
        results_of: Callable[[Any], dict[K, ItemResult]],
    ) -> dict[K, ItemResult]:
        """Send a controller request and resend the items answered NOT_CONTROLLER (a forwarded
        request reaches a controller that lost its office mid-election) with backoff until
        default.api.timeout.ms; the other items keep their first answer. `keys=None` means
        "everything" and is resent whole."""
        cluster = self._client()
        deadline = now_ms() + self._api_timeout_ms
        done: dict[K, ItemResult] = {}
        pending = keys
        attempt = 0
        while True:
            attempt += 1
            response = await self._call(build(pending), to_controller=True, deadline=deadline)
            results = results_of(response)
            retry = [k for k, (code, _) in results.items() if code is ErrorCode.NOT_CONTROLLER]
            done.update(results)
            remaining = deadline - now_ms()
            if not retry or remaining <= 0:
                return done
            pending = None if keys is None else retry
            with contextlib.suppress(KafkaConnectionError):  # the next _call retries those
                await cluster.refresh_metadata(())
            await trio.sleep(
                min(backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms),
                    remaining) / 1000
            )  # fmt: skip

    # -- topics -------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False, timeout_ms: int = 30000
    ) -> list[CreatedTopic]:
        """Create topics; raises KafkaError for the first one the broker refused (its message
        names the topic)."""
        for topic in topics:
            validate_topic_name(topic.name)
        by_name = {t.name: t for t in topics}

        def build(pending: Sequence[str] | None) -> Request:
            return CreateTopicsRequest(
                topics=tuple(_creatable(by_name[n]) for n in (pending or list(by_name))),
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            )

        def results_of(response: CreateTopicsResponse) -> dict[str, ItemResult]:
            return {r.name: (ErrorCode.from_wire(r.error_code), r) for r in response.topics}

        answers = await self._call_per_item(list(by_name), build, results_of)
        created = []
        for name in by_name:
            if name not in answers:
                continue
            code, result = answers[name]
            if code is not ErrorCode.NONE:
                raise KafkaError(code, result.error_message or f"cannot create {name!r}")
            created.append(
                CreatedTopic(
                    result.name, result.topic_id, result.num_partitions, result.replication_factor
                )
            )
        return created

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> CreatedTopic:
        (created,) = await self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, dict(configs or {}))]
        )
        return created

    async def wait_for_topics(
        self,
        names: Iterable[str],
        *,
        partitions: Mapping[str, int] | None = None,
        timeout_ms: float | None = None,
    ) -> list[int]:
        """Wait until every live broker's metadata shows `names` with a leader for each
        partition. CreateTopics answers once the broker that forwarded it has the topic; the
        others learn it a moment later (ZK mode: UpdateMetadata; Raft mode: their metadata
        log), so a command run at once against another broker could still be told that the
        topic does not exist. `partitions` ({topic: count}) also waits for added partitions.
        Returns the ids of the brokers that did not show it in time
        (default.api.timeout.ms), [] when all did; a broker that cannot be reached is skipped."""
        wanted = tuple(sorted(set(names)))
        cluster = self._client()
        deadline = now_ms() + (self._api_timeout_ms if timeout_ms is None else timeout_ms)
        try:
            await self._refresh(())
        except KafkaError:
            return []  # the brokers cannot be listed: nothing to wait for
        pending = set(cluster.metadata.brokers)
        attempt = 0
        while pending:
            attempt += 1
            for node_id in sorted(pending):
                if now_ms() >= deadline:
                    break
                try:
                    response = await cluster.send(node_id, MetadataRequest(topics=wanted))
                except KafkaConnectionError:
                    pending.discard(node_id)  # down: it learns the topic when it comes back
                    continue
                except KafkaError:
                    continue  # slow to answer (a timeout): it stays pending
                if _shows_leaders(response, wanted, partitions or {}):
                    pending.discard(node_id)
            remaining = deadline - now_ms()
            if not pending or remaining <= 0:
                break
            await trio.sleep(
                min(backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms),
                    remaining) / 1000
            )  # fmt: skip
        return sorted(pending)

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 30000) -> None:
        wanted = list(dict.fromkeys(names))

        def build(pending: Sequence[str] | None) -> Request:
            return DeleteTopicsRequest(topic_names=tuple(pending or wanted), timeout_ms=timeout_ms)

        def results_of(response: DeleteTopicsResponse) -> dict[str, ItemResult]:
            return {
                r.name: (ErrorCode.from_wire(r.error_code), r.error_message)
                for r in response.responses
            }

        answers = await self._call_per_item(wanted, build, results_of)
        for name in wanted:
            code, message = answers.get(name, (ErrorCode.NONE, None))
            if code is not ErrorCode.NONE:
                if not message and code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    message = f"topic {name!r} does not exist"
                raise KafkaError(code, message or f"cannot delete {name!r}")

    async def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        *,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> None:
        """Grow topics to a new total partition count (Kafka's Admin.createPartitions):
        `{topic: total}` or `{topic: NewPartitions(total, new_assignments)}`; `assignments`
        (`{topic: [[broker ids of each new partition], ...]}`) is the same as NewPartitions'.
        Partitions can only be added: a count that does not grow is INVALID_PARTITIONS. Raises
        KafkaError for the first topic the controller refused, its message naming the topic.
        Returns once the controller has created them; their leaders reach the brokers'
        metadata shortly after."""
        wanted: dict[str, NewPartitions] = {}
        for name, value in new_partitions.items():
            validate_topic_name(name)
            spec = value if isinstance(value, NewPartitions) else NewPartitions(value)
            if isinstance(spec.total_count, bool) or not isinstance(spec.total_count, int):
                raise ValueError(f"{name}: the new partition count must be an int, not "
                                 f"{spec.total_count!r}")  # fmt: skip
            if assignments and name in assignments:
                if spec.new_assignments is not None:
                    raise ValueError(f"{name}: assignments given twice (NewPartitions and "
                                     "assignments=)")  # fmt: skip
                spec = NewPartitions(spec.total_count, assignments[name])
            wanted[name] = spec
        unknown = sorted(set(assignments or ()) - set(wanted))
        if unknown:
            raise ValueError(f"assignments for topics without a new count: {', '.join(unknown)}")
        if not wanted:
            return

        def build(pending: Sequence[str] | None) -> Request:
            return CreatePartitionsRequest(
                topics=tuple(_partitions_topic(n, wanted[n]) for n in (pending or list(wanted))),
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            )

        def results_of(response: CreatePartitionsResponse) -> dict[str, ItemResult]:
            return {
                r.name: (ErrorCode.from_wire(r.error_code), r.error_message)
                for r in response.results
            }

        answers = await self._call_per_item(list(wanted), build, results_of)
        for name in wanted:
            code, message = answers.get(name, (ErrorCode.NONE, None))
            if code is not ErrorCode.NONE:
                if not message and code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    message = f"topic {name!r} does not exist"
                message = message or code.name
                raise KafkaError(code, message if name in message else f"{name}: {message}")

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        await self._refresh(None)
        metadata = self._client().metadata
        return sorted(
            name for name, t in metadata.topics.items() if include_internal or not t.is_internal
        )

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        """Partitions, leaders, replicas and ISR; raises UNKNOWN_TOPIC_OR_PARTITION for a
        name that does not exist."""
        wanted = None if names is None else list(names)
        await self._refresh(wanted)
        metadata = self._client().metadata
        for name in wanted or ():
            if name in metadata.topic_errors:
                code, message = metadata.topic_errors[name]
                if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    message = f"topic {name!r} does not exist"
                raise KafkaError(code, message)
        chosen = wanted if wanted is not None else sorted(metadata.topics)
        return [
            TopicDescription(t.name, t.topic_id, t.is_internal, t.partitions)
            for t in (metadata.topics[n] for n in chosen if n in metadata.topics)
        ]

    async def describe_cluster(self) -> ClusterDescription:
        await self._refresh(())
        metadata = self._client().metadata
        return ClusterDescription(
            metadata.cluster_id,
            metadata.controller_id,
            tuple(sorted(metadata.brokers.values(), key=lambda b: b.node_id)),
        )

    async def _refresh(self, topics: list[str] | tuple[()] | None) -> None:
        cluster = self._client()
        deadline = now_ms() + self._api_timeout_ms
        attempt = 0
        while True:
            attempt += 1
            try:
                await cluster.refresh_metadata(topics)
                return
            except KafkaConnectionError:
                if attempt == 1 or now_ms() >= deadline:
                    raise
                await trio.sleep(cluster.retry_backoff_ms / 1000)

    # -- configs ------------------------------------------------------------------------------

    async def describe_configs(
        self, resources: Sequence[ConfigResource], *, include_documentation: bool = False
    ) -> dict[ConfigResource, list[ConfigEntry]]:
        request = DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(resource_type=int(r.type), resource_name=r.name)
                for r in resources
            ),
            include_documentation=include_documentation,
        )
        response: DescribeConfigsResponse = await self._call(request)
        out: dict[ConfigResource, list[ConfigEntry]] = {}
        for result in response.results:
            resource = ConfigResource(ResourceType(result.resource_type), result.resource_name)
            if result.error_code:
                code = ErrorCode.from_wire(result.error_code)
                message = result.error_message
                if not message and code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    message = f"topic {result.resource_name!r} does not exist"
                raise KafkaError(code, message or f"cannot describe {result.resource_name!r}")
            out[resource] = [
                ConfigEntry(
                    e.name,
                    e.value,
                    _source(e.config_source),
                    e.read_only,
                    e.is_sensitive,
                    e.documentation,
                )
                for e in result.configs
            ]
        return out

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[tuple[str, AlterConfigOp, str | None]]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Apply `(name, op, value)` changes per resource; all or nothing per resource."""
        request = IncrementalAlterConfigsRequest(
            resources=tuple(
                AlterConfigsResource(
                    resource_type=int(resource.type),
                    resource_name=resource.name,
                    configs=tuple(
                        AlterableConfig(name=n, config_operation=int(op), value=v)
                        for n, op, v in ops
                    ),
                )
                for resource, ops in changes.items()
            ),
            validate_only=validate_only,
        )
        response: IncrementalAlterConfigsResponse = await self._call(request, to_controller=True)
        for result in response.responses:
            if result.error_code:
                code = ErrorCode.from_wire(result.error_code)
                message = result.error_message
                if not message and code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    message = f"topic {result.resource_name!r} does not exist"
                raise KafkaError(code, message or f"cannot alter {result.resource_name!r}")

    # -- leaders and reassignments ------------------------------------------------------------

    async def elect_leaders(
        self,
        election_type: ElectionType | str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int = 60000,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Preferred or unclean leader elections (Kafka's Admin.electLeaders); `partitions=None`
        for every partition (the controller then leaves out those needing no election).

        Per partition: None when a leader was elected, else the KafkaError - including
        ELECTION_NOT_NEEDED, which is an answer and not a failure (as Kafka's
        ElectLeadersResult.all() ignores it). Only request-level errors raise."""
        kind = _election_type(election_type)
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        if wanted == []:
            return {}

        def build(pending: Sequence[TopicPartition] | None) -> Request:
            return ElectLeadersRequest(
                election_type=int(kind),
                topic_partitions=None
                if pending is None
                else tuple(
                    ElectLeadersTopicPartitions(topic=t, partitions=tuple(ps))
                    for t, ps in _by_topic(pending).items()
                ),
                timeout_ms=timeout_ms,
            )

        def results_of(response: ElectLeadersResponse) -> dict[TopicPartition, ItemResult]:
            return {
                TopicPartition(t.topic, p.partition_id): (
                    ErrorCode.from_wire(p.error_code),
                    p.error_message,
                )
                for t in response.replica_election_results
                for p in t.partition_result
            }

        answers = await self._call_per_item(wanted, build, results_of)
        return {tp: _item_error(code, message) for tp, (code, message) in answers.items()}

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int = 60000,
    ) -> None:
        """Start (target replicas, preferred leader first) or cancel (None) reassignments
        (KIP-455). The controller accepts them and they complete in the background; raises
        KafkaError for the first partition refused, naming it."""
        wanted = list(reassignments)
        if not wanted:
            return

        def build(pending: Sequence[TopicPartition] | None) -> Request:
            chosen = wanted if pending is None else pending
            return AlterPartitionReassignmentsRequest(
                topics=tuple(
                    ReassignableTopic(
                        name=t,
                        partitions=tuple(
                            ReassignablePartition(
                                partition_index=p,
                                replicas=_replicas(reassignments[TopicPartition(t, p)]),
                            )
                            for p in ps
                        ),
                    )
                    for t, ps in _by_topic(chosen).items()
                ),
                timeout_ms=timeout_ms,
            )

        def results_of(
            response: AlterPartitionReassignmentsResponse,
        ) -> dict[TopicPartition, ItemResult]:
            return {
                TopicPartition(t.name, p.partition_index): (
                    ErrorCode.from_wire(p.error_code),
                    p.error_message,
                )
                for t in response.responses
                for p in t.partitions
            }

        answers = await self._call_per_item(wanted, build, results_of)
        for tp in wanted:
            code, message = answers.get(tp, (ErrorCode.NONE, None))
            if code is not ErrorCode.NONE:
                raise KafkaError(code, f"{tp}: {message or code.name}")

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: int = 60000
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments (of `partitions`, or all); partitions not moving are
        absent."""
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        request = ListPartitionReassignmentsRequest(
            timeout_ms=timeout_ms,
            topics=None
            if wanted is None
            else tuple(
                ListPartitionReassignmentsTopic(name=t, partition_indexes=tuple(ps))
                for t, ps in _by_topic(wanted).items()
            ),
        )
        response: ListPartitionReassignmentsResponse = await self._call(request, to_controller=True)
        return {
            TopicPartition(t.name, p.partition_index): PartitionReassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }


def _election_type(value: ElectionType | str) -> ElectionType:
    if isinstance(value, ElectionType):
        return value
    try:
        return ElectionType[str(value).upper()]
    except KeyError:
        raise ValueError(f"election type {value!r} is not one of: preferred, unclean") from None


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _replicas(replicas: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if replicas is None else tuple(int(r) for r in replicas)


def _item_error(code: ErrorCode, message: str | None) -> KafkaError | None:
    return None if code is ErrorCode.NONE else KafkaError(code, message or code.name)


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


def _partitions_topic(name: str, spec: NewPartitions) -> CreatePartitionsTopic:
    return CreatePartitionsTopic(
        name=name,
        count=spec.total_count,
        assignments=None
        if spec.new_assignments is None
        else tuple(
            CreatePartitionsAssignment(broker_ids=tuple(int(b) for b in ids))
            for ids in spec.new_assignments
        ),
    )


def _creatable(topic: NewTopic) -> CreatableTopic:
    configs = tuple(
        CreatableTopicConfig(name=k, value=str(v)) for k, v in (topic.configs or {}).items()
    )
    if topic.replica_assignment:
        return CreatableTopic(
            name=topic.name,
            assignments=tuple(
                CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(ids))
                for p, ids in sorted(topic.replica_assignment.items())
            ),
            configs=configs,
        )
    return CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        configs=configs,
    )


def _shows_leaders(
    response: MetadataResponse, names: Sequence[str], counts: Mapping[str, int]
) -> bool:
    """Whether a Metadata answer has every topic of `names` with its partitions (at least
    `counts[name]`, else at least one), each with a leader."""
    topics = {t.name: t for t in response.topics}
    return all(
        name in topics
        and topics[name].error_code == 0
        and len(topics[name].partitions) >= max(1, counts.get(name, 1))
        and all(p.leader_id >= 0 for p in topics[name].partitions)
        for name in names
    )
