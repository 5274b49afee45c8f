"""broker.replica.fetch_session: KIP-227 session cache (create, increment, forget, bad epochs,
eviction) and the fetcher-side handler, talking to each other."""

from __future__ import annotations

import random

import pytest

from broker.replica.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    MAX_EPOCH,
    ContextKind,
    FetchSessionCache,
    FetchSessionHandler,
    PartitionRequest,
    PartitionResult,
    next_epoch,
)
from protocol.errors import ErrorCode
from protocol.names import TopicPartition

T0 = 10_000_000
P0, P1, P2 = (TopicPartition("t", i) for i in range(3))


def req(offset: int, max_bytes: int = 1 << 20) -> PartitionRequest:
    return PartitionRequest(fetch_offset=offset, max_bytes=max_bytes, current_leader_epoch=3)


def res(hw: int, log_start: int = 0, size: int = 0, error: int = 0, **kw) -> PartitionResult:
    return PartitionResult(hw, log_start, records_size=size, error_code=error, **kw)


def cache(**kw) -> FetchSessionCache[TopicPartition]:
    return FetchSessionCache(rng=random.Random(7), **kw)


def open_session(
    c: FetchSessionCache[TopicPartition],
    partitions: dict[TopicPartition, PartitionRequest],
    *,
    privileged: bool = True,
    now: int = T0,
) -> int:
    ctx = c.new_context(
        INVALID_SESSION_ID, INITIAL_EPOCH, partitions, privileged=privileged, now_ms=now
    )
    assert ctx.kind is ContextKind.FULL
    answer = ctx.complete({tp: res(0) for tp in partitions}, now_ms=now)
    assert answer.error_code == ErrorCode.NONE
    assert answer.partitions == list(partitions)
    return answer.session_id


@pytest.mark.parametrize(
    ("epoch", "expected"), [(0, 1), (1, 2), (MAX_EPOCH, 1), (-1, FINAL_EPOCH), (-5, FINAL_EPOCH)]
)
def test_next_epoch(epoch: int, expected: int) -> None:
    assert next_epoch(epoch) == expected


def test_full_fetch_creates_session_then_incremental_sends_only_news() -> None:
    c = cache()
    sid = open_session(c, {P0: req(0), P1: req(0), P2: req(0)})
    assert sid != INVALID_SESSION_ID and c.size == 1 and c.total_partitions == 3
    assert c.get(sid).epoch == 1
    ctx = c.new_context(sid, 1, {}, privileged=True, now_ms=T0 + 1)
    assert ctx.kind is ContextKind.INCREMENTAL
    assert [tp for tp, _ in ctx.partitions()] == [P0, P1, P2]
    answer = ctx.complete(
        {P0: res(0), P1: res(5, size=100), P2: res(0, log_start=2)}, now_ms=T0 + 1
    )
    assert answer.session_id == sid and answer.partitions == [P1, P2]
    # P1 sent records: it moves to the end of the session's order.
    assert [tp for tp, _ in c.get(sid).partitions.items()] == [P0, P2, P1]
    assert c.get(sid).epoch == 2


@pytest.mark.parametrize(
    ("result", "included"),
    [
        (res(0), False),  # nothing new
        (res(0, size=1), True),  # records
        (res(4), True),  # HW moved
        (res(0, log_start=1), True),  # log start moved
        (res(0, error=int(ErrorCode.NOT_LEADER_OR_FOLLOWER)), True),
        (res(0, diverging_epoch=True), True),
        (res(0, preferred_read_replica=2), True),
    ],
)
def test_incremental_inclusion_rules(result: PartitionResult, included: bool) -> None:
    c = cache()
    sid = open_session(c, {P0: req(0)})
    ctx = c.new_context(sid, 1, {}, privileged=True, now_ms=T0)
    assert (ctx.complete({P0: result}, now_ms=T0).partitions == [P0]) is included


def test_error_forgets_hw_so_partition_is_resent_after_it() -> None:
    c = cache()
    sid = open_session(c, {P0: req(0)})
    error = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert c.new_context(sid, 1, {}, privileged=True, now_ms=T0).complete(
        {P0: res(0, error=error)}, now_ms=T0
    ).partitions == [P0]
    # Same HW as before the error, no error any more: sent again anyway.
    assert c.new_context(sid, 2, {}, privileged=True, now_ms=T0).complete(
        {P0: res(0)}, now_ms=T0
    ).partitions == [P0]
    assert (
        c.new_context(sid, 3, {}, privileged=True, now_ms=T0)
        .complete({P0: res(0)}, now_ms=T0)
        .partitions
        == []
    )


def test_incremental_adds_updates_and_forgets() -> None:
    c = cache()
    sid = open_session(c, {P0: req(0), P1: req(0)})
    ctx = c.new_context(sid, 1, {P1: req(9), P2: req(4)}, [P0], privileged=True, now_ms=T0)
    assert dict(ctx.partitions()) == {P1: req(9), P2: req(4)}
    # Forgetting every partition ends the session: the answer is sessionless.
    ctx = c.new_context(sid, 2, {}, [P1, P2], privileged=True, now_ms=T0)
    assert ctx.kind is ContextKind.SESSIONLESS and c.get(sid) is None
    assert ctx.complete({}, now_ms=T0).session_id == INVALID_SESSION_ID


@pytest.mark.parametrize(
    ("session", "epoch", "error"),
    [
        ("known", 2, ErrorCode.INVALID_FETCH_SESSION_EPOCH),  # expected 1
        ("known", 5, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        ("known", -2, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        ("unknown", 1, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        ("zero", 1, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
    ],
)
def test_bad_session_or_epoch(session: str, epoch: int, error: ErrorCode) -> None:
    c = cache()
    sid = open_session(c, {P0: req(0)})
    asked = {"known": sid, "unknown": sid + 1, "zero": INVALID_SESSION_ID}[session]
    ctx = c.new_context(asked, epoch, {P1: req(0)}, privileged=True, now_ms=T0)
    assert ctx.kind is ContextKind.ERROR and ctx.error_code == error
    answer = ctx.complete({}, now_ms=T0)
    assert (answer.error_code, answer.session_id, answer.partitions) == (error, 0, [])
    assert c.get(sid).epoch == 1  # the session is untouched


def test_full_fetch_with_session_id_closes_it() -> None:
    c = cache()
    sid = open_session(c, {P0: req(0)})
    ctx = c.new_context(sid, INITIAL_EPOCH, {P1: req(0)}, privileged=True, now_ms=T0)
    assert ctx.kind is ContextKind.FULL and c.get(sid) is None
    new = ctx.complete({P1: res(0)}, now_ms=T0).session_id
    assert new not in (sid, INVALID_SESSION_ID) and c.size == 1
    ctx = c.new_context(new, FINAL_EPOCH, {P1: req(0)}, privileged=True, now_ms=T0)
    assert ctx.kind is ContextKind.SESSIONLESS and c.size == 0
    assert ctx.complete({P1: res(0)}, now_ms=T0).partitions == [P1]


def test_two_requests_racing_on_one_session_epoch() -> None:
    c = cache()
    sid = open_session(c, {P0: req(0)})
    first = c.new_context(sid, 1, {}, privileged=True, now_ms=T0)
    second = c.new_context(sid, 2, {}, privileged=True, now_ms=T0)  # sent right after
    assert second.complete({P0: res(1)}, now_ms=T0).error_code == ErrorCode.NONE
    late = first.complete({P0: res(1)}, now_ms=T0)
    assert late.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


# -- the bounded cache -----------------------------------------------------------------------

MIN = 120_000


@pytest.mark.parametrize(
    ("existing", "new", "evicted"),
    [
        # (privileged, size, age_ms, idle_ms) of the one session in a 1-slot cache
        ((True, 5, 0, MIN + 1), (False, 1), True),  # unused > 2 min: anyone takes its slot
        ((False, 5, 0, 0), (True, 1), True),  # a young consumer session, a follower asks
        ((False, 5, 0, 0), (False, 9), False),  # young: consumers cannot evict it
        ((True, 5, 0, 0), (True, 50), False),  # a young follower session: nobody can
        ((False, 5, MIN + 1, 0), (False, 6), True),  # old enough: a bigger one wins
        ((False, 5, MIN + 1, 0), (False, 5), False),  # not an equal one
        ((False, 5, MIN + 1, 0), (False, 4), False),
        ((True, 1, MIN + 1, 0), (False, 50), False),  # followers' sessions first
        ((False, 50, MIN + 1, 0), (True, 1), True),
    ],
)
def test_eviction_preference(existing: tuple, new: tuple, evicted: bool) -> None:
    privileged, size, age, idle = existing
    c = cache(max_entries=1)
    created = T0 - age - idle
    old = open_session(
        c, {TopicPartition("o", i): req(0) for i in range(size)}, privileged=privileged, now=created
    )
    c.touch(c.get(old), T0 - idle)  # its last use, and its eligibility as of then
    new_privileged, new_size = new
    got = open_session(
        c,
        {TopicPartition("n", i): req(0) for i in range(new_size)},
        privileged=new_privileged,
        now=T0,
    )
    assert (got != INVALID_SESSION_ID) is evicted
    assert (c.get(old) is None) is evicted
    assert c.evictions == int(evicted) and c.size == 1


def test_cache_full_picks_smallest_evictable() -> None:
    c = cache(max_entries=3)
    ids = [
        open_session(
            c, {TopicPartition(f"s{n}", i): req(0) for i in range(n)}, privileged=False, now=T0
        )
        for n in (3, 1, 2)
    ]
    assert open_session(c, {P0: req(0)}, privileged=True, now=T0 + 1) != INVALID_SESSION_ID
    assert c.get(ids[1]) is None and c.get(ids[0]) and c.get(ids[2])
    assert c.total_partitions == 3 + 2 + 1


def test_default_slots_and_no_slot_means_sessionless_answer() -> None:
    assert FetchSessionCache().max_entries == 1000
    c = cache(max_entries=0)
    ctx = c.new_context(0, 0, {P0: req(0)}, privileged=True, now_ms=T0)
    assert ctx.complete({P0: res(0)}, now_ms=T0).session_id == INVALID_SESSION_ID
    with pytest.raises(ValueError, match=r"cache\.slots"):
        FetchSessionCache(max_entries=-1)


# -- the fetcher's handler against the cache -------------------------------------------------


def round_trip(handler, c, wanted, results, *, now: int = T0):
    data = handler.build(wanted)
    ctx = c.new_context(
        data.session_id, data.epoch, data.to_send, data.forgotten, privileged=True, now_ms=now
    )
    read = dict(ctx.partitions())
    answer = ctx.complete({tp: results[tp] for tp in read}, now_ms=now)
    ok = handler.handle_response(int(answer.error_code), answer.session_id)
    return data, read, answer, ok


def test_handler_full_then_incremental_then_forget() -> None:
    c = cache()
    h: FetchSessionHandler[TopicPartition] = FetchSessionHandler()
    wanted = {P0: req(0), P1: req(0)}
    results = {P0: res(0), P1: res(0), P2: res(0)}
    data, read, answer, ok = round_trip(h, c, wanted, results)
    assert data.is_full and ok and h.epoch == 1 and h.session_id == answer.session_id
    # Only P0's position changed: only P0 goes on the wire, both are read.
    wanted = {P0: req(10), P1: req(0)}
    data, read, answer, ok = round_trip(h, c, wanted, results)
    assert not data.is_full and data.to_send == {P0: req(10)} and data.forgotten == []
    assert read == wanted and ok and h.epoch == 2
    data, read, answer, ok = round_trip(h, c, {P1: req(0), P2: req(3)}, results)
    assert data.to_send == {P2: req(3)} and data.forgotten == [P0]
    assert read == {P1: req(0), P2: req(3)}


def test_handler_recovers_from_lost_session() -> None:
    c = cache()
    h: FetchSessionHandler[TopicPartition] = FetchSessionHandler()
    results = {P0: res(0)}
    round_trip(h, c, {P0: req(0)}, results)
    sid = h.session_id
    c.remove(sid)  # e.g. evicted
    data, _, answer, ok = round_trip(h, c, {P0: req(0)}, results)
    assert answer.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and not ok
    assert (h.session_id, h.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    data, _, answer, ok = round_trip(h, c, {P0: req(0)}, results)
    assert data.is_full and ok and h.session_id not in (sid, INVALID_SESSION_ID)


def test_handler_bad_epoch_closes_and_recreates() -> None:
    c = cache()
    h: FetchSessionHandler[TopicPartition] = FetchSessionHandler()
    results = {P0: res(0)}
    round_trip(h, c, {P0: req(0)}, results)
    sid = h.session_id
    h.epoch = 5  # out of step with the broker
    _, _, answer, ok = round_trip(h, c, {P0: req(0)}, results)
    assert answer.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH and not ok
    assert (h.session_id, h.epoch) == (sid, INITIAL_EPOCH)  # close it with a full fetch
    data, _, answer, ok = round_trip(h, c, {P0: req(0)}, results)
    assert data.is_full and data.session_id == sid and ok
    assert c.get(sid) is None and c.size == 1


def test_incremental_partitions_keep_the_request_objects_in_session_order() -> None:
    """The leader's idle fast path relies on it: a partition the follower did not resend is
    listed with the very request object it last sent; rotation and forgetting keep the
    listed requests in the session's order."""
    c = cache()
    first = {P0: req(0), P1: req(0), P2: req(0)}
    sid = open_session(c, first)
    ctx = c.new_context(sid, 1, {P1: req(7)}, privileged=True, now_ms=T0 + 1)
    listed = ctx.partitions()
    assert [tp for tp, _ in listed] == [P0, P1, P2]
    assert listed[0][1] is first[P0] and listed[2][1] is first[P2]
    assert listed[1][1] == req(7)
    ctx.complete({P0: res(0), P1: res(9, size=100), P2: res(0)}, now_ms=T0 + 1)
    ctx = c.new_context(sid, 2, {}, [P0], privileged=True, now_ms=T0 + 2)
    listed = ctx.partitions()
    assert [tp for tp, _ in listed] == [P2, P1]  # P1 rotated to the end, P0 forgotten
    assert listed[0][1] is first[P2]
    assert list(c.get(sid).partitions) == [P2, P1]
