"""Incremental fetch sessions (KIP-227): the broker's session cache and the fetcher's handler.

Plain data only (no message classes): partitions are any hashable key (a TopicPartition, or
(topic id, partition)); a partition's request fields are a `PartitionRequest`, what a read
produced for it a `PartitionResult`. The Fetch handler maps its messages onto these.

Broker side (Kafka's FetchManager + FetchSessionCache):

    ctx = cache.new_context(session_id, epoch, fetch_data, forgotten, privileged=is_follower,
                            now_ms=now)
    if ctx.error_code: answer with ctx.error_code (top level), session id 0, no partitions
    read ctx.partitions() (in that order; an incremental session lists all its partitions)
    answer = ctx.complete(results, now_ms=now) -> error, session id, partitions to include

Request metadata rules (Kafka's FetchMetadata): epoch 0 is a full fetch that asks for a new
session (a non-zero session id in it is closed first); epoch -1 is a full fetch without one
(closing the named session); epoch > 0 continues session `session_id`, whose expected epoch
it must be (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH otherwise). An
incremental answer holds only partitions with something new: records, a changed HW or log
start offset, an error, a diverging epoch, a preferred read replica. Partitions that returned
records move to the end of the session's order, so that a big partition cannot starve the
rest under fetch.max.bytes.

The cache holds at most max.incremental.fetch.session.cache.slots (1000) sessions. When full,
a new session takes the slot of a session unused for 2 minutes, else of the least valuable
evictable one if the new session is worth more: followers' sessions ("privileged")
before consumers', then more partitions before fewer. Sessions younger than 2 minutes can be
evicted only by a follower's session, and only if they are consumers'.

Fetcher side (Kafka's FetchSessionHandler): `FetchSessionHandler.build(wanted)` gives the
session id, epoch, partitions to send (all on a full fetch; added or changed ones otherwise)
and partitions to forget; `handle_response(error_code, session_id)` moves to the next epoch,
or back to a full fetch after an error.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from broker.replica.leader import SessionClock
from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = (1 << 31) - 1
DEFAULT_MAX_SESSION_CACHE_SLOTS = 1000
"""max.incremental.fetch.session.cache.slots"""
DEFAULT_EVICTION_MS = 120_000
"""Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS."""

K = TypeVar("K", bound=Hashable)


def next_epoch(epoch: int) -> int:
    """The session epoch after `epoch` (Kafka's FetchMetadata.nextEpoch: wraps to 1)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return 1
    return epoch + 1


def is_full_fetch(epoch: int) -> bool:
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """One partition as a Fetch request carries it."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What reading one partition produced, as far as sessions care."""

    high_watermark: int
    log_start_offset: int
    records_size: int = 0
    error_code: int = 0
    diverging_epoch: bool = False
    preferred_read_replica: int = -1


@dataclass(slots=True)
class CachedPartition:
    request: PartitionRequest
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: PartitionResult) -> bool:
        """Whether an incremental answer must include the partition; remembers what it sent
        (an error forgets the HW, so the partition is sent again once the error is gone)."""
        respond = result.records_size > 0
        if self.high_watermark != result.high_watermark:
            respond = True
            self.high_watermark = result.high_watermark
        if self.log_start_offset != result.log_start_offset:
            respond = True
            self.log_start_offset = result.log_start_offset
        if result.preferred_read_replica >= 0 or result.diverging_epoch:
            respond = True
        if result.error_code != 0:
            respond = True
            self.high_watermark = -1
        return respond


@dataclass(slots=True, eq=False)
class FetchSession(Generic[K]):
    id: int
    privileged: bool
    partitions: dict[K, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int
    """The epoch the next request of this session must carry."""
    evictable_by_privileged: bool = False
    evictable_by_all: bool = False
    requests: dict[K, PartitionRequest] = field(default_factory=dict)
    """Each partition's request, in the order of `partitions` (kept beside it: listing the
    requests of a follower session of ~8,300 partitions per Fetch was a visible cost)."""
    ranks: dict[K, int] = field(default_factory=dict)
    """Each partition's place in the session order (larger is later)."""
    next_rank: int = 0
    # A follower's session reads only what may answer differently (broker.handlers.fetch):
    active: set[K] | None = None
    """The partitions to read at the next fetch; the others are quiet: their last answer was
    the idle one and nothing changed since. None until the first incremental fetch."""
    clock: SessionClock = field(default_factory=SessionClock)
    """The start of this session's latest fetch (quiet partitions' fetch time)."""
    change_mark: int = -1
    """Where in the purgatory's change journal this session has read up to."""
    next_full_read_ms: int = 0
    """When every partition is read again (what changes without a notification)."""
    membership: int = 0
    """Bumped whenever partitions join or leave the session: what a cache of its partition
    set (the Fetch handler's per-topic counts) compares."""

    def __post_init__(self) -> None:
        if len(self.requests) != len(self.partitions):
            self.requests = {k: c.request for k, c in self.partitions.items()}
        self.ranks = {k: i for i, k in enumerate(self.partitions)}
        self.next_rank = len(self.ranks)

    def rotate_to_end(self, keys: Iterable[K]) -> None:
        """Move `keys` to the end of the session order (partitions that returned records)."""
        for key in keys:
            self.partitions[key] = self.partitions.pop(key)
            self.requests[key] = self.requests.pop(key)
            self.ranks[key] = self.next_rank
            self.next_rank += 1

    # -- a follower session's reads -----------------------------------------------------------

    def wake(self, keys: Iterable[K]) -> list[K]:
        """Make the session's partitions among `keys` active; those that were quiet (all of
        them at the first call)."""
        active = self.active
        if active is None:
            self.active = set(self.partitions)
            return list(self.partitions)
        partitions = self.partitions
        woken = [k for k in dict.fromkeys(keys) if k in partitions and k not in active]
        active.update(woken)
        return woken

    def wake_all(self) -> list[K]:
        """Make every partition active; those that were quiet."""
        active = self.active or set()
        woken = [k for k in self.partitions if k not in active]
        self.active = set(self.partitions)
        return woken

    def settle(self, key: K) -> None:
        """`key` gave the idle answer: quiet until something wakes it."""
        if self.active is not None:
            self.active.discard(key)

    def to_read(self) -> list[tuple[K, PartitionRequest]]:
        """The active partitions with their requests, in session order."""
        active = self.partitions if self.active is None else self.active
        ranks = self.ranks
        return [(k, self.requests[k]) for k in sorted(active, key=ranks.__getitem__)]

    @property
    def size(self) -> int:
        return len(self.partitions)

    def eviction_key(self) -> tuple[bool, int, int]:
        """Smaller is less valuable: consumers before followers, fewer partitions first."""
        return (self.privileged, self.size, self.id)

    def update(
        self, fetch_data: Mapping[K, PartitionRequest], forgotten: Iterable[K]
    ) -> tuple[list[K], list[K], list[K]]:
        """Apply an incremental request: (added, updated, removed)."""
        added: list[K] = []
        updated: list[K] = []
        removed: list[K] = []
        for key, request in fetch_data.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(request)
                self.ranks[key] = self.next_rank
                self.next_rank += 1
                added.append(key)
            else:
                cached.request = request
                updated.append(key)
            self.requests[key] = request
        for key in forgotten:
            if self.partitions.pop(key, None) is not None:
                del self.requests[key]
                del self.ranks[key]
                if self.active is not None:
                    self.active.discard(key)
                removed.append(key)
        if added or removed:
            self.membership += 1
        return added, updated, removed


class ContextKind(Enum):
    FULL = "full"
    SESSIONLESS = "sessionless"
    INCREMENTAL = "incremental"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class FetchAnswer(Generic[K]):
    """The session part of a Fetch response: top-level error, session id, and which of the
    partitions read go into the response (in order)."""

    error_code: ErrorCode
    session_id: int
    partitions: list[K]


class FetchContext(Generic[K]):
    def __init__(
        self,
        cache: FetchSessionCache[K],
        kind: ContextKind,
        *,
        fetch_data: Mapping[K, PartitionRequest] | None = None,
        session: FetchSession[K] | None = None,
        request_epoch: int = INITIAL_EPOCH,
        privileged: bool = False,
        error_code: ErrorCode = ErrorCode.NONE,
    ) -> None:
        self.cache = cache
        self.kind = kind
        self.fetch_data = dict(fetch_data or {})
        self.session = session
        self.request_epoch = request_epoch
        self.privileged = privileged
        self.error_code = error_code
        self.removed: list[K] = []
        """Partitions this request removed from its session (forgotten)."""

    def partitions(self) -> list[tuple[K, PartitionRequest]]:
        """The partitions to read for this request, in order."""
        if self.kind is ContextKind.INCREMENTAL:
            assert self.session is not None
            return list(self.session.requests.items())
        return list(self.fetch_data.items())

    def complete(self, results: Mapping[K, PartitionResult], *, now_ms: int) -> FetchAnswer[K]:
        if self.kind is ContextKind.ERROR:
            return FetchAnswer(self.error_code, INVALID_SESSION_ID, [])
        if self.kind is ContextKind.SESSIONLESS:
            return FetchAnswer(ErrorCode.NONE, INVALID_SESSION_ID, list(results))
        if self.kind is ContextKind.FULL:
            cached = {
                key: CachedPartition(
                    self.fetch_data[key], result.high_watermark, result.log_start_offset
                )
                for key, result in results.items()
                if key in self.fetch_data
            }
            session_id = self.cache.maybe_create_session(now_ms, self.privileged, cached)
            return FetchAnswer(ErrorCode.NONE, session_id, list(results))
        session = self.session
        assert session is not None
        if session.epoch != next_epoch(self.request_epoch) or (
            self.cache.get(session.id) is not session
        ):
            # Another request of this session completed (or it was evicted) meanwhile.
            return FetchAnswer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, INVALID_SESSION_ID, [])
        included: list[K] = []
        rotate: list[K] = []
        for key, result in results.items():
            cached = session.partitions.get(key)
            if cached is None or not cached.must_respond(result):
                continue
            included.append(key)
            if result.records_size > 0:
                rotate.append(key)
        session.rotate_to_end(rotate)
        return FetchAnswer(ErrorCode.NONE, session.id, included)


class FetchSessionCache(Generic[K]):
    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_SESSION_CACHE_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        if max_entries < 0:
            raise ValueError(
                f"max.incremental.fetch.session.cache.slots must be >= 0, got {max_entries}"
            )
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession[K]] = {}
        self.evictions = 0
        """IncrementalFetchSessionEvictionsPerSec, as a count."""

    # -- metrics -----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """NumIncrementalFetchSessions."""
        return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        """NumIncrementalFetchPartitionsCached."""
        return sum(s.size for s in self._sessions.values())

    # -- the request entry point -------------------------------------------------------------

    def new_context(
        self,
        session_id: int,
        epoch: int,
        fetch_data: Mapping[K, PartitionRequest],
        forgotten: Iterable[K] = (),
        *,
        privileged: bool,
        now_ms: int,
    ) -> FetchContext[K]:
        """Kafka's FetchManager.newContext. `privileged` is True for followers."""
        if epoch < FINAL_EPOCH or session_id < 0:
            return FetchContext(
                self, ContextKind.ERROR, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH
            )
        if is_full_fetch(epoch):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            kind = ContextKind.SESSIONLESS if epoch == FINAL_EPOCH else ContextKind.FULL
            return FetchContext(self, kind, fetch_data=fetch_data, privileged=privileged)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(
                self, ContextKind.ERROR, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            )
        if session.epoch != epoch:
            return FetchContext(
                self, ContextKind.ERROR, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH
            )
        _, _, removed = session.update(fetch_data, forgotten)
        if not session.partitions:
            self.remove(session_id)
            context = FetchContext(self, ContextKind.SESSIONLESS, fetch_data=fetch_data)
        else:
            self.touch(session, now_ms)
            session.epoch = next_epoch(session.epoch)
            # The request's own partitions travel with the context: a follower's session
            # reads them whatever it thinks of them (broker.handlers.fetch).
            context = FetchContext(
                self,
                ContextKind.INCREMENTAL,
                fetch_data=fetch_data,
                session=session,
                request_epoch=epoch,
            )
        context.removed = removed
        return context

    # -- the cache ---------------------------------------------------------------------------

    def get(self, session_id: int) -> FetchSession[K] | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession[K] | None:
        return self._sessions.pop(session_id, None)

    def touch(self, session: FetchSession[K], now_ms: int) -> None:
        """Mark the session used; its eviction eligibility is decided here, as Kafka does."""
        session.last_used_ms = now_ms
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old

    def maybe_create_session(
        self, now_ms: int, privileged: bool, partitions: dict[K, CachedPartition]
    ) -> int:
        """A new session's id, or 0 when there is no room for it."""
        if len(self._sessions) >= self.max_entries and not self._try_evict(
            privileged, len(partitions), now_ms
        ):
            return INVALID_SESSION_ID
        session = FetchSession(
            id=self._new_session_id(),
            privileged=privileged,
            partitions=partitions,
            creation_ms=now_ms,
            last_used_ms=now_ms,
            epoch=next_epoch(INITIAL_EPOCH),
        )
        self._sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False
        stalest = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        weakest = min(candidates, key=FetchSession.eviction_key)
        # The new session has no id yet and sorts as id 0: an equal one is not evicted.
        if (privileged, size, 0) < weakest.eviction_key():
            return False
        self._evict(weakest)
        return True

    def _evict(self, session: FetchSession[K]) -> None:
        del self._sessions[session.id]
        self.evictions += 1

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id


# -- the fetcher's side ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequestData(Generic[K]):
    session_id: int
    epoch: int
    to_send: dict[K, PartitionRequest]
    forgotten: list[K]

    @property
    def is_full(self) -> bool:
        return is_full_fetch(self.epoch)


@dataclass(slots=True)
class FetchSessionHandler(Generic[K]):
    """One per source broker: what goes into the next Fetch (Kafka's FetchSessionHandler)."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    session_partitions: dict[K, PartitionRequest] = field(default_factory=dict)

    def build(
        self, wanted: Mapping[K, PartitionRequest], changed: Iterable[K] | None = None
    ) -> FetchRequestData[K]:
        """The request for the partitions `wanted` now (with their current positions).
        `changed`, when given, names every partition that may have been added, removed or
        given another request since the last build: an incremental request then costs what
        changed, not the session's size (a full one still lists everything)."""
        if is_full_fetch(self.epoch):
            self.session_partitions = dict(wanted)
            return FetchRequestData(self.session_id, self.epoch, dict(wanted), [])
        previous = self.session_partitions
        if changed is None:
            self.session_partitions = dict(wanted)
            # `is` first: a fetcher keeps each partition's request object while its position
            # stays, so thousands of idle partitions are skipped without comparing fields.
            to_send = {
                k: v for k, v in wanted.items() if (p := previous.get(k)) is not v and p != v
            }
            forgotten = [k for k in previous if k not in wanted]
            return FetchRequestData(self.session_id, self.epoch, to_send, forgotten)
        to_send = {}
        forgotten = []
        for k in changed:
            v = wanted.get(k)
            p = previous.get(k)
            if v is None:
                if p is not None:
                    del previous[k]
                    forgotten.append(k)
            elif p is not v:
                previous[k] = v
                if p != v:
                    to_send[k] = v
        return FetchRequestData(self.session_id, self.epoch, to_send, forgotten)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """False when the response cannot be used as a session answer (the next fetch is
        full: a new session, or the same id with epoch 0 to close and recreate it)."""
        if error_code != 0:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif is_full_fetch(self.epoch):
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True
