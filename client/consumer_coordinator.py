"""The consumer's side of group membership (Kafka's ConsumerCoordinator): subscriptions and
assignments in the consumer protocol, the leader's assignment with the chosen assignor, offset
commits (sync, async, automatic) and fetches, and the rebalance listener.

Eager rebalancing, as Kafka's range and roundrobin assignors: before rejoining a member commits
(enable.auto.commit) and gives up every partition (on_partitions_revoked); after SyncGroup it
takes its new ones (on_partitions_assigned) and starts them at the committed offsets.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import structlog
import trio

from client.assignors import assignor_for
from client.cluster import ClusterClient, backoff_ms, now_ms
from client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from client.errors import CommitFailedError, KafkaTimeoutError, RebalanceInProgressError
from client.group_membership import NO_GENERATION, Generation, GroupMembership
from client.group_offsets import (
    OffsetAndMetadata,
    commit_errors,
    commit_request,
    fetch_request,
    parse_fetch,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.group_offsets import OffsetCommitResponse, OffsetFetchResponse
from protocol.messages.groups import JoinGroupProtocol
from protocol.names import TopicPartition

log = structlog.get_logger("client.group")

__all__ = ["ConsumerCoordinator", "ConsumerRebalanceListener", "ConsumerSide"]


class ConsumerRebalanceListener:
    """Kafka's ConsumerRebalanceListener. Override what you need; methods may be async.

    on_partitions_revoked runs before a rebalance, after the automatic commit: commit your own
    offsets there if you keep them. on_partitions_lost (default: revoked) runs instead when the
    member was already out of the group, so the partitions may be someone else's by now."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Any:
        return None

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Any:
        return self.on_partitions_revoked(partitions)


class ConsumerSide(Protocol):
    """What the coordinator needs of the Consumer."""

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def assignment(self) -> set[TopicPartition]: ...

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None: ...


class ConsumerCoordinator(GroupMembership):
    def __init__(
        self,
        cluster: ClusterClient,
        config: dict[str, Any],
        nursery: trio.Nursery,
        consumer: ConsumerSide,
        wake: Any = lambda: None,
    ) -> None:
        super().__init__(cluster, config, nursery, wake)
        self._consumer = consumer
        self._strategies: tuple[str, ...] = config["partition.assignment.strategy"]
        self.auto_commit: bool = config["enable.auto.commit"]
        self._auto_commit_interval_ms: int = config["auto.commit.interval.ms"]
        self._next_auto_commit_ms = now_ms() + self._auto_commit_interval_ms
        self._api_timeout_ms: float = config["default.api.timeout.ms"]
        self.subscription: tuple[str, ...] = ()
        self.listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._assigned_counts: dict[str, int] | None = None
        """The leader's view of the partition counts it assigned (Kafka's
        assignmentSnapshot): when metadata changes them, the leader starts a rebalance."""

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None) -> None:
        topics = tuple(sorted(set(topics)))
        if listener is not None:
            self.listener = listener
        if topics != self.subscription:
            self.subscription = topics
            self.request_rejoin(f"subscription changed to {', '.join(topics) or 'nothing'}")

    # -- the membership hooks -----------------------------------------------------------------

    def _protocols(self) -> tuple[JoinGroupProtocol, ...]:
        metadata = encode_subscription(Subscription(self.subscription))
        return tuple(JoinGroupProtocol(name=name, metadata=metadata) for name in self._strategies)

    async def _perform_assignment(
        self, protocol: str, members: dict[str, bytes]
    ) -> dict[str, bytes]:
        assignor = assignor_for(protocol)
        subscriptions = {m: decode_subscription(data) for m, data in members.items()}
        topics = {t for s in subscriptions.values() for t in s.topics}
        counts = await self._partition_counts(topics)
        self._assigned_counts = counts
        assigned = assignor.assign(counts, subscriptions)
        log.info(
            "Finished assignment",
            group=self.group_id,
            assignor=protocol,
            assignments={m: [str(tp) for tp in tps] for m, tps in assigned.items()},
        )
        return {
            member: encode_assignment(Assignment(tuple(assigned.get(member, ()))))
            for member in members
        }

    async def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        """Partition counts of the group's topics; unknown topics are left out (their members
        get nothing of them, as Kafka's)."""
        cluster = self._cluster
        cluster.topics.update(topics)
        await cluster.refresh_metadata(cluster.topics)
        counts = {}
        for topic in topics:
            count = cluster.metadata.num_partitions(topic)
            if count is not None:
                counts[topic] = count
        return counts

    def check_metadata(self) -> None:
        """On each poll: the leader rejoins when a topic of the group changed its partition
        count since it assigned (partitions were added), as Kafka's leader does."""
        before = self._assigned_counts
        if before is None or self.generation_if_stable() is None:
            return
        metadata = self._cluster.metadata
        for topic, count in before.items():
            now = metadata.num_partitions(topic)
            if now is not None and now != count:
                self._assigned_counts = None
                self.request_rejoin(
                    f"cached metadata has changed: {topic} has {now} partitions, not {count}"
                )
                return

    async def _on_join_prepare(self, generation: Generation) -> None:
        self._assigned_counts = None
        owned = self._consumer.assignment()
        if generation.valid and self.auto_commit:
            await self._auto_commit_sync(now_ms() + self.rebalance_timeout_ms)
        if owned:
            if generation.valid:
                log.info("Revoking previously assigned partitions", group=self.group_id,
                         partitions=sorted(str(tp) for tp in owned))  # fmt: skip
                await _call(self.listener.on_partitions_revoked, owned)
            else:
                log.info("Lost previously assigned partitions", group=self.group_id,
                         partitions=sorted(str(tp) for tp in owned))  # fmt: skip
                await _call(self.listener.on_partitions_lost, owned)
        self._consumer.assign_from_group(())

    async def revoke(self, owned: set[TopicPartition]) -> None:
        """unsubscribe(): the listener hears the partitions go (as Kafka's)."""
        if owned:
            await _call(self.listener.on_partitions_revoked, owned)

    async def _on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        partitions = set(decode_assignment(assignment).partitions)
        foreign = {tp for tp in partitions if tp.topic not in self.subscription}
        if foreign:
            log.warning(
                "The assignment names topics this member is not subscribed to; ignored",
                group=self.group_id,
                partitions=sorted(str(tp) for tp in foreign),
            )
            partitions -= foreign
        log.info("Adding newly assigned partitions", group=self.group_id,
                 partitions=sorted(str(tp) for tp in partitions))  # fmt: skip
        self._consumer.assign_from_group(partitions)
        self._next_auto_commit_ms = now_ms() + self._auto_commit_interval_ms
        await _call(self.listener.on_partitions_assigned, partitions)

    # -- commits ------------------------------------------------------------------------------

    async def commit_sync(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: float
    ) -> None:
        """Kafka's commitSync: retry what is retriable until `deadline_ms`; CommitFailedError
        when the member's generation is gone, RebalanceInProgressError while rebalancing."""
        if not offsets:
            return
        attempt = 0
        while True:
            attempt += 1
            error = await self._commit_once(dict(offsets), deadline_ms)
            if error is None:
                return
            remaining = deadline_ms - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"offset commit for group {self.group_id!r} did not complete before the "
                    f"deadline: {error.message}"
                )
            delay = backoff_ms(attempt, self._cluster.retry_backoff_ms,
                               self._cluster.retry_backoff_max_ms)  # fmt: skip
            await trio.sleep(min(delay, remaining) / 1000)

    async def _commit_once(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], deadline_ms: float
    ) -> KafkaError | None:
        """One OffsetCommit: None when done, the retriable error otherwise; raises the rest."""
        generation = self._commit_generation()
        request = commit_request(
            self.group_id, generation.generation_id, generation.member_id, offsets
        )
        try:
            response: OffsetCommitResponse = await self.send(
                request, deadline_ms, self.request_timeout_ms
            )
        except KafkaError as exc:
            if exc.code.retriable:
                return exc
            raise
        failed = commit_errors(response, offsets)
        if not failed:
            log.debug("Committed offsets", group=self.group_id, count=len(offsets))
            return None
        tp, error = next(iter(sorted(failed.items())))
        return self._commit_error(tp, error, generation)

    def _commit_generation(self) -> Generation:
        """Kafka's rule: a subscribed member commits only within a Stable generation; with
        manual assignment it commits as no member (generation -1)."""
        if not self.subscription:
            return NO_GENERATION
        generation = self.generation_if_stable()
        if generation is not None:
            return generation
        if self.rebalance_in_progress:
            raise RebalanceInProgressError(
                f"group {self.group_id!r} is rebalancing: poll() to complete it, then commit"
            )
        raise CommitFailedError(
            ErrorCode.ILLEGAL_GENERATION,
            f"commit cannot be completed: this member is not in a generation of group "
            f"{self.group_id!r} (it left or was removed; its partitions may have moved)",
        )

    def _commit_error(
        self, tp: TopicPartition, error: KafkaError, generation: Generation
    ) -> KafkaError | None:
        code = error.code
        if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            return error
        if code.retriable:
            self.handle_coordinator_error(code, error.message)
            return error
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("offset commit answered REBALANCE_IN_PROGRESS")
            raise RebalanceInProgressError(
                f"offset commit for group {self.group_id!r}: the group is rebalancing; poll() "
                "to complete the rebalance, then commit again"
            )
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            if generation == self.generation:
                self.reset_generation(f"offset commit: {error.message}",
                                      keep_member_id=code is ErrorCode.ILLEGAL_GENERATION)  # fmt: skip
            raise CommitFailedError(
                code,
                f"commit cannot be completed since the group {self.group_id!r} has already "
                f"rebalanced and assigned the partitions to another member ({error.message})",
            )
        raise KafkaError(
            code, f"offset commit of {tp} for group {self.group_id!r}: {error.message}"
        )

    async def _auto_commit_sync(self, deadline_ms: float) -> None:
        offsets = self._consumer.consumed_offsets()
        try:
            await self.commit_sync(offsets, deadline_ms)
        except KafkaError as exc:
            log.warning("Synchronous auto-commit of offsets failed", group=self.group_id,
                        error=str(exc))  # fmt: skip

    def maybe_auto_commit(self) -> None:
        """On each poll(): commit the positions in the background every
        auto.commit.interval.ms (Kafka's maybeAutoCommitOffsetsAsync)."""
        if not self.auto_commit or now_ms() < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now_ms() + self._auto_commit_interval_ms
        if self.subscription and self.generation_if_stable() is None:
            return
        offsets = self._consumer.consumed_offsets()
        if offsets:
            self._nursery.start_soon(self._auto_commit_sync, now_ms() + self.request_timeout_ms)

    # -- committed offsets --------------------------------------------------------------------

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition], deadline_ms: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Kafka's fetchCommittedOffsets: OffsetFetch, retrying the coordinator's retriable
        answers until `deadline_ms`."""
        partitions = set(partitions)
        attempt = 0
        while True:
            attempt += 1
            error = None
            try:
                response: OffsetFetchResponse = await self.send(
                    fetch_request(self.group_id, partitions), deadline_ms, self.request_timeout_ms
                )
                code = ErrorCode.from_wire(response.error_code)
                if code is ErrorCode.NONE:
                    found, errors = parse_fetch(response)
                    error = self._fetch_partition_errors(errors)
                    if error is None:
                        return {tp: found.get(tp) for tp in partitions}
                else:
                    error = KafkaError(code, response.error_message or code.name)
                    if not code.retriable:
                        raise KafkaError(code, f"OffsetFetch for group {self.group_id!r}: "
                                               f"{error.message}")  # fmt: skip
                    self.handle_coordinator_error(code, error.message)
            except KafkaError as exc:
                if not exc.code.retriable:
                    raise
                error = exc
            remaining = deadline_ms - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"fetching committed offsets of group {self.group_id!r} timed out: "
                    f"{error.message}"
                )
            delay = backoff_ms(attempt, self._cluster.retry_backoff_ms,
                               self._cluster.retry_backoff_max_ms)  # fmt: skip
            await trio.sleep(min(delay, remaining) / 1000)

    def _fetch_partition_errors(
        self, errors: dict[TopicPartition, KafkaError]
    ) -> KafkaError | None:
        for tp, error in sorted(errors.items()):
            if error.code.retriable:
                return error
            raise KafkaError(error.code, f"OffsetFetch of {tp} for group {self.group_id!r}: "
                                         f"{error.message}")  # fmt: skip
        return None

    async def close_group(self, deadline_ms: float) -> None:
        """Kafka's ConsumerCoordinator.close: commit (enable.auto.commit), then LeaveGroup."""
        if self.auto_commit and (not self.subscription or self.generation_if_stable()):
            await self._auto_commit_sync(deadline_ms)
        await self.close()


async def _call(method: Any, partitions: set[TopicPartition]) -> None:
    result = method(set(partitions))
    if inspect.isawaitable(result):
        await result
