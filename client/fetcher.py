"""The consumer's fetching (Kafka's Fetcher), mixed into client.consumer.Consumer: one Fetch per
leader kept in flight while poll() works through the records already fetched (pipelining).

`_send_fetches` starts a Fetch to every leader that has fetchable partitions (a position, no
validation pending, nothing buffered) and none in flight; each answer's records wait in
`_completed` (client.fetched_records.CompletedFetch) until `_drain` hands them out. A fetch
begun before a seek or an assignment change (`_generation`) is dropped, and so are buffered
records whose partition moved since. OFFSET_OUT_OF_RANGE resets the position by
auto.offset.reset (or fails the partition's next poll when that is none); leadership errors
refresh metadata and fetch again from the new leader.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import structlog
import trio

from client.cluster import ClusterClient
from client.fetched_records import CompletedFetch, ConsumerRecord
from client.positions import PartitionState
from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.names import TopicPartition

log = structlog.get_logger("client.fetcher")

_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


class Fetcher:
    """Mixed into Consumer: needs the attributes below (Consumer.__init__ and ClientBase set
    them) and `_wake_poll`."""

    config: dict[str, Any]
    _states: dict[TopicPartition, PartitionState]
    _completed: deque[CompletedFetch]
    _buffered: set[TopicPartition]
    _fetching_nodes: set[int]
    _generation: int
    _reset: str
    _check_crcs: bool
    _nursery: trio.Nursery | None
    _cluster: ClusterClient | None
    _closed: bool
    _refresh_pending: bool = False
    """A `_refresh_metadata` task is waiting or refreshing."""

    def _wake_poll(self) -> None:
        raise NotImplementedError

    def _drain(self, limit: int) -> list[ConsumerRecord]:
        """Up to `limit` records of the completed fetches, in order; positions move past them."""
        out: list[ConsumerRecord] = []
        while self._completed and len(out) < limit:
            cf = self._completed[0]
            state = self._states.get(cf.tp)
            if state is None or state.position != cf.next_offset or state.awaiting_validation:
                # stale: sought or unassigned since it was fetched, or the leader changed and
                # the position must be validated first (Kafka drops these records too)
                self._completed.popleft()
                self._buffered.discard(cf.tp)
                continue
            try:
                used_up = cf.take(limit - len(out), out)
            except CorruptRecordBatchError as exc:
                self._completed.popleft()
                self._buffered.discard(cf.tp)
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"corrupt record batch in {cf.tp} after offset {state.position}: {exc}",
                ) from None
            if cf.next_offset != state.position:
                state.position = cf.next_offset
                state.offset_epoch = cf.last_epoch
            if used_up:
                self._completed.popleft()
                self._buffered.discard(cf.tp)
        return out

    def _send_fetches(self, cluster: ClusterClient) -> None:
        """Start a Fetch to every leader that has fetchable partitions and none in flight."""
        assert self._nursery is not None
        by_node: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        unknown = False
        leader_for = cluster.metadata.leader_for
        for tp, state in self._states.items():
            if state.position is None or state.awaiting_validation or tp in self._buffered:
                continue
            # _check_leaders made current_leader the metadata's leader unless that was stale
            leader = state.current_leader.leader
            if leader is None or leader != leader_for(tp.topic, tp.partition):
                unknown = True
                continue
            if leader not in self._fetching_nodes:
                by_node.setdefault(leader, {})[tp] = (state.position, state.current_leader.epoch)
        if unknown:
            cluster.request_update()
        wanted = unknown or cluster.update_requested() or cluster.needs_update()
        if wanted and not self._refresh_pending:
            # One refresh task at a time, waiting out the refresh backoff: poll() would
            # otherwise start one per wake-up, each returning at once and waking it again.
            self._refresh_pending = True
            self._nursery.start_soon(self._refresh_metadata, cluster)
        for node, parts in by_node.items():
            self._fetching_nodes.add(node)
            self._nursery.start_soon(self._fetch, node, parts, self._generation)

    async def _refresh_metadata(self, cluster: ClusterClient) -> None:
        try:
            await cluster.refresh_when_allowed()
        finally:
            self._refresh_pending = False
        self._wake_poll()

    def _drop_buffered(self, which: Any) -> None:
        self._completed = deque(cf for cf in self._completed if not which(cf.tp))
        self._buffered = {cf.tp for cf in self._completed}

    async def _fetch(
        self, node: int, parts: dict[TopicPartition, tuple[int, int]], generation: int
    ) -> None:
        """One Fetch of `parts` ({tp: (fetch offset, current leader epoch)}) from `node`."""
        cluster = self._cluster
        assert cluster is not None
        c = self.config
        request = _fetch_request(parts, c)
        try:
            try:
                response: FetchResponse = await cluster.send(
                    node, request, timeout_ms=c["request.timeout.ms"] + c["fetch.max.wait.ms"]
                )
            except KafkaError as exc:
                if self._closed:
                    return
                log.info("fetch failed", node=node, error=str(exc))
                cluster.drop(node)
                cluster.request_update()
                await trio.sleep(cluster.retry_backoff_ms / 1000)
                return
            if response.error_code:
                log.info("fetch refused", node=node, error=response.error_message)
                self._refused(parts, response)
                await trio.sleep(cluster.retry_backoff_ms / 1000)
                return
            if generation != self._generation:
                return
            self._handle_fetch(cluster, parts, response)
        finally:
            self._fetching_nodes.discard(node)
            self._wake_poll()

    def _refused(
        self, parts: dict[TopicPartition, tuple[int, int]], response: FetchResponse
    ) -> None:
        """A whole fetch refused for an authorization failure: raised by poll(), as Kafka's
        consumer raises TopicAuthorizationException (retrying cannot help)."""
        code = ErrorCode.from_wire(response.error_code)
        if code not in (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ):
            return
        for tp in parts:
            state = self._states.get(tp)
            if state is not None:
                state.error = KafkaError(code, response.error_message or code.name)

    def _handle_fetch(
        self,
        cluster: ClusterClient,
        parts: dict[TopicPartition, tuple[int, int]],
        response: FetchResponse,
    ) -> None:
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.index)
                state = self._states.get(tp)
                sent = parts.get(tp)
                if (
                    state is None
                    or sent is None
                    or state.position != sent[0]
                    or state.awaiting_validation  # the leader changed meanwhile
                ):
                    continue
                code = ErrorCode.from_wire(p.error_code)
                if code is ErrorCode.NONE:
                    state.high_watermark = p.high_watermark
                    state.log_start_offset = p.log_start_offset
                    if p.records:
                        self._completed.append(
                            CompletedFetch(tp, state.position, p.records, self._check_crcs)
                        )
                        self._buffered.add(tp)
                elif code in _LEADERSHIP_ERRORS and cluster.take_leader_hint(
                    tp.topic, tp.partition, p.current_leader, response.node_endpoints
                ):
                    log.info("leader moved; fetching from it", tp=str(tp), leader=p.current_leader)
                else:
                    self._fetch_error(cluster, tp, state, code, p.error_message)

    def _fetch_error(
        self,
        cluster: ClusterClient,
        tp: TopicPartition,
        state: PartitionState,
        code: ErrorCode,
        message: str | None,
    ) -> None:
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self._reset == "none":
                state.error = KafkaError(
                    code,
                    f"fetch offset {state.position} is out of range for partition {tp} "
                    "and auto.offset.reset is none",
                )
            else:
                log.info(
                    "offset out of range; resetting",
                    tp=str(tp),
                    offset=state.position,
                    strategy=self._reset,
                )
                state.request_reset(self._reset)
        elif code is ErrorCode.CORRUPT_MESSAGE:
            # As Kafka's consumer: raised, not retried (the same bytes would come back).
            state.error = KafkaError(
                code,
                f"Encountered corrupt message when fetching offset {state.position} for "
                f"topic-partition {tp}: {message or code.name}",
            )
        elif code in _LEADERSHIP_ERRORS or code.retriable:
            cluster.metadata.invalidate_leader(tp.topic, tp.partition)
            cluster.request_update()
        else:
            state.error = KafkaError(code, f"fetching {tp}: {message or code.name}")


def _fetch_request(parts: dict[TopicPartition, tuple[int, int]], c: dict[str, Any]) -> FetchRequest:
    topics: dict[str, list[FetchPartition]] = {}
    for tp, (offset, leader_epoch) in parts.items():
        topics.setdefault(tp.topic, []).append(
            FetchPartition(
                index=tp.partition,
                fetch_offset=offset,
                partition_max_bytes=c["max.partition.fetch.bytes"],
                # FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the leader disagrees
                current_leader_epoch=leader_epoch,
            )
        )
    return FetchRequest(
        max_wait_ms=c["fetch.max.wait.ms"],
        min_bytes=c["fetch.min.bytes"],
        max_bytes=c["fetch.max.bytes"],
        topics=tuple(FetchTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
        isolation_level=1 if c["isolation.level"] == "read_committed" else 0,
    )
