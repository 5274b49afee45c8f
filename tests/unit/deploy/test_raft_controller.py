"""deploy.node.controller_services.raft_controller_service in process on a real single-voter RaftDriver
(MemoryLogStore, no network): NOT_CONTROLLER before the term starts, a term once leader
(registration, heartbeat, CreateTopics commit and replay; a record-less heartbeat answered),
a snapshot written past the byte threshold that moves the log start, and a restart on the same
store that loads snapshot + tail into the state. Waits have deadlines."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from controller.service.terms import ControllerService
from deploy.node.controller_services import raft_controller_service
from protocol.errors import ErrorCode
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
)
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest
from raft.driver import RaftDriver
from raft.log_store import MemoryLogStore
from raft.metadata_log import RaftMetadataLog
from tests.support.waiting import wait_until
from tests.unit.raft.test_raft_metadata_log import MemoryQuorumState, NoNetwork, config


@asynccontextmanager
async def service_on(
    store: MemoryLogStore, quorum: MemoryQuorumState, snapshot_bytes: int = 20 * 1024 * 1024
) -> AsyncIterator[tuple[RaftDriver, ControllerService]]:
    driver = RaftDriver(config(), store, quorum, NoNetwork(), rng=random.Random(3))
    metadata_log = RaftMetadataLog(driver)
    service = raft_controller_service(
        driver,
        metadata_log,
        snapshot_max_record_bytes=snapshot_bytes,
        rebalance_initial_delay_s=3600,
        rng=random.Random(5),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await nursery.start(service.run)
        yield driver, service
        nursery.cancel_scope.cancel()


def create(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=2, replication_factor=1),)
    )


async def register_unfenced(service: ControllerService, broker_id: int = 1) -> None:
    registered = await service.submit(
        BrokerRegistrationRequest(
            broker_id=broker_id,
            cluster_id="",
            incarnation_id="inc",
            listeners=(BrokerRegistrationListener(name="PLAINTEXT", host="h", port=9092),),
        )
    )
    assert registered.error_code == 0, registered.error_message
    heartbeat = BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=registered.broker_epoch,
        current_metadata_offset=registered.broker_epoch,
        want_fence=False,
        want_shut_down=False,
    )
    answer = await service.submit(heartbeat)
    assert answer.error_code == 0 and not answer.is_fenced
    # Nothing changes now: no records, answered at once.
    end = service.state.next_offset
    again = await service.submit(heartbeat)
    assert not again.is_fenced
    assert service.state.next_offset in (end, end + 1)  # at most an idle NoOp in between


async def test_a_term_serves_writes_and_a_restart_loads_snapshot_and_tail() -> None:
    store, quorum = MemoryLogStore(), MemoryQuorumState()
    async with service_on(store, quorum, snapshot_bytes=200) as (_, service):
        refused = await service.submit(create("early"))
        if not service.is_active:  # before the term: NOT_CONTROLLER, said plainly
            assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
            assert "not the active controller" in refused.topics[0].error_message
        with trio.fail_after(10):
            await wait_until(lambda: service.is_active, within=10)
            assert service.active_id == 1 and service.epoch is not None
            await register_unfenced(service)
            for name in ("a", "b", "c"):
                response = await service.submit(create(name))
                assert response.topics[0].error_code == 0, response
            assert {"a", "b", "c"} <= set(service.state.image.topics.by_name)
            # Past 200 bytes of records: a snapshot, and the log below it is gone.
            await wait_until(lambda: store.latest_snapshot_id() is not None, within=10)
            await wait_until(lambda: store.start_offset > 0, within=10)
        after_snapshot = await service.submit(create("d"))
        assert after_snapshot.topics[0].error_code == 0

    async with service_on(store, quorum) as (_, service):
        with trio.fail_after(10):
            await wait_until(lambda: service.is_active, within=10)
        assert {"a", "b", "c", "d"} <= set(service.state.image.topics.by_name)
        again = await service.submit(create("a"))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
