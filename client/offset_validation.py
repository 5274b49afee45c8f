"""KIP-320 for the consumer: positions checked with OffsetForLeaderEpoch after a leader change
(Kafka's OffsetFetcher.validatePositionsIfNeeded / validatePositionsAsync), mixed into
client.consumer.Consumer.

Each poll, `_check_leaders` compares every position's leader and leader epoch with metadata; a
position whose leader changed awaits validation (no fetching meanwhile) and is sent, when due,
to its new leader, one request per leader in flight. The answer goes through the rules of
client.positions: the position stands, goes back to the first offset known to diverge, is reset
by auto.offset.reset, or (auto.offset.reset none) a LogTruncationError waits for the next
poll(). Errors and unanswered partitions are asked again after a metadata refresh and backoff.
"""

from __future__ import annotations

import structlog
import trio

from client.cluster import ClusterClient, now_ms
from client.errors import KafkaConnectionError, LogTruncationError
from client.positions import (
    EpochEndOffset,
    FetchPosition,
    LogTruncation,
    PartitionState,
    Validation,
    leader_and_epoch,
    log_truncation_error,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.names import TopicPartition

log = structlog.get_logger("client.offset_validation")


class OffsetValidation:
    """Mixed into Consumer: needs the attributes below (Consumer.__init__ and ClientBase set
    them), `_after_seek` and `_wake_poll`."""

    _states: dict[TopicPartition, PartitionState]
    _validating_nodes: set[int]
    _truncation: LogTruncationError | None
    _reset: str
    _request_timeout_ms: float
    _nursery: trio.Nursery | None
    _cluster: ClusterClient | None
    _closed: bool

    def _after_seek(self, tp: TopicPartition) -> None:
        raise NotImplementedError

    def _wake_poll(self) -> None:
        raise NotImplementedError

    def _check_leaders(self, cluster: ClusterClient) -> None:
        """Kafka's validatePositionsIfNeeded: a position whose leader or leader epoch changed
        in metadata awaits validation; send OffsetForLeaderEpoch to each new leader for the
        positions due (one request per leader in flight)."""
        assert self._nursery is not None
        now = now_ms()
        by_node = self._positions_due(cluster, now)
        for node, positions in by_node.items():
            for tp in positions:
                # Kafka's setNextAllowedRetry: not again while this request may be answered
                self._states[tp].next_validation_ms = now + self._request_timeout_ms
            self._validating_nodes.add(node)
            self._nursery.start_soon(self._validate, node, positions)

    def _positions_due(
        self, cluster: ClusterClient, now: float
    ) -> dict[int, dict[TopicPartition, FetchPosition]]:
        """The positions awaiting validation that are due, by leader (without a request in
        flight)."""
        metadata = cluster.metadata
        by_node: dict[int, dict[TopicPartition, FetchPosition]] = {}
        for tp, state in self._states.items():
            if state.position is None:
                continue
            current = leader_and_epoch(metadata, tp)
            if not state.maybe_validate(current):
                if state.awaiting_validation and current.leader is None:
                    cluster.request_update()  # the poll refreshes metadata to find the leader
                continue
            node = state.current_leader.leader
            position = state.fetch_position()
            if node is None or position is None or node in self._validating_nodes:
                continue
            if state.next_validation_ms <= now:
                by_node.setdefault(node, {})[tp] = position
        return by_node

    async def _validate(self, node: int, positions: dict[TopicPartition, FetchPosition]) -> None:
        """OffsetForLeaderEpoch for `positions` at their new leader `node`, then the rules of
        client.positions (Kafka's OffsetFetcher.validatePositionsAsync)."""
        cluster = self._cluster
        assert cluster is not None
        request = _epoch_request(positions)
        retry: set[TopicPartition] = set()
        try:
            try:
                response: OffsetForLeaderEpochResponse = await cluster.send(node, request)
            except KafkaError as exc:
                if self._closed:
                    return
                log.info("offset validation failed", node=node, error=str(exc))
                if isinstance(exc, KafkaConnectionError):
                    cluster.drop(node)
                retry.update(positions)
                response = OffsetForLeaderEpochResponse()
            if response.error_code:
                log.info("offset validation refused", node=node, error=response.error_message)
                retry.update(positions)
            retry.update(self._apply_answers(response, positions))
            if retry:
                await self._retry_later(cluster, positions, retry)
        finally:
            self._validating_nodes.discard(node)
            self._wake_poll()

    def _apply_answers(
        self, response: OffsetForLeaderEpochResponse, positions: dict[TopicPartition, FetchPosition]
    ) -> set[TopicPartition]:
        """Validate the positions the leader answered for; returns those to ask again (an
        error, or no answer)."""
        retry: set[TopicPartition] = set()
        truncations: list[LogTruncation] = []
        answered: set[TopicPartition] = set()
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                requested = positions.get(tp)
                state = self._states.get(tp)
                if requested is None or state is None:
                    continue
                answered.add(tp)
                if p.error_code != ErrorCode.NONE:
                    # Kafka retries every error here (NOT_LEADER_OR_FOLLOWER,
                    # FENCED/UNKNOWN_LEADER_EPOCH, ...) after a metadata refresh.
                    log.info(
                        "offset validation error; retrying",
                        tp=str(tp),
                        error=ErrorCode.from_wire(p.error_code).name,
                    )
                    retry.add(tp)
                    continue
                outcome, truncation = state.complete_validation(
                    tp, requested, EpochEndOffset(p.leader_epoch, p.end_offset), self._reset
                )
                self._after_validation(tp, state, requested, outcome, p.end_offset)
                if truncation is not None:
                    truncations.append(truncation)
        retry.update(tp for tp in positions if tp not in answered)
        if truncations and self._truncation is None:
            self._truncation = log_truncation_error(truncations)
        return retry

    async def _retry_later(
        self,
        cluster: ClusterClient,
        positions: dict[TopicPartition, FetchPosition],
        retry: set[TopicPartition],
    ) -> None:
        cluster.request_update()
        self._wake_poll()  # the poll refreshes metadata meanwhile
        await trio.sleep(cluster.retry_backoff_ms / 1000)
        for tp in retry:
            state = self._states.get(tp)
            if state is not None and state.fetch_position() == positions[tp]:
                state.next_validation_ms = 0.0  # due again

    def _after_validation(
        self,
        tp: TopicPartition,
        state: PartitionState,
        requested: FetchPosition,
        outcome: Validation,
        end_offset: int,
    ) -> None:
        if outcome is Validation.DIVERGED:
            log.info(
                "Truncation detected; resetting offset to the first offset known to diverge",
                tp=str(tp),
                offset=requested.offset,
                offset_epoch=requested.offset_epoch,
                new_offset=state.position,
                new_epoch=state.offset_epoch,
            )
            self._after_seek(tp)
        elif outcome is Validation.RESET:
            log.info(
                "Truncation detected; resetting offset by auto.offset.reset",
                tp=str(tp),
                offset=requested.offset,
                offset_epoch=requested.offset_epoch,
                strategy=self._reset,
            )
            self._after_seek(tp)
        elif outcome is Validation.TRUNCATED:
            log.warning(
                "Truncation detected, but auto.offset.reset is none",
                tp=str(tp),
                offset=requested.offset,
                offset_epoch=requested.offset_epoch,
                end_offset=end_offset,
            )


def _epoch_request(positions: dict[TopicPartition, FetchPosition]) -> OffsetForLeaderEpochRequest:
    topics: dict[str, list[OffsetForLeaderPartition]] = {}
    for tp, pos in positions.items():
        topics.setdefault(tp.topic, []).append(
            OffsetForLeaderPartition(
                partition=tp.partition,
                leader_epoch=pos.offset_epoch,
                current_leader_epoch=pos.current_leader.epoch,
            )
        )
    return OffsetForLeaderEpochRequest(
        replica_id=-1,  # a consumer (KIP-320), not a follower
        topics=tuple(
            OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()
        ),
    )
