"""deploy.chaos.check.availability: the client-observed gap around each fault of a history."""

from __future__ import annotations

import itertools

import pytest

from deploy.chaos.check.availability import describe, summarize, unavailability
from deploy.chaos.check.history import History, NemesisValue, OpKind, OpType, SendValue


class _Clock:
    def __init__(self) -> None:
        self.ns = 0

    def at(self, seconds: float) -> None:
        self.ns = int(seconds * 1e9)


def _history() -> tuple[History, _Clock]:
    clock = _Clock()
    return History(clock_ns=lambda: clock.ns, wall_ms=lambda: clock.ns // 1_000_000), clock


_values = itertools.count()


def _ack(history: History, clock: _Clock, t: float, partition: int, *, ok: bool = True) -> None:
    clock.at(t)
    value = SendValue("t", str(next(_values)).encode())
    invoke = history.invoke("producer-1", OpKind.SEND, value)
    if ok:
        acked = SendValue("t", value.value, partition=partition, offset=int(t * 10))
        history.complete(invoke, OpType.OK, acked)
    else:
        history.complete(invoke, OpType.FAIL, error="NOT_LEADER_OR_FOLLOWER")


def _fault(history: History, clock: _Clock, t: float, action: str, **kw: object) -> None:
    clock.at(t)
    history.nemesis(NemesisValue("kill", ("broker-2",), {"action": action}), **kw)  # type: ignore[arg-type]


def test_a_faults_gap_is_its_worst_partition_from_the_last_ack_before_to_the_first_after() -> None:
    history, clock = _history()
    for t in (1.0, 1.5, 2.0):
        _ack(history, clock, t, 0)
        _ack(history, clock, t + 0.1, 1)
    _fault(history, clock, 2.2, "kill")
    _ack(history, clock, 2.4, 1)  # partition 1 was not on the killed broker
    _ack(history, clock, 4.0, 0, ok=False)  # a failure is not an acknowledgement
    _ack(history, clock, 5.5, 0)
    _fault(history, clock, 6.0, "restart")  # not a fault: brings something back
    (fault,) = unavailability(history)
    assert fault.action == "kill" and fault.targets == ("broker-2",)
    assert fault.gaps_s == {"t-0": pytest.approx(3.5), "t-1": pytest.approx(0.3)}
    summary = summarize([fault])
    assert summary["median_s"] == pytest.approx(3.5) and summary["max_s"] == pytest.approx(3.5)
    assert summary["faults"][0]["worst_partition"] == "t-0"
    assert "max 3.50 s over 1 fault(s)" in describe(summary)


def test_failed_faults_and_partitions_not_written_on_both_sides_are_left_out() -> None:
    history, clock = _history()
    _ack(history, clock, 1.0, 0)
    _fault(history, clock, 2.0, "pause", error="no such broker")
    _fault(history, clock, 3.0, "cut")
    _ack(history, clock, 3.5, 1)  # partition 1: nothing before the cut
    (cut,) = unavailability(history)
    assert cut.action == "cut" and cut.gaps_s == {} and cut.worst_s is None
    summary = summarize([cut])
    assert summary["measured"] == 0 and summary["max_s"] is None
    assert "no fault with acknowledged writes" in describe(summary)
