"""The event heap's order and the simulated network's faults."""

from __future__ import annotations

import random

import pytest

from tests.sim.events import EventQueue, Propose
from tests.sim.network import Network, NetworkConfig


def test_events_come_out_in_time_order_and_fifo_at_equal_times() -> None:
    q = EventQueue()
    for at, name in [(5, b"c"), (1, b"a"), (5, b"d"), (1, b"b"), (0, b"z")]:
        q.push(at, Propose(name))
    out = [q.pop() for _ in range(len(q))]
    assert out == [(0, Propose(b"z")), (1, Propose(b"a")), (1, Propose(b"b")),
                   (5, Propose(b"c")), (5, Propose(b"d"))]  # fmt: skip


def test_an_event_in_negative_time_is_refused() -> None:
    with pytest.raises(ValueError, match="event time must be >= 0"):
        EventQueue().push(-1, Propose(b"x"))


def test_drop_duplicate_and_delay_follow_the_seed() -> None:
    cfg = NetworkConfig(drop_rate=0.2, duplicate_rate=0.2, min_delay_ms=1, max_delay_ms=50)
    a = [Network(random.Random(7), cfg).delays(1, 2) for _ in range(1)]
    net1, net2 = Network(random.Random(7), cfg), Network(random.Random(7), cfg)
    run1 = [net1.delays(1, 2) for _ in range(500)]
    run2 = [net2.delays(1, 2) for _ in range(500)]
    assert run1 == run2 and a[0] == run1[0]
    assert any(d == [] for d in run1) and any(len(d) == 2 for d in run1)
    assert {x for d in run1 for x in d} <= set(range(1, 51))
    assert len({x for d in run1 for x in d}) > 10  # spread delays: messages get reordered
    assert net1.dropped > 50 and net1.duplicated > 50


def test_symmetric_and_asymmetric_partitions_and_heal() -> None:
    net = Network(random.Random(1), NetworkConfig(drop_rate=0.0, duplicate_rate=0.0))
    net.partition({1}, {2, 3}, symmetric=False)
    assert net.delays(1, 2) == [] and not net.can_deliver(1, 3)
    assert net.can_deliver(2, 1) and len(net.delays(3, 1)) == 1
    net.partition({2}, {3})
    assert not net.can_deliver(2, 3) and not net.can_deliver(3, 2)
    net.heal()
    assert not net.partitioned and all(net.can_deliver(a, b) for a in (1, 2, 3) for b in (1, 2, 3))


def test_bad_network_settings_are_named() -> None:
    with pytest.raises(ValueError, match="drop_rate must be in"):
        NetworkConfig(drop_rate=1.5)
    with pytest.raises(ValueError, match="min_delay_ms <= max_delay_ms"):
        NetworkConfig(min_delay_ms=10, max_delay_ms=5)
    with pytest.raises(ValueError, match=r"sides overlap: \[2\]"):
        Network(random.Random(1)).partition({1, 2}, {2, 3})
