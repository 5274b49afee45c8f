"""The single-writer driver, over a fake in-memory MetadataLog and over the real local log."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry

from controller import operations
from controller.brokers import RegisterBroker
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.metrics import ControllerMetrics
from controller.result import ControllerResult
from controller.service.driver import MAX_RECORDS_PER_BATCH, ControllerDriver
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.broker_lifecycle import UnregisterBrokerResponse
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest
from protocol.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    NoOpRecord,
    OffsetRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from raft.local_log import LocalMetadataLog

Listener = Callable[[Sequence[OffsetRecord]], Awaitable[None]]


class FakeLog:
    """In-memory MetadataLog: commits at once unless `hold` is set; tells listeners."""

    def __init__(self) -> None:
        self.records: list[MetadataRecord] = []
        self.listeners: list[Listener] = []
        self.hold = False
        self.release = trio.Event()
        self.fail_with: KafkaError | None = None
        self.committed = -1
        self._progress = trio.Event()

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        first = len(self.records)
        self.records.extend(records)
        last = len(self.records) - 1
        if self.hold:
            await self.release.wait()
        for listener in self.listeners:
            await listener([OffsetRecord(o, self.records[o]) for o in range(first, last + 1)])
        self.committed = last
        self._progress.set()
        self._progress = trio.Event()
        return last

    async def wait_committed(self, offset: int) -> None:
        while self.committed < offset:
            await self._progress.wait()


def make_driver(log: Any, *, listen: bool = False, **kwargs: Any) -> ControllerDriver:
    ctx = ControllerContext(config=ControllerConfig(), rng=random.Random(3))
    driver = ControllerDriver(
        log, ControllerState(), ctx, metrics=ControllerMetrics(CollectorRegistry()), **kwargs
    )
    if listen:
        log.listeners.append(driver.handle_committed)
    return driver


def me(broker_id: int = 1) -> RegisterBroker:
    return RegisterBroker(
        broker_id=broker_id,
        incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092),),
    )


def create(*names: str, **kwargs: Any) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=tuple(CreatableTopic(name=n, **kwargs) for n in names))


@pytest.mark.parametrize("listen", [False, True])
async def test_register_then_create(listen: bool) -> None:
    log = FakeLog()
    driver = make_driver(log, listen=listen)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        registered = await driver.register_broker(me())
        assert registered.broker_epoch == 0
        assert log.records[:2] == [
            RegisterBrokerRecord(
                broker_id=1,
                incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
                broker_epoch=0,
                endpoints=me().endpoints,
                fenced=True,
            ),
            UnfenceBrokerRecord(id=1, epoch=0),
        ]
        response = await driver.submit(create("a", num_partitions=3))
        assert response.topics[0].error_code == 0
        topic = driver.state.topic("a")
        assert topic is not None and len(topic.partitions) == 3
        assert driver.state.last_applied_offset == len(log.records) - 1
        too_big = await driver.submit(create("b", replication_factor=2))
        assert too_big.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        again = await driver.register_broker(me())
        assert again.broker_epoch == driver.state.last_applied_offset - 1
        nursery.cancel_scope.cancel()


async def test_concurrent_creates_of_one_name_have_one_winner() -> None:
    log = FakeLog()
    driver = make_driver(log)
    results: list[int] = []

    async def one() -> None:
        response = await driver.submit(create("t"))
        results.append(response.topics[0].error_code)

    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        async with trio.open_nursery() as clients:
            for _ in range(5):
                clients.start_soon(one)
        nursery.cancel_scope.cancel()
    assert sorted(results) == [0] + [ErrorCode.TOPIC_ALREADY_EXISTS] * 4


async def test_full_topic_lifecycle_through_driver() -> None:
    log = FakeLog()
    driver = make_driver(log, listen=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        await driver.submit(create("t"))
        alter = IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=2,
                    resource_name="t",
                    configs=(
                        AlterableConfig(
                            name="retention.ms", config_operation=int(AlterConfigOp.SET), value="9"
                        ),
                    ),
                ),
            )
        )
        assert (await driver.submit(alter)).responses[0].error_code == 0
        described = await driver.submit(
            DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(
                        resource_type=2, resource_name="t", configuration_keys=("retention.ms",)
                    ),
                )
            )
        )
        assert described.results[0].configs[0].value == "9"
        deleted = await driver.submit(DeleteTopicsRequest(topic_names=("t", "t2")))
        assert [r.error_code for r in deleted.responses] == [0, 3]
        assert driver.state.topic("t") is None
        nursery.cancel_scope.cancel()


async def test_deadlines(autojump_clock: trio.testing.MockClock) -> None:
    log = FakeLog()
    driver = make_driver(log, listen=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        log.hold = True
        slow: list[Any] = []
        queued: list[Any] = []

        async def first() -> None:
            slow.append(await driver.submit(create("a"), timeout_s=1))

        async def second() -> None:
            queued.append(await driver.submit(create("b"), timeout_s=2))

        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(second)
        await trio.sleep(5)
        assert slow[0].topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert "within 1 s" in slow[0].topics[0].error_message
        assert queued[0].topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        # The running event is still finished: its records commit and are replayed.
        log.release.set()
        log.hold = False
        # Events run in order: once a later one is answered, the first has completed.
        response = await driver.submit(create("b"))
        assert driver.state.topic("a") is not None
        # The event that waited past its deadline in the queue never ran: "b" is new.
        assert response.topics[0].error_code == 0
        nursery.cancel_scope.cancel()


async def test_request_timeout_ms_is_the_deadline(autojump_clock: trio.testing.MockClock) -> None:
    log = FakeLog()
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        log.hold = True
        start = trio.current_time()
        response = await driver.submit(
            CreateTopicsRequest(topics=(CreatableTopic(name="a"),), timeout_ms=250)
        )
        assert response.topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert trio.current_time() - start == pytest.approx(0.25)
        log.release.set()
        nursery.cancel_scope.cancel()


async def test_append_failure_is_answered_and_state_unchanged() -> None:
    log = FakeLog()
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        before = driver.state.image
        log.fail_with = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk full")
        response = await driver.submit(create("a"))
        assert response.topics[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert response.topics[0].error_message == "disk full"
        assert driver.state.image is before
        with pytest.raises(KafkaError) as info:
            await driver.register_broker(me(2))
        assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        log.fail_with = None
        assert (await driver.submit(create("a"))).topics[0].error_code == 0
        nursery.cancel_scope.cancel()


async def test_operation_bug_is_unknown_server_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise ZeroDivisionError("oops")

    monkeypatch.setitem(operations.OPERATIONS, DeleteTopicsRequest, broken)
    log = FakeLog()
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        response = await driver.submit(DeleteTopicsRequest(topic_names=("x",)))
        assert response.responses[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert "oops" in response.responses[0].error_message
        await driver.register_broker(me())  # still serving
        nursery.cancel_scope.cancel()


async def test_unhandled_request_type() -> None:
    driver = make_driver(FakeLog())
    with pytest.raises(TypeError, match="MetadataRequest"):
        await driver.submit(MetadataRequest())


async def test_stopping_answers_not_controller() -> None:
    log = FakeLog()
    driver = make_driver(log)
    answers: dict[str, Any] = {}

    async def client(name: str) -> None:
        answers[name] = await driver.submit(create(name))

    async with trio.open_nursery() as clients, trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        log.hold = True
        clients.start_soon(client, "running")
        await trio.testing.wait_all_tasks_blocked()
        clients.start_soon(client, "queued")
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    for name in ("running", "queued"):
        assert answers[name].topics[0].error_code == ErrorCode.NOT_CONTROLLER
    after = await driver.submit(create("b"))
    assert after.topics[0].error_code == ErrorCode.NOT_CONTROLLER


async def test_run_twice_is_refused() -> None:
    driver = make_driver(FakeLog())
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        with pytest.raises(RuntimeError):
            await driver.run()
        nursery.cancel_scope.cancel()


async def test_metrics() -> None:
    registry = CollectorRegistry()
    log = FakeLog()
    driver = ControllerDriver(log, metrics=ControllerMetrics(registry))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(me())
        await driver.submit(create("a"))
        epoch = driver.state.image.cluster.broker(1).epoch
        shutdown = await driver.submit(ControlledShutdownRequest(broker_id=1, broker_epoch=epoch))
        assert shutdown.error_code == 0
        nursery.cancel_scope.cancel()
    prefix = "kafka_controller_controllereventmanager_"
    assert registry.get_sample_value(prefix + "eventqueuesize") == 0
    assert registry.get_sample_value(prefix + "eventqueuetimems_count") == 3
    assert registry.get_sample_value(prefix + "eventqueueprocessingtimems_count") == 3
    # Each event type has its own timer (Kafka's ControllerState): the controlled shutdown is
    # not a BrokerChange (LeaderElectionRateAndTimeMs), broker registration has none.
    stats = "kafka_controller_controllerstats_"
    assert registry.get_sample_value(stats + "controlledshutdownrateandtimems_count") == 1
    assert registry.get_sample_value(stats + "topicchangerateandtimems_count") == 1
    assert registry.get_sample_value(stats + "leaderelectionrateandtimems_count") == 0


async def test_standalone_over_local_log_survives_restart(tmp_path: Path) -> None:
    async def start(nursery: trio.Nursery) -> tuple[LocalMetadataLog, ControllerDriver]:
        log = LocalMetadataLog(tmp_path)
        driver = ControllerDriver(log, metrics=ControllerMetrics(CollectorRegistry()))
        log.add_listener(driver.handle_committed)
        await log.open()
        await nursery.start(driver.run)
        await driver.register_broker(me())
        return log, driver

    async with trio.open_nursery() as nursery:
        log, driver = await start(nursery)
        assert (await driver.submit(create("a", num_partitions=2))).topics[0].error_code == 0
        assert (await driver.submit(create("b"))).topics[0].error_code == 0
        assert (await driver.submit(DeleteTopicsRequest(topic_names=("b",)))).responses[
            0
        ].error_code == 0
        before = driver.state.image
        nursery.cancel_scope.cancel()
    await log.aclose()

    async with trio.open_nursery() as nursery:
        log, driver = await start(nursery)
        image = driver.state.image
        assert image.topics.by_name.keys() == before.topics.by_name.keys() == {"a"}
        assert image.topics.get_topic("a") == before.topics.get_topic("a")
        broker = image.cluster.broker(1)
        assert (
            broker is not None and broker.usable and broker.epoch > before.cluster.brokers[1].epoch
        )
        again = await driver.submit(create("a"))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        nursery.cancel_scope.cancel()
    await log.aclose()


class ManyNoOps:
    """A request whose operation writes `count` records, atomically or not."""

    RESPONSE = UnregisterBrokerResponse

    def __init__(self, count: int, atomic: bool) -> None:
        self.count, self.atomic = count, atomic


def many_noops(
    state: Any, request: ManyNoOps, ctx: Any
) -> ControllerResult[UnregisterBrokerResponse]:
    return ControllerResult(
        records=[NoOpRecord()] * request.count,
        response=UnregisterBrokerResponse(),
        atomic=request.atomic,
    )


class SizesLog(FakeLog):
    """Records the size of every append; `fail_at`: the append (0-based) that fails."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.fail_at: int | None = None

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.fail_at == len(self.sizes):
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "lost the leadership")
        self.sizes.append(len(records))
        return await super().append(records)


async def test_a_non_atomic_result_is_appended_in_bounded_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fenced broker's 25,000 partition changes went out as one Raft batch: nothing of it
    reached a broker before the whole of it had committed."""
    monkeypatch.setitem(operations.OPERATIONS, ManyNoOps, many_noops)
    log = SizesLog()
    driver = make_driver(log)
    n = MAX_RECORDS_PER_BATCH
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        assert (await driver.submit(ManyNoOps(2 * n + 5, atomic=False))).error_code == 0
        assert log.sizes == [n, n, 5]
        assert (await driver.submit(ManyNoOps(2 * n + 5, atomic=True))).error_code == 0
        assert log.sizes[3:] == [2 * n + 5]
        assert driver.state.committed_offset == len(log.records) - 1
        nursery.cancel_scope.cancel()


async def test_a_failure_between_batches_reverts_to_the_committed_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(operations.OPERATIONS, ManyNoOps, many_noops)
    log = SizesLog()
    log.hold = True  # nothing commits: the first batch stays pending
    driver = make_driver(log)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        committed = driver.state.image
        log.fail_at = 1

        async def submit() -> None:
            response = await driver.submit(ManyNoOps(MAX_RECORDS_PER_BATCH + 1, atomic=False))
            assert response.error_code == ErrorCode.NOT_CONTROLLER

        with trio.fail_after(10):
            async with trio.open_nursery() as inner:
                inner.start_soon(submit)
                await trio.testing.wait_all_tasks_blocked()
                assert log.sizes == [MAX_RECORDS_PER_BATCH]
                log.release.set()
        assert driver.state.image is committed
        with pytest.raises(KafkaError) as info:
            await driver.register_broker(me())
        assert info.value.code == ErrorCode.NOT_CONTROLLER  # writes nothing until a new term
        nursery.cancel_scope.cancel()


class PendingLog(FakeLog):
    """Appends get offsets at once and commit only when told; appending a batch of
    `fail_on_size` records makes every pending commit fail (the leadership was lost)."""

    def __init__(self, fail_on_size: int) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.fail_on_size = fail_on_size
        self.lost = trio.Event()

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.sizes.append(len(records))
        self.records.extend(records)
        if len(records) == self.fail_on_size:
            self.lost.set()
            # The failure is seen (the purgatory ran) before this append returns.
            await trio.testing.wait_all_tasks_blocked()
        return len(self.records) - 1

    async def wait_committed(self, offset: int) -> None:
        await self.lost.wait()
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "lost the leadership")


async def test_a_commit_failure_between_batches_stops_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An earlier write failing to commit while a non-atomic result is being appended: the
    result fails with it and its later batches are not appended (the controller writes
    nothing more until a new term)."""
    monkeypatch.setitem(operations.OPERATIONS, ManyNoOps, many_noops)
    n = MAX_RECORDS_PER_BATCH
    log = PendingLog(fail_on_size=n)
    driver = make_driver(log)
    answers: list[int] = []

    async def submit(request: ManyNoOps) -> None:
        answers.append((await driver.submit(request)).error_code)

    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        with trio.fail_after(10):
            async with trio.open_nursery() as inner:
                inner.start_soon(submit, ManyNoOps(1, atomic=True))
                await trio.testing.wait_all_tasks_blocked()
                inner.start_soon(submit, ManyNoOps(n + 1, atomic=False))
        assert log.sizes == [1, n]  # the second batch was never appended
        assert answers == [ErrorCode.NOT_CONTROLLER] * 2
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("listen", [False, True])
async def test_each_batch_of_a_non_atomic_result_is_propagated_once_committed(
    monkeypatch: pytest.MonkeyPatch, listen: bool
) -> None:
    """ZK mode propagates through commit hooks: a dead broker's 25,000 changes were sent to
    the brokers only once the last of them was written (3.5 s of znode writes and one
    LeaderAndIsr of every partition), not batch by batch."""
    monkeypatch.setitem(operations.OPERATIONS, ManyNoOps, many_noops)
    log = SizesLog()
    driver = make_driver(log, listen=listen)
    seen: list[tuple[int, int]] = []
    driver.add_commit_hook(
        lambda before, after: seen.append(
            (before.provenance.last_offset, after.provenance.last_offset)
        )
    )
    n = MAX_RECORDS_PER_BATCH
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        assert (await driver.submit(ManyNoOps(2 * n + 5, atomic=False))).error_code == 0
        assert seen == [(-1, n - 1), (n - 1, 2 * n - 1), (2 * n - 1, 2 * n + 4)]
        seen.clear()
        assert (await driver.submit(ManyNoOps(2 * n + 5, atomic=True))).error_code == 0
        assert seen == [(2 * n + 4, 4 * n + 9)]
        nursery.cancel_scope.cancel()
