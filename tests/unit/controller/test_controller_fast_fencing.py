"""Fast fencing (broker.session.fast.fencing.enable): the rule that says when a broker whose
connection ended is dead (controller.liveness.judge), the single writer's last checks before
the fence (ClusterControl.fence_dead_broker through FenceDeadBroker), and the trio driver that
probes and fences (controller.service.fast_fencing.FastFencing)."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from controller.broker_lifecycle import BrokerChange, LiveBroker
from controller.cluster_control import ClusterControl
from controller.context import ControllerContext
from controller.dead_brokers import FenceDeadBroker, FenceDeadBrokerResponse
from controller.liveness import (
    MAX_ROUNDS,
    ROUND_INTERVAL_MS,
    ROUNDS,
    Probe,
    ProbeResult,
    Verdict,
    judge,
)
from controller.log_events import broker_failures
from controller.operations import failed_response, run_operation
from controller.service.fast_fencing import FastFencing
from controller.state import ControllerState
from protocol.errors import ErrorCode
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import BrokerEndpoint, FenceBrokerRecord, UnregisterBrokerRecord
from tests.unit.controller.test_controller_raft_operations import (
    Clock,
    commit,
    heartbeat,
    registration,
)

B, E = 1, 7
REFUSED = ProbeResult(Probe.REFUSED)
ALIVE = ProbeResult(Probe.ANSWERED, node_id=B, broker_epoch=E)


# -- the rule ---------------------------------------------------------------------------------


def test_every_listener_refused_in_every_round_is_dead() -> None:
    assert judge([[REFUSED, REFUSED]], B, E)[0] is Verdict.PROBE_AGAIN
    verdict, why = judge([[REFUSED, REFUSED]] * ROUNDS, B, E)
    assert verdict is Verdict.DEAD
    assert "refused" in why


@pytest.mark.parametrize(
    "other",
    [
        ProbeResult(Probe.TIMEOUT),
        ProbeResult(Probe.UNREACHABLE, detail="No route to host"),
        ProbeResult(Probe.ERROR, detail="Too many open files"),
        ProbeResult(Probe.NO_ANSWER, detail="connection reset"),
        ALIVE,
        ProbeResult(Probe.ANSWERED, node_id=2, broker_epoch=E),  # someone else's port now
        ProbeResult(Probe.ANSWERED, node_id=B, broker_epoch=-1),  # not registered yet
    ],
)
def test_anything_but_a_refusal_leaves_the_broker_its_session(other: ProbeResult) -> None:
    for rounds in ([[other, REFUSED]], [[REFUSED, REFUSED], [REFUSED, other]]):
        assert judge(rounds, B, E)[0] is Verdict.NOT_PROVEN


def test_resets_are_probed_again_and_never_count_as_death() -> None:
    """A dying process's listen socket accepts into its backlog, then resets: probe again.
    A broker that keeps resetting (alive behind something that resets) keeps its session."""
    reset = ProbeResult(Probe.RESET, detail="Connection reset by peer")
    assert judge([[reset]], B, E)[0] is Verdict.PROBE_AGAIN
    assert judge([[reset], [REFUSED]], B, E)[0] is Verdict.PROBE_AGAIN
    assert judge([[reset], [REFUSED], [REFUSED]], B, E)[0] is Verdict.DEAD
    assert judge([[REFUSED], [reset], [REFUSED]], B, E)[0] is Verdict.PROBE_AGAIN
    verdict, why = judge([[reset]] * MAX_ROUNDS, B, E)
    assert verdict is Verdict.NOT_PROVEN and "reset" in why


def test_the_same_broker_with_another_epoch_proves_the_old_one_dead() -> None:
    restarted = ProbeResult(Probe.ANSWERED, node_id=B, broker_epoch=E + 40)
    verdict, why = judge([[restarted, ProbeResult(Probe.TIMEOUT)]], B, E)
    assert verdict is Verdict.DEAD
    assert "new incarnation" in why


def test_no_listener_is_not_proof() -> None:
    assert judge([[]], B, E)[0] is Verdict.NOT_PROVEN


# -- the single writer's checks ---------------------------------------------------------------


def _registered(*, unfenced: bool = True) -> tuple[ControllerState, ControllerContext, Clock, int]:
    """Broker B registered (and, unless told otherwise, unfenced by a caught-up heartbeat)."""
    state = ControllerState()
    clock = Clock()
    ctx = ControllerContext(
        rng=random.Random(1),
        cluster_control=ClusterControl.activate(state.image, clock(), session_timeout_ms=30_000),
        clock_ms=clock,
    )
    result = run_operation(state, registration(B), ctx)
    epoch = result.response.broker_epoch
    commit(state, result.records)
    if unfenced:
        commit(state, run_operation(state, heartbeat(epoch, epoch, B), ctx).records)
        assert not state.image.cluster.brokers[B].fenced
    return state, ctx, clock, epoch


def test_a_dead_broker_is_fenced_long_before_its_session_ends() -> None:
    state, ctx, clock, epoch = _registered()
    clock.now += 500  # far within the 30 s session
    result = run_operation(state, FenceDeadBroker(B, epoch, clock.now - 300, "refused"), ctx)
    assert result.response == FenceDeadBrokerResponse(fenced=True)
    assert any(isinstance(r, FenceBrokerRecord) for r in result.records)
    [failure] = broker_failures(
        FenceDeadBroker(B, epoch, 0, "refused"), state.image, list(result.records)
    )
    assert (failure.broker_id, failure.reason) == (B, "process_dead")
    commit(state, result.records)
    assert state.image.cluster.brokers[B].fenced


def test_a_heartbeat_after_the_connection_ended_cancels_the_fence() -> None:
    state, ctx, clock, epoch = _registered()
    lost_at = clock.now
    clock.now += 100
    commit(state, run_operation(state, heartbeat(epoch, epoch, B), ctx).records)
    result = run_operation(state, FenceDeadBroker(B, epoch, lost_at, "refused"), ctx)
    assert result.response.fenced is False
    assert result.response.not_fenced_because == "heard from since its connection ended"
    assert list(result.records) == []


def test_another_incarnation_or_a_fenced_broker_is_left_alone() -> None:
    state, ctx, clock, epoch = _registered()
    stale = run_operation(state, FenceDeadBroker(B, epoch - 1, clock.now, "x"), ctx)
    assert stale.response.not_fenced_because == "the broker registered again since"
    commit(state, run_operation(state, FenceDeadBroker(B, epoch, clock.now, "x"), ctx).records)
    again = run_operation(state, FenceDeadBroker(B, epoch, clock.now, "x"), ctx)
    assert again.response.not_fenced_because == "already fenced"


def test_zk_mode_fences_as_the_znode_deletion_would() -> None:
    """Without a Raft term (ZK mode) the fence is the BrokerChange of the broker's vanished
    znode: its registration leaves the image; a stale epoch or a gone broker changes nothing."""
    state, ctx = ControllerState(), ControllerContext(rng=random.Random(1))
    endpoint = (BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),)
    live = (LiveBroker(1, 10, endpoint), LiveBroker(2, 20, endpoint))
    commit(state, run_operation(state, BrokerChange(live), ctx).records)
    stale = run_operation(state, FenceDeadBroker(2, 19, 0, "x"), ctx)
    assert stale.response.fenced is False and list(stale.records) == []
    result = run_operation(state, FenceDeadBroker(2, 20, 0, "refused"), ctx)
    assert result.response == FenceDeadBrokerResponse(fenced=True)
    assert UnregisterBrokerRecord(broker_id=2, broker_epoch=20) in result.records
    [failure] = broker_failures(
        FenceDeadBroker(2, 20, 0, "refused"), state.image, list(result.records)
    )
    assert (failure.broker_id, failure.reason) == (2, "process_dead")
    commit(state, result.records)
    assert set(state.image.cluster.brokers) == {1}
    assert run_operation(state, FenceDeadBroker(2, 20, 0, "x"), ctx).response.fenced is False
    failed = failed_response(FenceDeadBroker(B, E, 0, "x"), ErrorCode.NOT_CONTROLLER, "no")
    assert failed == FenceDeadBrokerResponse(
        error_code=int(ErrorCode.NOT_CONTROLLER), error_message="no"
    )


# -- the driver -------------------------------------------------------------------------------


class Probes:
    """Answers by (host, port) from a script: one list per listener, one entry per round."""

    def __init__(self, script: dict[tuple[str, int], list[ProbeResult]]) -> None:
        self.script = script
        self.asked: list[tuple[float, str, int]] = []

    async def probe(self, host: str, port: int) -> ProbeResult:
        self.asked.append((trio.current_time(), host, port))
        return self.script[(host, port)].pop(0)


def _image_with_broker(*, fenced: bool = False) -> MetadataImage:
    return _registered(unfenced=not fenced)[0].image


async def _run_driver(
    probes: Probes, image: MetadataImage, connection_events: list[tuple[str, int]]
) -> list[tuple[int, int, int, str]]:
    fenced: list[tuple[int, int, int, str]] = []

    async def fence(broker_id: int, epoch: int, lost_at_ms: int, evidence: str) -> str | None:
        fenced.append((broker_id, epoch, lost_at_ms, evidence))
        return None

    driver = FastFencing(
        image=lambda: image,
        active=lambda: True,
        probe=probes,
        fence=fence,
        clock_ms=lambda: int(trio.current_time() * 1000),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        for kind, connection_id in connection_events:
            if kind == "heard":
                driver.heard(connection_id, B, image.cluster.brokers[B].epoch, "h")
            else:
                driver.lost(connection_id)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    return fenced


async def test_a_lost_connection_is_probed_twice_then_fenced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    image = _image_with_broker()
    probes = Probes({("h", 9092): [REFUSED, REFUSED]})
    fenced = await _run_driver(probes, image, [("heard", 11), ("lost", 11)])
    epoch = image.cluster.brokers[B].epoch
    assert [(b, e) for b, e, _, _ in fenced] == [(B, epoch)]
    times = [t for t, _, _ in probes.asked]
    assert len(times) == ROUNDS and times[1] - times[0] >= ROUND_INTERVAL_MS / 1000


async def test_a_connection_that_carried_no_heartbeat_or_a_live_answer_fences_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    image = _image_with_broker()
    epoch = image.cluster.brokers[B].epoch
    alive = ProbeResult(Probe.ANSWERED, node_id=B, broker_epoch=epoch)
    probes = Probes({("h", 9092): [alive]})
    assert await _run_driver(probes, image, [("lost", 3), ("heard", 4), ("lost", 4)]) == []
    assert len(probes.asked) == 1  # connection 3 never carried a heartbeat: not probed


async def test_a_fenced_broker_is_not_probed(autojump_clock: trio.testing.MockClock) -> None:
    image = _image_with_broker(fenced=True)
    probes = Probes({})
    assert await _run_driver(probes, image, [("heard", 1), ("lost", 1)]) == []
    assert probes.asked == []


async def test_zk_mode_revives_a_broker_fenced_by_mistake(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A REJECT rule forges the refusals: fenced early; then the broker answers with its epoch
    (alive, its znode too) and is registered again, once."""
    registered = _image_with_broker()
    epoch = registered.cluster.brokers[B].epoch
    without = MetadataImage.empty()
    images = [registered]
    alive = ProbeResult(Probe.ANSWERED, node_id=B, broker_epoch=epoch)
    probes = Probes({("h", 9092): [REFUSED, REFUSED, REFUSED, alive]})
    revived: list[tuple[int, int]] = []

    async def fence(broker_id: int, e: int, lost_at_ms: int, evidence: str) -> str | None:
        images[0] = without  # the BrokerChange without it
        return None

    async def revive(broker_id: int, e: int) -> None:
        revived.append((broker_id, e))
        images[0] = registered

    driver = FastFencing(
        image=lambda: images[0],
        active=lambda: True,
        probe=probes,
        fence=fence,
        clock_ms=lambda: int(trio.current_time() * 1000),
        revive=revive,
        revival_window_s=30,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        driver.lost_address("h", 9092)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert revived == [(B, epoch)]
    assert len(probes.asked) == 4  # two rounds, a refused revival probe, the answer


async def test_only_the_listeners_at_the_heartbeats_address_are_probed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An advertised address elsewhere (a published port, a proxy) may refuse while the broker
    lives: Raft mode probes only the listeners at the address its heartbeats came from."""
    image = _image_with_broker()
    epoch = image.cluster.brokers[B].epoch
    probes = Probes({("h", 9092): [REFUSED, REFUSED]})

    async def fence(broker_id: int, e: int, lost_at_ms: int, evidence: str) -> str | None:
        return None

    async def resolve(name: str) -> set[str]:
        return {"10.0.0.7"} if name == "h" else set()

    driver = FastFencing(image=lambda: image, active=lambda: True, probe=probes, fence=fence,
                         clock_ms=lambda: 0, resolve=resolve)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        driver.heard(1, B, epoch, "10.0.0.8")  # no registered listener there: nothing to probe
        driver.lost(1)
        await trio.sleep(1)
        assert probes.asked == []
        driver.heard(2, B, epoch, "10.0.0.7")  # "h" resolves to it
        driver.lost(2)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert [(h, p) for _, h, p in probes.asked] == [("h", 9092)] * 2
