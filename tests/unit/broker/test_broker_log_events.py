"""The broker's catalogued events (protocol.telemetry.LOG_EVENTS) and its log context:

- "partition leadership applied" when a partition takes a new leader epoch (creation too), as
  leader or follower; nothing for an ISR-only change or a stale one;
- "isr shrink" / "isr expand" when a leader's committed ISR changes, by the controller (a
  LeaderAndIsr / metadata change) or by its own AlterPartition (the answer, or the metadata
  that brings the proposed ISR first);
- broker.server binds correlation_id, client_id and api for one request only, and a task
  started while serving a request (`protocol.log_context.detached`) does not inherit them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from broker.alter_partition import AlterPartitionManager
from broker.config import Listener
from broker.partitions import PartitionManager
from broker.replica.partition_state import PartitionChange
from broker.server import BrokerServer, ConnectionInfo
from protocol.codec import RequestEnvelope
from protocol.log_context import detached
from protocol.messages import Response
from protocol.messages.alter_partition import (
    AlterPartitionPartitionResult,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.names import TopicPartition
from storage.log_manager import LogManager
from tests.support.log_events import assert_schema, catalogued
from tests.support.wire import WireClient

TP = TopicPartition("t", 0)


@pytest.fixture
def partitions(tmp_path: Path) -> PartitionManager:
    logs = LogManager([tmp_path], node_id=1)
    logs.startup()
    return PartitionManager(logs, 1, lambda topic: {})


def change(leader: int, epoch: int, isr: tuple[int, ...], pe: int) -> PartitionChange:
    return PartitionChange(TP, "tid", leader, epoch, isr, (1, 2, 3), pe)


def test_leadership_applied_on_new_epochs_only(partitions: PartitionManager) -> None:
    with structlog.testing.capture_logs() as events:
        partitions.become(change(1, 0, (1, 2, 3), 0))  # created, leader
        partitions.become(change(1, 0, (1, 2, 3), 0))  # stale: skipped
        partitions.become(change(2, 1, (2, 3), 1))  # follower now
        partitions.become(change(2, 1, (2, 3, 1), 2))  # an ISR change of someone else's
    applied = catalogued(events, "partition leadership applied")
    assert [
        (e["role_in_partition"], e["leader"], e["leader_epoch"], e["previous_leader"], e["isr"])
        for e in applied
    ] == [("leader", 1, 0, -1, [1, 2, 3]), ("follower", 2, 1, 1, [2, 3])]
    assert (applied[0]["topic"], applied[0]["partition"]) == ("t", 0)
    assert not [e for e in events if e["event"] in ("isr shrink", "isr expand")]


def test_controller_made_isr_changes_of_a_leader(partitions: PartitionManager) -> None:
    partitions.become(change(1, 0, (1, 2, 3), 0))
    with structlog.testing.capture_logs() as events:
        partitions.become(change(1, 1, (1, 3), 1))  # ZK: a controller shrink bumps the epoch
        partitions.become(change(1, 1, (1, 3, 2), 2))
    assert_schema(events)
    (shrink,) = catalogued(events, "isr shrink")
    (expand,) = catalogued(events, "isr expand")
    assert (shrink["old_isr"], shrink["new_isr"], shrink["origin"], shrink["leader_epoch"]) == (
        [1, 2, 3],
        [1, 3],
        "controller",
        1,
    )
    assert (expand["old_isr"], expand["new_isr"], expand["partition_epoch"]) == (
        [1, 3],
        [1, 3, 2],
        2,
    )
    # The same leader in a new epoch is a leadership applied too (Kafka's makeLeader).
    assert len(catalogued(events, "partition leadership applied")) == 1


class _Controller:
    def __init__(self) -> None:
        self.answer: Any = None

    async def submit(self, request: Any) -> Any:
        return self.answer


def _committed(isr: tuple[int, ...], pe: int) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        topics=(
            AlterPartitionTopicResult(
                topic_name="t",
                topic_id="tid",
                partitions=(
                    AlterPartitionPartitionResult(
                        partition_index=0,
                        error_code=0,
                        leader_id=1,
                        leader_epoch=0,
                        isr=isr,
                        partition_epoch=pe,
                    ),
                ),
            ),
        )
    )


async def test_own_alter_partition_shrink_then_expand(partitions: PartitionManager) -> None:
    partitions.become(change(1, 0, (1, 2, 3), 0))
    state = partitions.partitions[TP].state
    controller = _Controller()
    manager = AlterPartitionManager(1, partitions, controller, lambda: 5)
    with structlog.testing.capture_logs() as events:
        now = state.clock_ms() + 10 * state.replica_lag_time_max_ms
        assert manager.maybe_shrink_isr(now) == 1  # 2 and 3 never fetched
        controller.answer = _committed((1,), 1)
        await manager._send(dict(manager._queued))
    (shrink,) = catalogued(events, "isr shrink")
    assert (shrink["old_isr"], shrink["new_isr"], shrink["origin"]) == (
        [1, 2, 3],
        [1],
        "alter_partition",
    )

    # The metadata with the proposed ISR may come before the answer: still the leader's own.
    proposal = state.maybe_expand_isr(2) if state.can_join_isr(2) else None
    if proposal is None:
        state.update_follower_leo(2, state.log_end_offset)
        proposal = state.maybe_expand_isr(2)
    assert proposal is not None
    with structlog.testing.capture_logs() as events:
        partitions.become(change(1, 0, (1, 2), 2))
    (expand,) = catalogued(events, "isr expand")
    assert (expand["new_isr"], expand["origin"]) == ([1, 2], "alter_partition")


# -- request context ---------------------------------------------------------------------------


class _Handler:
    """Logs inside each request, and starts a long-lived task on the first one."""

    def __init__(self, background: trio.Nursery) -> None:
        self.background = background
        self.started = False
        self.ticks: trio.MemorySendChannel[None]
        self.ticks, self.tick_receive = trio.open_memory_channel[None](10)
        self.ticked = trio.Event()

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        structlog.get_logger("test").info("handling")
        if not self.started:
            self.started = True
            self.background.start_soon(detached(self._background))
        return ApiVersionsResponse()

    async def _background(self) -> None:
        async for _ in self.tick_receive:
            structlog.get_logger("test").info("background tick")
            self.ticked.set()


async def test_request_context_is_bound_per_request_and_not_inherited() -> None:
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(role="broker", node_id=1)
    try:
        with structlog.testing.capture_logs(
            processors=[structlog.contextvars.merge_contextvars]
        ) as events:
            async with trio.open_nursery() as nursery:
                handler = _Handler(nursery)
                server = BrokerServer(handler, [Listener("PLAINTEXT", "127.0.0.1", 0)])
                (bound,) = await nursery.start(server.serve)
                async with await WireClient.connect("127.0.0.1", bound.port) as client:
                    for corr in (41, 42):
                        await client.send(ApiVersionsRequest(), correlation_id=corr, client_id="c")
                        assert (await client.receive(ApiVersionsResponse))[0] == corr
                await handler.ticks.send(None)
                with trio.fail_after(5):
                    await handler.ticked.wait()
                nursery.cancel_scope.cancel()
    finally:
        structlog.contextvars.clear_contextvars()
    handling = [e for e in events if e["event"] == "handling"]
    assert [(e["correlation_id"], e["client_id"], e["api"]) for e in handling] == [
        (41, "c", "ApiVersions"),
        (42, "c", "ApiVersions"),
    ]
    assert all(e["role"] == "broker" and e["node_id"] == 1 for e in handling)
    (tick,) = [e for e in events if e["event"] == "background tick"]
    assert "correlation_id" not in tick and "client_id" not in tick and tick["node_id"] == 1
    listening = [e for e in events if e["event"] == "broker listening"]
    assert listening and "correlation_id" not in listening[0]
