"""Pipelined controller writes (KRaft's QuorumController purgatory), over a MetadataLog whose
commits the test controls: `append` returns at once, records commit only on `commit(offset)`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import trio
import trio.testing
from prometheus_client import CollectorRegistry

from controller.brokers import RegisterBroker
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.metrics import ControllerMetrics
from controller.service.driver import ControllerDriver
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest
from protocol.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    MetadataRecord,
    NoOpRecord,
    OffsetRecord,
)


class PipeLog:
    """Appends at once (like a Raft leader accepting a proposal); commits when told to,
    delivering the records to the driver's listener first, as RaftMetadataLog does."""

    def __init__(self) -> None:
        self.records: list[MetadataRecord] = []
        self.committed = -1
        self.failure: KafkaError | None = None
        self.listener: Any = None
        self._progress = trio.Event()

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.records.extend(records)
        return len(self.records) - 1

    async def commit(self, offset: int) -> None:
        batch = [OffsetRecord(o, self.records[o]) for o in range(self.committed + 1, offset + 1)]
        if self.listener is not None and batch:
            await self.listener(batch)
        self.committed = offset
        self._wake()

    def fail(self, error: KafkaError) -> None:
        self.failure = error
        self._wake()

    def _wake(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    async def wait_committed(self, offset: int) -> None:
        while self.committed < offset:
            if self.failure is not None:
                raise self.failure
            await self._progress.wait()


def make_driver(log: PipeLog, **kwargs: Any) -> ControllerDriver:
    ctx = ControllerContext(config=ControllerConfig(), rng=random.Random(3))
    driver = ControllerDriver(
        log, ControllerState(), ctx, metrics=ControllerMetrics(CollectorRegistry()), **kwargs
    )
    log.listener = driver.handle_committed
    return driver


def me() -> RegisterBroker:
    return RegisterBroker(
        broker_id=1,
        incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092),),
    )


def create(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=(CreatableTopic(name=name),))


def describe(name: str) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=2, resource_name=name),)
    )


class Answers:
    """Submits requests in the background and records their answers in arrival order."""

    def __init__(self, driver: ControllerDriver, nursery: trio.Nursery) -> None:
        self.driver = driver
        self.nursery = nursery
        self.got: dict[str, Any] = {}
        self.order: list[str] = []

    async def submit(self, key: str, request: object) -> None:
        """Submit and wait until the driver took it (appended or answered)."""
        before = len(self.driver.state.image.topics.by_name), self.driver.pending

        async def one() -> None:
            self.got[key] = await self.driver.submit(request)
            self.order.append(key)

        self.nursery.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()
        assert (len(self.driver.state.image.topics.by_name), self.driver.pending) != before or (
            key in self.got
        )


async def registered(driver: ControllerDriver, log: PipeLog, nursery: trio.Nursery) -> None:
    await nursery.start(driver.run)
    async with trio.open_nursery() as inner:
        inner.start_soon(driver.register_broker, me())
        await trio.testing.wait_all_tasks_blocked()
        await log.commit(len(log.records) - 1)


async def test_two_writes_in_flight_the_second_sees_the_first_and_answers_come_in_commit_order() -> (
    None
):
    log = PipeLog()
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await registered(driver, log, nursery)
        base = log.committed
        answers = Answers(driver, nursery)
        await answers.submit("a", create("a"))
        a_end = len(log.records) - 1
        await answers.submit("a-again", create("a"))
        await answers.submit("b", create("b"))
        # Both creations appended before either committed; the second "a" saw the first.
        assert log.committed == base and len(log.records) > base + 2
        assert driver.state.topic("a") is not None and driver.state.topic("b") is not None
        assert "a" not in driver.state.committed_image.topics.by_name
        assert answers.got == {} and driver.pending == 3
        await log.commit(a_end)
        await trio.testing.wait_all_tasks_blocked()
        # The failed "a-again" waited for the highest offset pending when it ran: a's.
        assert answers.order == ["a", "a-again"]
        assert "a" in driver.state.committed_image.topics.by_name
        assert "b" not in driver.state.committed_image.topics.by_name
        await log.commit(len(log.records) - 1)
        await trio.testing.wait_all_tasks_blocked()
        assert answers.order == ["a", "a-again", "b"]
        assert answers.got["a"].topics[0].error_code == 0
        assert answers.got["a-again"].topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert answers.got["b"].topics[0].error_code == 0
        assert driver.state.committed_image is driver.state.image
        nursery.cancel_scope.cancel()


async def test_a_read_waits_for_the_highest_pending_offset() -> None:
    log = PipeLog()
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await registered(driver, log, nursery)
        answers = Answers(driver, nursery)
        await answers.submit("read-before", describe("missing"))
        assert answers.order == ["read-before"]  # nothing pending: answered at once
        await answers.submit("a", create("a"))
        await answers.submit("read", describe("a"))
        assert "read" not in answers.got  # it saw "a", which has not committed
        await log.commit(len(log.records) - 2)
        await trio.testing.wait_all_tasks_blocked()
        assert "read" not in answers.got
        await log.commit(len(log.records) - 1)
        await trio.testing.wait_all_tasks_blocked()
        assert answers.order == ["read-before", "a", "read"]
        assert answers.got["read"].results[0].error_code == 0
        nursery.cancel_scope.cancel()


async def test_a_failed_commit_fails_the_later_writes_and_reverts_the_state() -> None:
    log = PipeLog()
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await registered(driver, log, nursery)
        committed = driver.state.committed_image
        answers = Answers(driver, nursery)
        await answers.submit("a", create("a"))
        await answers.submit("b", create("b"))
        await answers.submit("read", describe("b"))
        assert driver.state.topic("b") is not None
        log.fail(KafkaError(ErrorCode.NOT_CONTROLLER, "node 1 stopped leading epoch 3"))
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(answers.order) == ["a", "b", "read"]  # failed together
        assert answers.got["a"].topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert "stopped leading epoch 3" in answers.got["a"].topics[0].error_message
        assert answers.got["b"].topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert answers.got["read"].results[0].error_code == ErrorCode.NOT_CONTROLLER
        assert driver.state.image is committed and driver.state.topic("a") is None
        appended = len(log.records)
        later = await driver.submit(create("c"))
        assert later.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert len(log.records) == appended  # nothing more written
        nursery.cancel_scope.cancel()


async def test_the_pipeline_is_bounded() -> None:
    log = PipeLog()
    driver = make_driver(log, max_pending=2)
    async with trio.open_nursery() as nursery:
        await registered(driver, log, nursery)
        answers = Answers(driver, nursery)
        await answers.submit("a", create("a"))
        await answers.submit("b", create("b"))
        nursery.start_soon(driver.submit, create("c"))
        await trio.testing.wait_all_tasks_blocked()
        assert driver.state.topic("c") is None  # waits for room in the purgatory
        await log.commit(len(log.records) - 1)
        await trio.testing.wait_all_tasks_blocked()
        assert driver.state.topic("c") is not None
        nursery.cancel_scope.cancel()


async def test_stopping_fails_pending_writes_with_not_controller() -> None:
    log = PipeLog()
    driver = make_driver(log)
    got: list[Any] = []

    async def client() -> None:
        got.append(await driver.submit(create("a")))

    async with trio.open_nursery() as outer, trio.open_nursery() as served:
        await registered(driver, log, served)
        outer.start_soon(client)
        await trio.testing.wait_all_tasks_blocked()
        assert driver.pending == 1 and driver.state.topic("a") is not None
        served.cancel_scope.cancel()
    assert got[0].topics[0].error_code == ErrorCode.NOT_CONTROLLER
    assert driver.state.topic("a") is None  # reverted to the committed image


# ControllerState on its own.


def cfg(value: str) -> ConfigRecord:
    return ConfigRecord(resource_type=4, resource_name="1", name="x", value=value)


def test_state_commit_moves_the_committed_image_and_revert_drops_pending() -> None:
    state = ControllerState()
    state.replay_pending([cfg("1"), cfg("2")], 1)
    state.replay_pending([cfg("3")], 2)
    assert state.next_offset == 3 and state.committed_offset == -1
    state.replay([(0, cfg("1"))])  # part of the first append committed
    assert state.committed_offset == 0 and state.pending_appends == 2
    state.mark_committed(1)
    assert state.committed_offset == 1 and state.pending_appends == 1
    state.revert()
    assert state.next_offset == 2 and state.image is state.committed_image


def test_state_replay_of_another_leaders_records_reverts_first() -> None:
    state = ControllerState()
    state.replay_pending([cfg("mine")], 0)
    # Another leader's entry committed at offset 0: ours never will.
    assert state.replay([(0, NoOpRecord()), (1, cfg("theirs"))]) == 2
    assert state.committed_offset == 1 and state.pending_appends == 0
    assert state.image is state.committed_image


def test_state_pending_over_a_hole_fills_it_with_noops() -> None:
    state = ControllerState()
    assert state.replay_pending([cfg("1")], 2) == 1  # offsets 0-1: a Raft control entry
    assert state.next_offset == 3
    state.replay([(0, NoOpRecord()), (1, NoOpRecord()), (2, cfg("1"))])
    assert state.committed_offset == 2 and state.pending_appends == 0
