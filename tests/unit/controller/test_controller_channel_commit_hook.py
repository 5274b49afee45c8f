"""The driver's post-commit hook, and propagation through it into per-broker channels."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence

import pytest
import trio
from prometheus_client import CollectorRegistry

from controller.brokers import RegisterBroker
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.metrics import ControllerMetrics
from controller.propagation import ControllerIdentity, plan_propagation
from controller.service.channel import ControllerChannelManager
from controller.service.driver import ControllerDriver
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import BrokerEndpoint, MetadataRecord, OffsetRecord

Listener = Callable[[Sequence[OffsetRecord]], Awaitable[None]]


class FakeLog:
    """Commits at once; tells listeners during the append (as ZkMetadataLog does)."""

    def __init__(self) -> None:
        self.records: list[MetadataRecord] = []
        self.listeners: list[Listener] = []
        self.fail_with: KafkaError | None = None

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        first = len(self.records)
        self.records.extend(records)
        batch = [OffsetRecord(first + i, r) for i, r in enumerate(records)]
        for listener in self.listeners:
            await listener(batch)
        return len(self.records) - 1

    async def wait_committed(self, offset: int) -> None:
        assert offset < len(self.records)


def make_driver(log: FakeLog, **kwargs: object) -> ControllerDriver:
    ctx = ControllerContext(config=ControllerConfig(), rng=random.Random(3))
    return ControllerDriver(
        log,
        ControllerState(),
        ctx,
        metrics=ControllerMetrics(CollectorRegistry()),
        **kwargs,  # type: ignore[arg-type]
    )


def register(broker_id: int) -> RegisterBroker:
    return RegisterBroker(
        broker_id=broker_id,
        incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id),),
    )


def create(name: str, partitions: int = 1, rf: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf),)
    )


@pytest.mark.parametrize("listen", [False, True])
async def test_hook_sees_the_images_around_each_committed_event(listen: bool) -> None:
    log = FakeLog()
    seen: list[tuple[MetadataImage, MetadataImage]] = []
    driver = make_driver(log, on_commit=lambda before, after: seen.append((before, after)))
    if listen:
        # The listener replays during the append: `before` must still be the old image.
        log.listeners.append(driver.handle_committed)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(register(1))
        assert len(seen) == 1
        assert seen[0][0].cluster.brokers == {}
        assert list(seen[0][1].cluster.brokers) == [1]
        await driver.submit(create("a"))
        before, after = seen[1]
        assert "a" not in before.topics.by_name and "a" in after.topics.by_name
        assert after is driver.state.image
        nursery.cancel_scope.cancel()


async def test_no_hook_without_records_or_when_the_append_fails() -> None:
    log = FakeLog()
    seen: list[object] = []
    driver = make_driver(log)
    driver.add_commit_hook(lambda before, after: seen.append(after))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(register(1))
        seen.clear()
        described = await driver.submit(
            DescribeConfigsRequest(
                resources=(DescribeConfigsResource(resource_type=2, resource_name="nope"),)
            )
        )
        assert described.results[0].error_code != 0 or described.results[0].configs == ()
        log.fail_with = KafkaError(ErrorCode.NOT_CONTROLLER, "fenced")
        failed = await driver.submit(create("a"))
        assert failed.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert seen == []
        nursery.cancel_scope.cancel()


async def test_a_failing_hook_does_not_fail_the_event_or_the_other_hooks() -> None:
    log = FakeLog()
    seen: list[object] = []

    def broken(before: MetadataImage, after: MetadataImage) -> None:
        raise RuntimeError("hook bug")

    driver = make_driver(log, on_commit=broken)
    driver.add_commit_hook(lambda before, after: seen.append(after))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.register_broker(register(1))
        response = await driver.submit(create("a"))
        assert response.topics[0].error_code == 0
        assert len(seen) == 2
        nursery.cancel_scope.cancel()


class RecordingSender:
    def __init__(self) -> None:
        self.by_port: dict[int, list[Request]] = defaultdict(list)

    async def send(self, host: str, port: int, request: Request, *, timeout_s: float) -> Response:
        self.by_port[port].append(request)
        return request.RESPONSE()


async def test_commits_propagate_through_the_channels_to_the_replicas() -> None:
    log = FakeLog()
    sender = RecordingSender()
    channels = ControllerChannelManager(sender, retry_backoff_s=0.01)
    identity = ControllerIdentity(controller_id=1, controller_epoch=7)

    def propagate(before: MetadataImage, after: MetadataImage) -> None:
        channels.update_brokers(after)
        channels.send_plan(plan_propagation(before, after, identity))

    driver = make_driver(log, on_commit=propagate)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        await nursery.start(driver.run)
        for broker_id in (1, 2, 3):
            await driver.register_broker(register(broker_id))
        await channels.wait_idle()
        sender.by_port.clear()
        await driver.submit(create("t", partitions=3, rf=2))
        await channels.wait_idle()
        assert sorted(sender.by_port) == [9001, 9002, 9003]
        for port, requests in sender.by_port.items():
            kinds = [type(r) for r in requests]
            assert kinds == [LeaderAndIsrRequest, UpdateMetadataRequest], port
            lai = requests[0]
            assert isinstance(lai, LeaderAndIsrRequest)
            assert lai.controller_epoch == 7
            hosted = [p for t in lai.topic_states for p in t.partition_states]
            assert all(port - 9000 in p.replicas and p.is_new for p in hosted)
        nursery.cancel_scope.cancel()
