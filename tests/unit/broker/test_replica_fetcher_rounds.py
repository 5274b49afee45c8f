"""broker.fetcher.ReplicaFetcher: a fetch round costs what changed, not what is followed.

After the first (full) round, a round looks only at the partitions that were followed,
forgotten, answered or delayed since the last one, and sends only the requests that changed
(KIP-227's incremental fetch, built incrementally too); every FULL_SCAN_MS it looks at
everything once more. Before, each round walked every followed partition (a quarter of a
25,000-partition broker's CPU during a failover, bench/run_failover.py --profile-dir)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from broker.fetcher import FULL_SCAN_MS, FetcherConfig, ReplicaFetcher, SourceBroker
from broker.replica.follower import FollowerFetchState
from protocol.messages.fetch import (
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.names import TopicPartition

FOLLOWED = 1000


@dataclass
class Log:
    log_end_offset: int = 0
    log_start_offset: int = 0

    def latest_epoch(self) -> int:
        return 0

    def append_as_follower(self, records: bytes) -> None:
        self.log_end_offset += len(records)  # one "record" per byte, for the test


@dataclass
class State:
    is_leader: bool = False

    def update_local_leo(self, leo: int) -> None:
        pass

    def update_high_watermark_from_leader(self, hw: int, log_start: int) -> bool:
        return False


@dataclass
class Partition:
    log: Log = field(default_factory=Log)
    state: State = field(default_factory=State)


class Partitions:
    """The PartitionManager as the fetcher reads it, counting lookups."""

    def __init__(self, tps: list[TopicPartition]) -> None:
        self.hosted = {tp: Partition() for tp in tps}
        self.lookups = 0

    def get(self, tp: TopicPartition) -> Partition | None:
        self.lookups += 1
        return self.hosted.get(tp)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def monotonic_ms(self) -> int:
        return self.now


class Leader:
    """The transport: records each Fetch and answers with what the test queued."""

    def __init__(self) -> None:
        self.requests: list[FetchRequest] = []
        self.answer: dict[TopicPartition, bytes] = {}

    async def send(self, host: str, port: int, request: Any, timeout_s: float) -> FetchResponse:
        self.requests.append(request)
        parts: dict[str, list[FetchPartitionResponse]] = {}
        for tp, records in self.answer.items():
            parts.setdefault(tp.topic, []).append(
                FetchPartitionResponse(index=tp.partition, error_code=0, records=records)
            )
        self.answer = {}
        return FetchResponse(
            topics=tuple(FetchTopicResponse(name=n, partitions=tuple(p)) for n, p in parts.items()),
            session_id=77,
        )


@dataclass
class Manager:
    partitions: Partitions
    transport: Leader
    clock: Clock = field(default_factory=Clock)
    config: FetcherConfig = field(default_factory=lambda: FetcherConfig(node_id=2))
    failpoints: None = None
    topic_metrics: None = None
    transport_factory: None = None

    def on_high_watermark(self, tp: TopicPartition) -> None:
        pass


def _sent(request: FetchRequest) -> dict[TopicPartition, int]:
    return {TopicPartition(t.name, p.index): p.fetch_offset for t in request.topics
            for p in t.partitions}  # fmt: skip


def _fetcher() -> tuple[ReplicaFetcher, Manager, list[TopicPartition]]:
    tps = [TopicPartition(f"t{i % 10}", i) for i in range(FOLLOWED)]
    manager = Manager(Partitions(tps), Leader())
    fetcher = ReplicaFetcher(manager, SourceBroker(1, "127.0.0.1", 1), 0)  # type: ignore[arg-type]
    for tp in tps:
        fetcher.follow(tp, FollowerFetchState("id", 0, fetch_offset=0, last_fetched_epoch=0))
    return fetcher, manager, tps


def test_an_idle_round_looks_at_nothing_and_sends_nothing() -> None:
    fetcher, manager, _ = _fetcher()
    trio.run(fetcher._fetch_once)
    assert len(_sent(manager.transport.requests[0])) == FOLLOWED  # the full fetch
    manager.partitions.lookups = 0
    trio.run(fetcher._fetch_once)
    trio.run(fetcher._fetch_once)
    last = manager.transport.requests[-1]
    assert last.session_id == 77 and last.session_epoch == 2
    assert _sent(last) == {} and last.forgotten_topics_data == ()
    assert manager.partitions.lookups == 0


def test_only_what_changed_is_looked_at_and_sent() -> None:
    fetcher, manager, tps = _fetcher()
    trio.run(fetcher._fetch_once)
    manager.transport.answer = {tps[3]: b"abc"}
    trio.run(fetcher._fetch_once)  # answered: tps[3] moved to offset 3
    fetcher.follow(tps[5], FollowerFetchState("id", 1, fetch_offset=9, last_fetched_epoch=0))
    fetcher.forget(tps[7])
    manager.partitions.lookups = 0
    trio.run(fetcher._fetch_once)
    last = manager.transport.requests[-1]
    assert _sent(last) == {tps[3]: 3, tps[5]: 9}
    assert [(f.topic, f.partitions) for f in last.forgotten_topics_data] == [("t7", (7,))]
    assert manager.partitions.lookups == 2


def test_every_partition_is_looked_at_again_after_the_full_scan_interval() -> None:
    """A follower's log start offset also moves by retention, which marks nothing."""
    fetcher, manager, tps = _fetcher()
    trio.run(fetcher._fetch_once)
    manager.partitions.hosted[tps[4]].log.log_start_offset = 0  # unchanged: not re-sent
    manager.partitions.hosted[tps[6]].log.log_start_offset = 5
    trio.run(fetcher._fetch_once)
    assert _sent(manager.transport.requests[-1]) == {}
    manager.clock.now += FULL_SCAN_MS
    manager.partitions.lookups = 0
    trio.run(fetcher._fetch_once)
    last = manager.transport.requests[-1]
    assert _sent(last) == {tps[6]: 0}
    assert last.topics[0].partitions[0].log_start_offset == 5
    assert manager.partitions.lookups == FOLLOWED


def test_what_a_round_without_requests_saw_reaches_the_next_request() -> None:
    """A round whose partitions were all forgotten sends nothing; the forgets still go out with
    the next request (else the leader's session kept them until the next full scan)."""
    fetcher, manager, tps = _fetcher()
    trio.run(fetcher._fetch_once)  # full

    async def idle_round() -> None:
        with trio.move_on_after(5):
            await fetcher._fetch_once()  # nothing ready: it idles until woken or 5 s

    for tp in tps:
        fetcher.forget(tp)
    trio.run(idle_round, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(manager.transport.requests) == 1
    fetcher.follow(tps[0], FollowerFetchState("id", 0, fetch_offset=0, last_fetched_epoch=0))
    trio.run(fetcher._fetch_once)
    last = manager.transport.requests[-1]
    forgotten = {
        TopicPartition(f.topic, p) for f in last.forgotten_topics_data for p in f.partitions
    }
    assert forgotten == set(tps[1:])
    assert _sent(last) == {}  # tps[0] is back with the request the session holds
