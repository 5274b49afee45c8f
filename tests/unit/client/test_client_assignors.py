"""The assignors with Kafka's own test cases (RangeAssignorTest, RoundRobinAssignorTest)."""

from __future__ import annotations

import pytest

from client.assignors import RangeAssignor, RoundRobinAssignor, assignor_for
from client.consumer_protocol import Subscription
from protocol.names import TopicPartition as TP


def subs(**topics: list[str]) -> dict[str, Subscription]:
    return {member: Subscription(tuple(ts)) for member, ts in topics.items()}


def tps(*names: str) -> list[TP]:
    return [TP(n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1])) for n in names]


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_one_consumer_no_topic_or_nonexistent_topic(assignor) -> None:
    assert assignor.assign({}, subs(c=[])) == {"c": []}
    assert assignor.assign({}, subs(c=["t1"])) == {"c": []}


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_one_consumer_gets_everything_it_subscribed_to(assignor) -> None:
    assert assignor.assign({"t1": 3}, subs(c=["t1"])) == {"c": tps("t1-0", "t1-1", "t1-2")}
    assert assignor.assign({"t1": 3, "other": 3}, subs(c=["t1"])) == {
        "c": tps("t1-0", "t1-1", "t1-2")
    }
    assert assignor.assign({"t1": 1, "t2": 2}, subs(c=["t1", "t2"])) == {
        "c": tps("t1-0", "t2-0", "t2-1")
    }


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_two_consumers_one_partition_and_two_partitions(assignor) -> None:
    assert assignor.assign({"t": 1}, subs(c1=["t"], c2=["t"])) == {"c1": tps("t-0"), "c2": []}
    assert assignor.assign({"t": 2}, subs(c1=["t"], c2=["t"])) == {
        "c1": tps("t-0"),
        "c2": tps("t-1"),
    }


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_multiple_consumers_mixed_topic_subscriptions(assignor) -> None:
    # the same answer from both assignors in Kafka's tests
    got = assignor.assign({"t1": 3, "t2": 2}, subs(c1=["t1"], c2=["t1", "t2"], c3=["t1"]))
    assert got == {
        "c1": tps("t1-0"),
        "c2": tps("t1-1", "t2-0", "t2-1"),
        "c3": tps("t1-2"),
    }


def test_range_two_consumers_two_topics_six_partitions() -> None:
    got = RangeAssignor().assign({"t1": 3, "t2": 3}, subs(c1=["t1", "t2"], c2=["t1", "t2"]))
    assert got == {"c1": tps("t1-0", "t1-1", "t2-0", "t2-1"), "c2": tps("t1-2", "t2-2")}


def test_roundrobin_two_consumers_two_topics_six_partitions() -> None:
    got = RoundRobinAssignor().assign({"t1": 3, "t2": 3}, subs(c1=["t1", "t2"], c2=["t1", "t2"]))
    assert got == {"c1": tps("t1-0", "t1-2", "t2-1"), "c2": tps("t1-1", "t2-0", "t2-2")}


def test_range_sorts_members_by_id_not_by_arrival() -> None:
    got = RangeAssignor().assign({"t": 7}, {"b": Subscription(("t",)), "a": Subscription(("t",))})
    assert got == {"a": tps("t-0", "t-1", "t-2", "t-3"), "b": tps("t-4", "t-5", "t-6")}


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_three_members_six_partitions_two_each_and_every_partition_once(assignor) -> None:
    got = assignor.assign({"t": 6}, subs(a=["t"], b=["t"], c=["t"]))
    assert sorted(len(v) for v in got.values()) == [2, 2, 2]
    assert sorted(tp for v in got.values() for tp in v) == tps(*(f"t-{i}" for i in range(6)))


def test_assignor_for_names_the_known_ones() -> None:
    assert assignor_for("roundrobin").name == "roundrobin"
    with pytest.raises(KeyError, match="known: range, roundrobin"):
        assignor_for("sticky")
