"""deploy.node.combined's small parts and raft_controller_service(local_broker=) in process:
the local controller channel retries NOT_CONTROLLER while the first term starts, UnfenceGate holds
requests until opened, and a combined node's previous incarnation (an earlier run of the same
process) does not block the new registration for broker.session.timeout.ms."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from controller.service.terms import ControllerService
from deploy.node.combined import UnfenceGate
from deploy.node.controller_routes import local_controller_channel
from deploy.node.controller_services import raft_controller_service
from protocol.errors import ErrorCode
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from raft.driver import RaftDriver
from raft.log_store import MemoryLogStore
from raft.metadata_log import RaftMetadataLog
from tests.support.waiting import wait_until
from tests.unit.raft.test_raft_metadata_log import MemoryQuorumState, NoNetwork, config


class _Refusing:
    """A service that answers NOT_CONTROLLER `refusals` times, then OK."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.calls = 0

    async def submit(self, request: Any) -> BrokerRegistrationResponse:
        self.calls += 1
        if self.calls <= self.refusals:
            return BrokerRegistrationResponse(error_code=int(ErrorCode.NOT_CONTROLLER))
        return BrokerRegistrationResponse(broker_epoch=7)


def registration(incarnation: str) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=1,
        cluster_id="",
        incarnation_id=incarnation,
        listeners=(BrokerRegistrationListener(name="PLAINTEXT", host="h", port=9092),),
    )


async def test_local_channel_waits_for_the_first_term() -> None:
    service = _Refusing(refusals=3)
    channel = local_controller_channel(service.submit, controller_wait_s=5)  # type: ignore[arg-type]
    with trio.fail_after(5):
        response = await channel.submit(registration("a"))
    assert response.error_code == 0 and service.calls == 4


async def test_local_channel_gives_up_after_its_wait() -> None:
    channel = local_controller_channel(_Refusing(10**6).submit, controller_wait_s=0.05)  # type: ignore[arg-type]
    with trio.fail_after(5):
        response = await channel.submit(registration("a"))
    assert response.error_code == ErrorCode.NOT_CONTROLLER


async def test_unfence_gate_holds_requests_until_opened() -> None:
    answered: list[str] = []

    class Handler:
        async def handle(self, request: Any, conn: Any) -> str:
            answered.append(request)
            return "ok"

    gate = UnfenceGate(Handler())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gate.handle, "r1", None)
        await trio.testing.wait_all_tasks_blocked()
        assert answered == []
        gate.open.set()
        with trio.fail_after(5):
            await wait_until(lambda: answered == ["r1"], within=5)


@asynccontextmanager
async def service_on(
    store: MemoryLogStore, quorum: MemoryQuorumState, local_broker: tuple[int, str] | None
) -> AsyncIterator[ControllerService]:
    driver = RaftDriver(config(), store, quorum, NoNetwork(), rng=random.Random(3))
    service = raft_controller_service(
        driver,
        RaftMetadataLog(driver),
        session_timeout_ms=600_000,
        rebalance_initial_delay_s=3600,
        local_broker=local_broker,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await nursery.start(service.run)
        with trio.fail_after(10):
            await wait_until(lambda: service.is_active, within=10)
        yield service
        nursery.cancel_scope.cancel()


async def _register_unfenced(service: ControllerService, incarnation: str) -> Any:
    registered = await service.submit(registration(incarnation))
    if registered.error_code:
        return registered
    await service.submit(
        BrokerHeartbeatRequest(
            broker_id=1,
            broker_epoch=registered.broker_epoch,
            current_metadata_offset=registered.broker_epoch,
            want_fence=False,
            want_shut_down=False,
        )
    )
    return registered


async def test_a_restarted_combined_node_replaces_its_previous_incarnation_at_once() -> None:
    store, quorum = MemoryLogStore(), MemoryQuorumState()
    async with service_on(store, quorum, (1, "first")) as service:
        assert (await _register_unfenced(service, "first")).error_code == 0
    # A separate broker's restart waits out the old session (10 minutes here) ...
    async with service_on(store, quorum, None) as service:
        refused = await service.submit(registration("second"))
        assert refused.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # ... but the combined node knows the old incarnation was an earlier run of itself.
    async with service_on(store, quorum, (1, "third")) as service:
        registered = await service.submit(registration("third"))
        assert registered.error_code == 0, registered.error_message
        assert service.state.image.cluster.broker(1).incarnation_id == "third"
