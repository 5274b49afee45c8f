"""controller.service.terms.ControllerService over a fake Leadership and a minimal TermMode, in
virtual time: the term lifecycle both metadata modes share. Elected -> claimed -> serving;
Lost -> NOT_CONTROLLER naming the controller; a new Elected ends the old term first; a claim
that loads an image replaces the state, a replayed one is reverted at the term's end; refused
writes make the service resign (once); a failed activation resigns instead of crashing."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio
import trio.testing
from prometheus_client import CollectorRegistry

from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.metrics import ControllerMetrics
from controller.service.driver import ControllerDriver
from controller.service.terms import ControllerService, Term
from protocol.errors import ErrorCode
from protocol.metadata.image import MetadataImage
from protocol.metadata.leadership import Claim, Elected, LeadershipChange, Lost
from tests.support.waiting import wait_until
from tests.unit.controller.test_controller_driver import FakeLog, create, me


class FakeLeadership:
    node_id = 1

    def __init__(self, *, load: MetadataImage | None = None) -> None:
        self.send, self.receive = trio.open_memory_channel[LeadershipChange](math.inf)
        self.active_id: int | None = None
        self.load = load
        self.log: FakeLog | UncommittedLog = FakeLog()
        self.refused: BaseException | None = None
        self.resigned = 0
        self.claims: list[int] = []
        self.fail_claim = False
        self.uncommitted = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    async def changes(self) -> AsyncIterator[LeadershipChange]:
        async for change in self.receive:
            if isinstance(change, Elected):
                self.active_id = self.node_id
            yield change

    def not_controller_message(self) -> str:
        return f"node 1 is not the controller (active: {self.active_id})"

    async def claim(self, elected: Elected) -> Claim | None:
        self.claims.append(elected.epoch)
        if self.fail_claim:
            raise RuntimeError("the backend broke")
        self.log = UncommittedLog() if self.uncommitted else FakeLog()
        return Claim(image=self.load)

    def term_log(self) -> FakeLog | UncommittedLog:
        return self.log

    def writes_refused(self) -> BaseException | None:
        return self.refused

    async def resign(self) -> None:
        self.resigned += 1


class UncommittedLog:
    """Appends, never commits (a leader cut off from its quorum)."""

    def __init__(self) -> None:
        self.end = -1

    async def append(self, records: Any) -> int:
        self.end += len(records)
        return self.end

    async def wait_committed(self, offset: int) -> None:
        await trio.sleep_forever()


class PlainMode:
    """A mode that adds nothing: the driver's answer as it is."""

    def __init__(self) -> None:
        self.started_terms: list[int] = []

    def attach(self, service: ControllerService) -> None:
        self.service = service

    async def run(self, service: ControllerService, nursery: trio.Nursery) -> None:
        return None

    def context(self, term: Term, ctx: ControllerContext, claim: Claim) -> ControllerContext:
        return ctx

    def on_commit(self, term: Term) -> Callable[..., None] | None:
        return None

    async def start(self, term: Term, driver: ControllerDriver, image: MetadataImage) -> None:
        self.started_terms.append(term.epoch)

    def start_tasks(self, term: Term, driver: ControllerDriver) -> None:
        return None

    async def submit(self, term: Term, driver: ControllerDriver, request: Any) -> Any:
        return await driver.submit(request)


def make_service(leadership: FakeLeadership) -> ControllerService:
    ctx = ControllerContext(config=ControllerConfig(), rng=random.Random(3))
    return ControllerService(
        leadership, PlainMode(), ctx, metrics=ControllerMetrics(CollectorRegistry())
    )


async def test_elected_serves_and_lost_answers_not_controller(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leadership = FakeLeadership()
    service = make_service(leadership)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        assert not service.is_active
        refused = await service.submit(create("a", num_partitions=1, replication_factor=1))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER

        leadership.send.send_nowait(Elected(epoch=4))
        await wait_until(lambda: service.is_active, within=5)
        assert service.epoch == 4 and service.terms == 1
        assert (await service.submit(me(1))).error_code == ErrorCode.NONE

        leadership.active_id = 2
        leadership.send.send_nowait(Lost("controller moved to broker 2"))
        await wait_until(lambda: not service.is_active, within=5)
        refused = await service.submit(create("b", num_partitions=1, replication_factor=1))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert "active: 2" in refused.topics[0].error_message
        nursery.cancel_scope.cancel()


async def test_a_new_election_ends_the_old_term_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leadership = FakeLeadership()
    service = make_service(leadership)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        leadership.send.send_nowait(Elected(epoch=1))
        await wait_until(lambda: service.epoch == 1, within=5)
        first = service.term
        leadership.send.send_nowait(Elected(epoch=2))
        await wait_until(lambda: service.epoch == 2, within=5)
        assert first is not None and first.finished.is_set() and first.driver is None
        assert leadership.claims == [1, 2] and service.terms == 2
        nursery.cancel_scope.cancel()


async def test_a_replayed_state_reverts_a_loaded_one_is_replaced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Replayed (claim.image None): what the term appended but never committed goes.
    leadership = FakeLeadership()
    service = make_service(leadership)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        leadership.uncommitted = True
        leadership.send.send_nowait(Elected(epoch=1))
        await wait_until(lambda: service.is_active, within=5)
        state = service.state
        assert isinstance(leadership.log, UncommittedLog)
        answers: list[Any] = []

        async def register() -> None:
            answers.append(await service.submit(me(1)))

        nursery.start_soon(register)
        await wait_until(lambda: 1 in state.image.cluster.brokers, within=5)
        assert 1 not in state.committed_image.cluster.brokers
        leadership.send.send_nowait(Lost("gone"))
        await wait_until(lambda: bool(answers), within=5)
        assert answers[0].error_code == ErrorCode.NOT_CONTROLLER
        await wait_until(lambda: not service.is_active, within=5)
        assert service.state is state and 1 not in state.image.cluster.brokers
        nursery.cancel_scope.cancel()
    # Loaded (ZooKeeper): the term starts from the claim's image.
    loaded = FakeLeadership(load=MetadataImage.empty("cluster-z"))
    service = make_service(loaded)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        loaded.send.send_nowait(Elected(epoch=1))
        await wait_until(lambda: service.is_active, within=5)
        assert service.state.image.cluster_id == "cluster-z"
        nursery.cancel_scope.cancel()


async def test_refused_writes_resign_once(autojump_clock: trio.testing.MockClock) -> None:
    leadership = FakeLeadership()
    service = make_service(leadership)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        leadership.send.send_nowait(Elected(epoch=1))
        await wait_until(lambda: service.is_active, within=5)
        leadership.refused = RuntimeError("/controller_epoch is no longer at version 3")
        await service.submit(me(1))
        await service.submit(me(2))
        await wait_until(lambda: leadership.resigned == 1, within=5)
        assert not service.is_active  # resigning: requests go elsewhere at once
        await trio.sleep(1)
        assert leadership.resigned == 1
        nursery.cancel_scope.cancel()


async def test_a_failed_activation_resigns(autojump_clock: trio.testing.MockClock) -> None:
    leadership = FakeLeadership()
    leadership.fail_claim = True
    service = make_service(leadership)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        leadership.send.send_nowait(Elected(epoch=1))
        await wait_until(lambda: leadership.resigned == 1, within=5)
        assert not service.is_active
        nursery.cancel_scope.cancel()
