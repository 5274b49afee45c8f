"""deploy.chaos.schedule: deterministic, bounded nemesis schedules."""

from __future__ import annotations

import pytest

from deploy.chaos.schedule import (
    NEMESES,
    Action,
    ClusterShape,
    Selector,
    parse_nemeses,
    plan_schedule,
)

RAFT = ClusterShape("raft", partitions=6, session_timeout_s=3.0)
ZK = ClusterShape("zk", partitions=6, session_timeout_s=3.0)


def test_same_seed_same_schedule_and_another_seed_differs() -> None:
    a = plan_schedule(11, ("kill", "pause", "controller"), 60, RAFT)
    b = plan_schedule(11, ("kill", "pause", "controller"), 60, RAFT)
    c = plan_schedule(12, ("kill", "pause", "controller"), 60, RAFT)
    assert a == b
    assert a.describe() == b.describe()
    assert a.faults != c.faults


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("shape", [RAFT, ZK], ids=["raft", "zk"])
def test_faults_are_sequential_quiet_and_healed_before_the_limit(
    seed: int, shape: ClusterShape
) -> None:
    schedule = plan_schedule(seed, NEMESES, 90, shape)
    assert schedule.faults
    assert schedule.faults[0].start_s >= 3.0
    for earlier, later in zip(schedule.faults, schedule.faults[1:], strict=False):
        assert later.start_s >= earlier.end_s + 2.0 - 0.11  # a quiet gap (rounded to 0.1 s)
    assert schedule.faults[-1].end_s <= 90 - 3.0
    for fault in schedule.faults:
        if fault.action is Action.PAUSE or fault.nemesis == "zk-expiry":
            assert fault.duration_s > shape.session_timeout_s  # past the session: a zombie
        if fault.selector in (Selector.PARTITION_LEADER, Selector.LEADER_FROM_FOLLOWERS):
            assert fault.partition is not None and 0 <= fault.partition < shape.partitions
        if fault.action is Action.DELAY:
            assert fault.delay_ms > 0


def test_quorum_followers_only_in_raft_mode() -> None:
    zk = {f.selector for s in range(40) for f in plan_schedule(s, ("controller",), 60, ZK).faults}
    raft = {
        f.selector for s in range(40) for f in plan_schedule(s, ("controller",), 60, RAFT).faults
    }
    assert Selector.QUORUM_FOLLOWER not in zk
    assert Selector.QUORUM_FOLLOWER in raft
    assert Selector.ACTIVE_CONTROLLER in zk


def test_every_nemesis_is_used_over_a_long_run() -> None:
    schedule = plan_schedule(3, NEMESES, 600, RAFT)
    assert {f.nemesis for f in schedule.faults} == set(NEMESES)


def test_no_nemesis_is_an_empty_schedule() -> None:
    assert plan_schedule(1, (), 5, RAFT).faults == ()


def test_a_time_limit_too_short_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="raise --time-limit"):
        plan_schedule(1, ("pause",), 6, RAFT)


def test_parse_nemeses() -> None:
    assert parse_nemeses("kill, pause,kill,,controller", "zk") == ("kill", "pause", "controller")
    with pytest.raises(ValueError, match="unknown nemesis 'explode'"):
        parse_nemeses("kill,explode", "raft")
    with pytest.raises(ValueError, match="mode must be raft or zk"):
        parse_nemeses("kill", "kraft")


def test_schedule_json_and_description() -> None:
    schedule = plan_schedule(5, ("kill",), 30, RAFT)
    assert schedule.to_json()[0]["nemesis"] == "kill"
    assert "seed 5" in schedule.describe()
