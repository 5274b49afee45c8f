"""Fetch (Kafka's KafkaApis.handleFetchRequest): consumers and followers read the partitions
this broker leads, in KIP-227 fetch sessions; a fetch with less than `fetch.min.bytes` waits in
the fetch purgatory (broker.purgatory.long_poll) for appends, up to its `max_wait_ms`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import trio

from broker.handlers.fetch_totals import SessionFetchTotals
from broker.handlers.leader_hints import HINTED_ERRORS, LeaderHints
from broker.handlers.partition_reads import PartitionReader, summary
from broker.handlers.router import Handler
from broker.metrics import BrokerTopicMetrics, awaiting_remote
from broker.metrics.topics import NOT_HOSTED
from broker.purgatory import FetchPurgatory, long_poll
from broker.replica.fetch_session import (
    ContextKind,
    FetchSession,
    FetchSessionCache,
    PartitionRequest,
    PartitionResult,
)
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.fetch import (
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.messages.quorum_common import NodeEndpoint
from protocol.names import TopicPartition

Wanted = list[tuple[TopicPartition, PartitionRequest]]
"""The partitions a fetch reads, in its session's order."""
FULL_READ_MS = 5_000
"""How often a follower's fetch session reads all its partitions, quiet ones included."""


DeniedReads = Callable[[ConnectionInfo, list[str]], list[str]]
"""(connection, topics) -> those its principal may not READ."""


@dataclass(slots=True)
class _Reads:
    """What one fetch has read so far."""

    results: dict[TopicPartition, FetchPartitionResponse] = field(default_factory=dict)
    summaries: dict[TopicPartition, PartitionResult] = field(default_factory=dict)
    """What the fetch session compares of each answer."""
    total: int = 0
    """Record bytes in `results`."""
    errors: bool = False
    """Some partition failed or diverged: the fetch answers at once."""

    def add(self, more: _Reads) -> None:
        """`more` read some partitions again, counting the bytes kept of the others."""
        self.results.update(more.results)
        self.summaries.update(more.summaries)
        self.total = more.total
        self.errors = self.errors or more.errors


class FetchHandler:
    def __init__(
        self,
        *,
        reader: PartitionReader,
        purgatory: FetchPurgatory,
        sessions: FetchSessionCache[TopicPartition],
        fetch_max_bytes: int,
        topic_metrics: BrokerTopicMetrics | None = None,
        leader_hints: LeaderHints | None = None,
        denied_reads: DeniedReads | None = None,
    ) -> None:
        self.reader = reader
        self.denied_reads = denied_reads
        """With an authorizer: the topics of a consumer's fetch session it may not READ (an
        incremental fetch names none of them, yet reads them all)."""
        self.leader_hints = leader_hints
        """KIP-951: consumers' partitions answered NOT_LEADER_OR_FOLLOWER name the leader."""
        self.purgatory = purgatory
        self.sessions = sessions
        self.fetch_max_bytes = fetch_max_bytes
        """fetch.max.bytes: the response budget, whatever the request asks."""
        self.topic_metrics = topic_metrics
        """BytesOut per consumer fetch, ReplicationBytesOut per follower fetch; Total/Failed
        FetchRequests per partition of every fetch."""
        self.session_totals = (
            SessionFetchTotals(topic_metrics, sessions) if topic_metrics is not None else None
        )
        """TotalFetchRequests of followers' incremental fetches (counted per session)."""

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {ApiKey.FETCH: self.fetch}

    async def fetch(self, request: FetchRequest, conn: ConnectionInfo) -> FetchResponse:
        follower = request.replica_id >= 0
        fetch_data = {
            TopicPartition(t.name, p.index): PartitionRequest(
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
            )
            for t in request.topics
            for p in t.partitions
        }
        forgotten = [
            TopicPartition(f.topic, i) for f in request.forgotten_topics_data for i in f.partitions
        ]
        context = self.sessions.new_context(
            request.session_id,
            request.session_epoch,
            fetch_data,
            forgotten,
            privileged=follower,
            now_ms=self.reader.partitions.clock.monotonic_ms(),
        )
        if context.error_code != ErrorCode.NONE:
            return FetchResponse(
                error_code=int(context.error_code),
                error_message=f"fetch session {request.session_id} at epoch "
                f"{request.session_epoch}: {context.error_code.name}",
            )
        if follower and context.removed:
            # A partition the follower no longer fetches in this session is no longer quiet
            # in it: its times stop at the session's last fetch (else it would count as
            # caught up for as long as the session lives, holding the HW and the ISR).
            self.reader.fold_quiet(context.removed, request.replica_id)
        session = context.session
        if follower and context.kind is ContextKind.INCREMENTAL and session is not None:
            reads = await self._read_changes(request, session, context.fetch_data)
            if self.session_totals is not None:
                now_ms = self.reader.partitions.clock.monotonic_ms()
                self.session_totals.fetched(session, now_ms)
        else:
            wanted = context.partitions()
            denied = self._denied(wanted, conn) if not follower else frozenset()
            if denied:
                # The others are read (and waited for) as usual; none left: answered at once.
                readable = [(tp, p) for tp, p in wanted if tp.topic not in denied]
                reads = await self._read_and_wait(request, readable) if readable else _Reads()
                reads = _with_refusals(reads, wanted, denied)
            else:
                reads = await self._read_and_wait(request, wanted)
        if self.topic_metrics is not None and reads.total:
            self._count_bytes_out(follower, reads.total, reads.results)
        answer = context.complete(
            reads.summaries, now_ms=self.reader.partitions.clock.monotonic_ms()
        )
        endpoints: tuple[NodeEndpoint, ...] = ()
        if reads.errors and not follower and self.leader_hints is not None:
            endpoints = self._hint_leaders(reads.results, conn.listener)
        return FetchResponse(
            topics=_by_topic(answer.partitions, reads.results),
            error_code=int(answer.error_code),
            session_id=answer.session_id,
            node_endpoints=endpoints,
        )

    def _denied(self, wanted: Wanted, conn: ConnectionInfo) -> frozenset[str]:
        """The topics of a consumer's fetch (its whole session: an incremental fetch names
        none of them, yet reads them all) its principal may not READ: answered
        TOPIC_AUTHORIZATION_FAILED per partition, as Kafka's handleFetchRequest."""
        if self.denied_reads is None:
            return frozenset()
        return frozenset(self.denied_reads(conn, sorted({tp.topic for tp, _ in wanted})))

    def _hint_leaders(
        self, results: dict[TopicPartition, FetchPartitionResponse], listener: str
    ) -> tuple[NodeEndpoint, ...]:
        """Name the current leader in each result whose error calls for it (KIP-951); the
        endpoints of those leaders."""
        hints = self.leader_hints
        assert hints is not None
        leaders = set()
        for tp, result in results.items():
            if result.error_code in HINTED_ERRORS:
                leader = hints.current_leader(tp)
                results[tp] = replace(result, current_leader=leader)
                leaders.add(leader.leader_id)
        return hints.endpoints(leaders, listener)

    async def _read_and_wait(self, request: FetchRequest, wanted: Wanted) -> _Reads:
        """Read `wanted`, then, while short of `min_bytes` with no error, wait in the purgatory
        and read again the partitions appended to meanwhile."""
        deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
        reads = self._read(request, wanted)

        def satisfied() -> bool:
            return reads.total >= request.min_bytes or reads.errors or request.max_wait_ms <= 0

        def reread(positions: list[int]) -> None:
            again = [wanted[i] for i in positions]
            kept = reads.total - sum(len(reads.results[tp].records) for tp, _ in again)
            reads.add(self._read(request, again, used=kept))

        # Counted before the wait, as Kafka's fetchMessages: a fetch cancelled in its long poll
        # (the client gone, a shutdown) was still a fetch.
        self._count_fetched(reads.results)
        await long_poll(self.purgatory, [tp for tp, _ in wanted], deadline, satisfied, reread)
        return reads

    def _count_fetched(self, results: Mapping[TopicPartition, FetchPartitionResponse]) -> None:
        """TotalFetchRequestsPerSec: every partition of this fetch once (rereads in the long
        poll are not fetches), as Kafka's fetchMessages; partitions not hosted here not."""
        if self.topic_metrics is None:
            return
        per_topic: dict[str, int] = {}
        for tp, result in results.items():
            if result.error_code != NOT_HOSTED:
                per_topic[tp.topic] = per_topic.get(tp.topic, 0) + 1
        self.topic_metrics.fetched(per_topic)

    async def _read_changes(
        self,
        request: FetchRequest,
        session: FetchSession[TopicPartition],
        requested: Mapping[TopicPartition, PartitionRequest],
    ) -> _Reads:
        """A follower's incremental fetch reads only what may answer differently from last
        time: the partitions it sent (their position moved), those notified since its last
        fetch (an append, a HW, ISR or leadership change: the purgatory's journal) and those
        whose last answer was not the idle one. The others are quiet: the follower was at our
        LEO and nothing changed, so the answer would be the idle one, which an incremental
        answer leaves out anyway. Every FULL_READ_MS all are read (a log start offset moved
        by retention notifies no one). Then the long poll, woken by the journal too. A fetch
        costs what changed; before, every fetch walked the whole session (8,300 partitions
        per follower at 25,000), and so did its watch of the purgatory."""
        purgatory = self.purgatory
        replica = request.replica_id
        now = self.reader.partitions.clock.monotonic_ms()
        changes = purgatory.changed_since(session.change_mark)
        session.change_mark = purgatory.mark
        if changes is None or now >= session.next_full_read_ms:
            session.next_full_read_ms = now + FULL_READ_MS
            woken = session.wake_all()
        else:
            changes.extend(requested)
            woken = session.wake(changes)
        # Quiet until now means caught up at the last fetch's start: recorded before the
        # session's clock moves to this fetch (FollowerState.quiet).
        self.reader.fold_quiet(woken, replica)
        session.clock.ms = now
        reads = self._read(request, session.to_read(), session=session)
        deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
        while not (
            reads.total >= request.min_bytes
            or reads.errors
            or request.max_wait_ms <= 0
            or trio.current_time() >= deadline
            or purgatory.closed
        ):
            changed = purgatory.next_change()
            if purgatory.mark == session.change_mark:
                if not changed.is_set():
                    awaiting_remote()  # RemoteTimeMs: the long poll
                with trio.move_on_at(deadline):
                    await changed.wait()
                continue
            changes = purgatory.changed_since(session.change_mark)
            session.change_mark = purgatory.mark
            partitions = session.partitions
            touched = [
                tp
                for tp in (partitions if changes is None else dict.fromkeys(changes))
                if tp in partitions
            ]
            if not touched:
                continue
            # Those that were quiet were so until this fetch's start: the session's clock.
            self.reader.fold_quiet(session.wake(touched), replica)
            again = sorted(touched, key=session.ranks.__getitem__)
            gone = sum(len(reads.results[tp].records) for tp in again if tp in reads.results)
            rereads = [(tp, session.requests[tp]) for tp in again]
            reads.add(self._read(request, rereads, reads.total - gone, session))
        return reads

    def _read(
        self,
        request: FetchRequest,
        wanted: Wanted,
        used: int = 0,
        session: FetchSession[TopicPartition] | None = None,
    ) -> _Reads:
        """Read `wanted`; `used` bytes of the response budget are taken by partitions read
        before (and count in the returned total). With a follower's `session`, a partition
        that gives the idle answer goes quiet in it."""
        budget = min(request.max_bytes, self.fetch_max_bytes)
        reads = _Reads(total=used)
        follower = request.replica_id >= 0
        quiet = session.clock if session is not None else None
        for tp, part in wanted:
            if follower:
                idle = self.reader.idle_follower_read(tp, request.replica_id, part, quiet)
                if idle is not None:
                    # Nothing to read, nothing changed: the same answer as last time.
                    reads.results[tp] = idle.response
                    reads.summaries[tp] = idle.summary
                    if session is not None:
                        session.settle(tp)
                    continue
                result = self.reader.read_follower(
                    tp,
                    request.replica_id,
                    part,
                    min(part.max_bytes, budget - reads.total),
                    reads.total == 0,
                )
            else:
                result = self.reader.read(
                    tp,
                    part.fetch_offset,
                    min(part.max_bytes, budget - reads.total),
                    min_one=reads.total == 0,
                    replica=False,
                    current_leader_epoch=part.current_leader_epoch,
                )
            reads.total += len(result.records)
            if result.error_code and self.topic_metrics is not None:
                self.topic_metrics.fetch_read(tp.topic, result.error_code)
            reads.errors = (
                reads.errors or result.error_code != 0 or result.diverging_epoch is not None
            )
            reads.results[tp] = result
            reads.summaries[tp] = summary(result)
        return reads

    def _count_bytes_out(
        self, follower: bool, total: int, results: Mapping[TopicPartition, FetchPartitionResponse]
    ) -> None:
        """ReplicationBytesOutPerSec for a follower (one inc), BytesOutPerSec per topic for a
        consumer (a consumer's fetch names few partitions)."""
        assert self.topic_metrics is not None
        if follower:
            self.topic_metrics.replication_bytes_out.inc(total)
            return
        by_topic: dict[str, int] = {}
        for tp, result in results.items():
            if result.records:
                by_topic[tp.topic] = by_topic.get(tp.topic, 0) + len(result.records)
        for topic, size in by_topic.items():
            self.topic_metrics.sent_to_consumer(topic, size)


def _with_refusals(reads: _Reads, wanted: Wanted, denied: frozenset[str]) -> _Reads:
    """`reads` with the partitions of the `denied` topics answered TOPIC_AUTHORIZATION_FAILED,
    all in `wanted`'s order (the fetch session's)."""
    results: dict[TopicPartition, FetchPartitionResponse] = {}
    summaries: dict[TopicPartition, PartitionResult] = {}
    for tp, _ in wanted:
        if tp.topic in denied:
            results[tp] = FetchPartitionResponse(
                index=tp.partition,
                error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                error_message=f"Not authorized to access topics: [{tp.topic}]",
            )
            summaries[tp] = summary(results[tp])
        else:
            results[tp], summaries[tp] = reads.results[tp], reads.summaries[tp]
    return _Reads(results, summaries, reads.total, reads.errors)


def _by_topic(
    partitions: list[TopicPartition], results: Mapping[TopicPartition, FetchPartitionResponse]
) -> tuple[FetchTopicResponse, ...]:
    """The answers of `partitions`, in that order. Consecutive partitions of one topic share a
    topic entry (as Kafka's FetchResponse builds it); each entry's tuple is built once (it was
    re-built per partition)."""
    topics: list[FetchTopicResponse] = []
    name = ""  # no topic has an empty name
    parts: list[FetchPartitionResponse] = []
    for tp in partitions:
        if tp.topic != name:
            if parts:
                topics.append(FetchTopicResponse(name=name, partitions=tuple(parts)))
            name, parts = tp.topic, []
        parts.append(results[tp])
    if parts:
        topics.append(FetchTopicResponse(name=name, partitions=tuple(parts)))
    return tuple(topics)
