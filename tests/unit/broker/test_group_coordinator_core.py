"""The group coordinator's pure core (Kafka's GroupCoordinatorTest / GroupMetadataTest cases
worth having), on an injected clock: join/sync/heartbeat/leave in each state, KIP-394,
delayed joins, session expiry, rebalance and sync timeouts, generation checks, offsets and
their expiry, loading and unloading."""

from __future__ import annotations

import itertools

import pytest

from broker.group.coordinator import GroupCoordinatorCore
from broker.group.effects import Effects, GroupConfig, LoadedPartition, Outcome
from broker.group.group import GroupState
from broker.group.loader import PartitionLoader
from broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
)
from protocol.errors import ErrorCode as E
from protocol.messages.groups import JoinGroupResponse, SyncGroupResponse
from protocol.names import TopicPartition

G = "group"
SESSION = 3000
REBALANCE = 10000
DELAY = 500
TP = TopicPartition("t", 0)


class Harness:
    """One coordinator owning every partition, a clock, and the parked answers."""

    def __init__(self, delay: int = DELAY, **config: int) -> None:
        ids = itertools.count(1)
        self.core = GroupCoordinatorCore(
            GroupConfig(
                num_partitions=1,
                min_session_timeout_ms=1000,
                initial_rebalance_delay_ms=delay,
                **config,
            ),
            new_member_id=lambda client: f"{client}-{next(ids)}",
        )
        self.core.begin_load(0, 1)
        assert self.core.complete_load(0, 1, LoadedPartition({}, {}), 0)
        self.now = 0
        self.answers: dict[tuple[str, str, str], object] = {}
        self.stores: list = []

    def take(self, effects: Effects) -> None:
        for d in effects.deliveries:
            self.answers[d.key] = d.response
        self.stores.extend(effects.stores)

    def settle(self, outcome: Outcome) -> object | None:
        self.take(outcome.effects)
        return outcome.response

    def join(self, member: str = "", protocols=(("range", b"r"),), ptype="consumer", **kw):
        outcome = self.core.join(
            group_id=G,
            member_id=member,
            client_id="c",
            client_host="h",
            session_timeout_ms=kw.get("session", SESSION),
            rebalance_timeout_ms=kw.get("rebalance", REBALANCE),
            protocol_type=ptype,
            protocols=tuple(protocols),
            now_ms=self.now,
        )
        return self.settle(outcome)

    def new_member(self) -> str:
        resp = self.join()
        assert isinstance(resp, JoinGroupResponse) and resp.error_code == E.MEMBER_ID_REQUIRED
        return resp.member_id

    def sync(self, member: str, generation: int, assignments=None):
        return self.settle(
            self.core.sync(
                group_id=G,
                member_id=member,
                generation=generation,
                protocol_type=None,
                protocol_name=None,
                assignments=assignments or {},
                now_ms=self.now,
            )
        )

    def heartbeat(self, member: str, generation: int) -> E:
        return self.core.heartbeat(
            group_id=G, member_id=member, generation=generation, now_ms=self.now
        )[0]

    def advance(self, ms: int) -> None:
        self.now += ms
        self.take(self.core.tick(self.now))

    def complete_join(self) -> None:
        """Past the initial delay (each member that joined during it extended it once)."""
        for _ in range(5):
            if self.group.state != GroupState.PREPARING_REBALANCE:
                return
            self.advance(DELAY)
        raise AssertionError("the join never completed")

    def stored(self, error: E = E.NONE) -> None:
        store = self.stores.pop(0)
        self.take(self.core.group_stored(store.group_id, store.generation, error, "m", self.now))

    @property
    def group(self):
        return self.core.groups[G]

    def answer(self, member: str, kind: str = "join"):
        return self.answers.pop((G, member, kind), None)

    def stable_pair(self) -> tuple[str, str]:
        """Two members in a Stable generation 1; returns (leader, follower)."""
        a, b = self.new_member(), self.new_member()
        assert self.join(a) is None and self.join(b) is None
        self.complete_join()
        ja, jb = self.answer(a), self.answer(b)
        assert ja.error_code == jb.error_code == 0 and ja.generation_id == 1
        leader = ja.leader
        follower = b if leader == a else a
        assert self.sync(follower, 1) is None
        assert self.sync(leader, 1, {a: b"A", b: b"B"}) is None
        self.stored()
        assert self.group.state == GroupState.STABLE
        return leader, follower


def test_first_join_needs_a_member_id_then_the_initial_delay_completes_it() -> None:
    h = Harness()
    member = h.new_member()
    assert member == "c-1" and G in h.core.groups and h.group.state == GroupState.EMPTY
    assert h.join(member) is None
    assert h.group.state == GroupState.PREPARING_REBALANCE
    h.advance(DELAY - 1)
    assert h.answer(member) is None
    h.advance(1)
    resp = h.answer(member)
    assert (resp.error_code, resp.generation_id, resp.leader, resp.protocol_name) == (
        0,
        1,
        member,
        "range",
    )
    assert [m.member_id for m in resp.members] == [member]
    assert h.group.state == GroupState.COMPLETING_REBALANCE


def test_initial_delay_extends_while_members_keep_joining_up_to_the_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    h.join(a, rebalance=1200)
    h.advance(DELAY - 100)
    h.join(b, rebalance=1200)  # joined during the delay: wait one more delay
    h.advance(100)
    assert h.answer(a) is None
    h.advance(DELAY)
    assert h.answer(a).generation_id == h.answer(b).generation_id == 1


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"session": 999}, E.INVALID_SESSION_TIMEOUT),
        ({"ptype": ""}, E.INCONSISTENT_GROUP_PROTOCOL),
        ({"protocols": ()}, E.INCONSISTENT_GROUP_PROTOCOL),
        ({"member": "stranger"}, E.UNKNOWN_MEMBER_ID),
    ],
)
def test_join_refusals(kwargs: dict, code: E) -> None:
    h = Harness()
    assert h.join(**kwargs).error_code == code


def test_join_with_no_common_protocol_is_inconsistent() -> None:
    h = Harness()
    h.join(h.new_member())
    assert h.join(protocols=(("roundrobin", b""),)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(ptype="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_selection_by_votes() -> None:
    h = Harness()
    a, b, c = h.new_member(), h.new_member(), h.new_member()
    h.join(a, protocols=(("range", b""), ("roundrobin", b"")))
    h.join(b, protocols=(("roundrobin", b""), ("range", b"")))
    h.join(c, protocols=(("roundrobin", b""), ("range", b"")))
    h.complete_join()
    assert h.answer(a).protocol_name == "roundrobin"


def test_group_max_size() -> None:
    h = Harness(max_size=1)
    h.new_member()
    assert h.join().error_code == E.GROUP_MAX_SIZE_REACHED


def test_sync_completes_when_the_leaders_assignment_is_stored() -> None:
    h = Harness()
    leader, follower = h.stable_pair()
    assert h.answer(follower, "sync").assignment in (b"A", b"B")
    assert h.answer(leader, "sync").error_code == 0
    # Stable: a late SyncGroup gets its assignment at once.
    assert h.sync(follower, 1).error_code == 0


def test_failed_store_rebalances_and_tells_the_syncs() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    h.join(a)
    h.join(b)
    h.complete_join()
    leader = h.answer(a).leader
    h.answer(b)
    h.sync(leader, 1, {})
    h.stored(E.NOT_COORDINATOR)
    assert h.answer(leader, "sync").error_code == E.NOT_COORDINATOR
    assert h.group.state == GroupState.PREPARING_REBALANCE


@pytest.mark.parametrize(
    ("generation", "member", "code"),
    [(2, None, E.ILLEGAL_GENERATION), (1, "stranger", E.UNKNOWN_MEMBER_ID)],
)
def test_sync_generation_and_member_checks(generation: int, member: str | None, code: E) -> None:
    h = Harness()
    leader, _ = h.stable_pair()
    assert h.sync(member or leader, generation).error_code == code


def test_new_member_rebalances_a_stable_group() -> None:
    h = Harness()
    leader, follower = h.stable_pair()
    c = h.new_member()
    assert h.join(c) is None
    assert h.group.state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, 1) == E.REBALANCE_IN_PROGRESS
    assert h.sync(leader, 1).error_code == E.REBALANCE_IN_PROGRESS
    assert h.join(leader) is None
    last = h.join(follower)  # every member rejoined: the join completes with this one
    assert last.generation_id == 2
    assert {h.answer(m).generation_id for m in (leader, c)} == {2}
    assert h.group.state == GroupState.COMPLETING_REBALANCE
    assert h.heartbeat(c, 2) == E.NONE  # heartbeats are fine while completing


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    h = Harness()
    leader, follower = h.stable_pair()
    # The leader rejoins: a rebalance bounded by the largest rebalance timeout (the
    # follower's). The follower heartbeats (a consumer busy in processing) but never rejoins.
    h.join(leader, rebalance=4000)
    for _ in range(REBALANCE // 2000 - 1):
        h.advance(2000)
        assert h.heartbeat(follower, 1) == E.REBALANCE_IN_PROGRESS
    h.advance(1999)
    assert h.answer(leader) is None
    h.advance(1)
    resp = h.answer(leader)
    assert resp.generation_id == 2 and [m.member_id for m in resp.members] == [leader]
    assert follower not in h.group.members


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    h = Harness()
    leader, follower = h.stable_pair()
    h.advance(SESSION - 1)
    assert h.heartbeat(leader, 1) == E.NONE
    h.advance(1)
    assert follower not in h.group.members
    assert h.group.state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(follower, 1) == E.UNKNOWN_MEMBER_ID
    # The last member's session ends too: an empty new generation, stored.
    h.advance(SESSION)
    assert h.group.state == GroupState.EMPTY and h.group.generation == 2
    assert h.stores[-1].value.members == () and h.stores[-1].generation == 2


def test_unconfirmed_member_id_expires() -> None:
    h = Harness()
    h.new_member()
    h.advance(SESSION)
    assert h.group.pending_members == {}


def test_sync_timeout_removes_members_that_did_not_sync() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    h.join(a)
    h.join(b)
    h.complete_join()
    leader = h.answer(a).leader
    follower = b if leader == a else a
    h.answer(b)
    h.sync(follower, 1)
    h.advance(REBALANCE)
    assert leader not in h.group.members
    assert h.answer(follower, "sync").error_code == E.REBALANCE_IN_PROGRESS


def test_leave_removes_at_once_and_answers_a_parked_join() -> None:
    h = Harness()
    leader, follower = h.stable_pair()
    c = h.new_member()
    h.join(c)
    code, _, results, effects = h.core.leave(group_id=G, member_ids=[c, "stranger"], now_ms=h.now)
    h.take(effects)
    assert code == E.NONE and results == [(c, E.NONE), ("stranger", E.UNKNOWN_MEMBER_ID)]
    assert h.answer(c).error_code == E.UNKNOWN_MEMBER_ID
    code, _, _, effects = h.core.leave(group_id=G, member_ids=[leader, follower], now_ms=h.now)
    h.take(effects)
    assert h.group.state == GroupState.EMPTY and h.heartbeat(leader, 2) == E.UNKNOWN_MEMBER_ID


def test_retried_join_supersedes_the_parked_one() -> None:
    h = Harness()
    leader, follower = h.stable_pair()
    h.join(leader)
    assert h.join(leader) is None
    assert h.answer(leader).error_code == E.REBALANCE_IN_PROGRESS  # the first one
    h.join(follower)
    assert h.answer(leader).generation_id == 2


def test_stable_follower_rejoining_unchanged_gets_the_current_generation() -> None:
    h = Harness()
    _, follower = h.stable_pair()
    resp = h.join(follower)
    assert resp.generation_id == 1 and h.group.state == GroupState.STABLE


@pytest.mark.parametrize(
    ("setup", "generation", "member", "code"),
    [
        ("none", -1, "", E.NONE),
        ("none", 1, "m", E.ILLEGAL_GENERATION),
        ("stable", 1, "leader", E.NONE),
        ("stable", 2, "leader", E.ILLEGAL_GENERATION),
        ("stable", 1, "stranger", E.UNKNOWN_MEMBER_ID),
        ("stable", -1, "", E.UNKNOWN_MEMBER_ID),
        ("completing", 1, "leader", E.REBALANCE_IN_PROGRESS),
        ("preparing", 1, "leader", E.NONE),
    ],
)
def test_commit_checks(setup: str, generation: int, member: str, code: E) -> None:
    h = Harness()
    if setup == "completing":
        a = h.new_member()
        h.join(a)
        h.complete_join()
        member = a
    elif setup != "none":
        leader, _ = h.stable_pair()
        if setup == "preparing":
            h.join(leader)  # the leader rejoining starts a rebalance
        member = leader if member == "leader" else member
    got, _ = h.core.validate_commit(
        group_id=G, member_id=member, generation=generation, now_ms=h.now
    )
    assert got == code


def test_offsets_cache_and_fetch() -> None:
    h = Harness()
    h.core.validate_commit(group_id=G, member_id="", generation=-1, now_ms=0)
    h.core.offsets_committed(G, {TP: OffsetValue(5, 1, "x", 0)})
    other = TopicPartition("t", 1)
    assert h.core.fetch_offsets(G, [TP, other]) == {TP: OffsetValue(5, 1, "x", 0), other: None}
    assert h.core.fetch_offsets(G, None) == {TP: OffsetValue(5, 1, "x", 0)}
    assert h.core.fetch_offsets("unknown", None) == {}
    assert h.core.metadata_problem("x" * 4097) is not None


def test_offsets_of_empty_groups_expire_with_tombstones() -> None:
    h = Harness(offsets_retention_ms=1000)
    h.core.validate_commit(group_id=G, member_id="", generation=-1, now_ms=0)
    h.core.offsets_committed(G, {TP: OffsetValue(5, -1, None, 0)})
    assert h.core.expire_offsets(999) == {}
    assert h.core.expire_offsets(1000) == {0: [(OffsetKey(G, "t", 0), None), (GroupKey(G), None)]}
    assert G not in h.core.groups


def test_consumer_group_offsets_expire_only_once_empty_for_the_retention() -> None:
    h = Harness(offsets_retention_ms=1000)
    leader, follower = h.stable_pair()
    h.core.offsets_committed(G, {TP: OffsetValue(5, -1, None, 0)})
    assert h.core.expire_offsets(h.now + 5000) == {}  # Stable: kept
    h.take(h.core.leave(group_id=G, member_ids=[leader, follower], now_ms=h.now)[3])
    emptied = h.now
    assert h.core.expire_offsets(emptied + 999) == {}
    assert len(h.core.expire_offsets(emptied + 1000)[0]) == 2


def test_not_owned_and_loading_partitions() -> None:
    core = GroupCoordinatorCore(GroupConfig(num_partitions=1))
    assert core.group_error(G)[0] == E.NOT_COORDINATOR
    assert core.group_error("")[0] == E.INVALID_GROUP_ID
    core.begin_load(0, 3)
    assert core.group_error(G)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert core.list_groups() == [] and core.loading()
    # A load for an older election, or after a resignation, is discarded.
    assert not core.complete_load(0, 2, LoadedPartition({}, {}), 0)
    core.unload(0, 3)
    assert not core.complete_load(0, 3, LoadedPartition({}, {}), 0)
    assert core.group_error(G)[0] == E.NOT_COORDINATOR


def test_unload_answers_parked_members_and_ignores_an_older_resignation() -> None:
    h = Harness()
    a = h.new_member()
    h.join(a)
    assert h.core.begin_load(0, 1) is None  # the same epoch again (an ISR change): nothing
    assert h.answer(a) is None
    effects = h.core.begin_load(0, 5)  # a newer election of the same partition: reload
    assert effects is not None
    h.take(effects)
    assert h.answer(a).error_code == E.NOT_COORDINATOR
    h.take(h.core.unload(0, 4))
    assert h.core.group_error(G)[0] == E.COORDINATOR_LOAD_IN_PROGRESS


def test_loaded_group_is_stable_with_its_members_and_sessions() -> None:
    core = GroupCoordinatorCore(GroupConfig(num_partitions=1))
    core.begin_load(0, 1)
    member = MemberValue("m1", "c", "h", 10000, 3000, b"sub", b"asg")
    loaded = LoadedPartition(
        {G: {TP: OffsetValue(7)}},
        {
            G: GroupValue("consumer", 4, "range", "m1", 0, (member,)),
            "old": GroupValue("consumer", 2, None, None, 0),
        },
    )
    assert core.complete_load(0, 1, loaded, 100)
    group = core.groups[G]
    assert (group.state, group.generation, group.leader) == (GroupState.STABLE, 4, "m1")
    assert core.groups["old"].state == GroupState.EMPTY
    assert core.heartbeat(group_id=G, member_id="m1", generation=4, now_ms=3099)[0] == E.NONE
    assert core.fetch_offsets(G, [TP]) == {TP: OffsetValue(7)}
    described = core.describe(G)
    assert described.group_state == "Stable" and described.members[0].member_assignment == b"asg"
    core.tick(3099 + 3000)
    assert "m1" not in core.groups[G].members


def test_loader_keeps_the_latest_value_per_key_and_applies_tombstones() -> None:
    problems: list[str] = []
    loader = PartitionLoader(problems.append)
    k1, k2, gk = OffsetKey(G, "t", 0), OffsetKey(G, "t", 1), GroupKey(G)
    value = GroupValue("consumer", 1, "range", "m", 0)
    loader.feed(
        [
            (encode_key(k1), encode_value(OffsetValue(1))),
            (encode_key(k1), encode_value(OffsetValue(2))),
            (encode_key(k2), encode_value(OffsetValue(3))),
            (encode_key(k2), None),
            (b"\xc1", b""),
            (None, b""),
            (encode_key(gk), encode_value(value)),
            (encode_key(GroupKey("gone")), encode_value(value)),
            (encode_key(GroupKey("gone")), None),
        ]
    )
    result = loader.result()
    assert result.offsets == {G: {TP: OffsetValue(2)}}
    assert result.groups == {G: value}
    assert len(problems) == 2


def test_describe_unknown_group_is_dead() -> None:
    h = Harness()
    assert h.core.describe("nobody").group_state == "Dead"
    assert isinstance(h.join(h.new_member()), (JoinGroupResponse, type(None)))
    assert isinstance(SyncGroupResponse(), SyncGroupResponse)
