"""The QuorumController in three real controller processes (ids 3001-3003, 3 voters): writes
commit through the quorum and every standby replays them; a SIGKILLed active controller is
replaced by a standby whose state came from replay; with 2 of 3 controllers dead a write fails
with a clear error within its timeout; a restart loads snapshot + log; a fake broker
(BrokerRegistration/BrokerHeartbeat over a real socket) is registered fenced, unfenced once
caught up, and fenced again after broker.session.timeout.ms without heartbeats. Every process
is cleaned up by pid; every wait is a condition under a deadline."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from deploy.cluster.zookeeper import free_port
from deploy.node.transport import PooledTransport
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from protocol.messages.configs import DescribeConfigsRequest
from protocol.messages.producer_ids import AllocateProducerIdsRequest
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from raft.disk_log_store import DiskLogStore
from tests.integration.quorum.test_controller_quorum import HOST, ControllerProcess
from tests.support.waiting import wait_until

IDS = (3001, 3002, 3003)
CLUSTER_ID = "quorum-test"
SESSION_MS = 2000
"""broker.session.timeout.ms in these tests (short, still >= 2 s)."""

Procs = dict[int, ControllerProcess]


def start_controllers(tmp_path: Path, extra: str = "") -> Procs:
    ports = {i: free_port(HOST) for i in IDS}
    voters = ",".join(f"{i}@{HOST}:{p}" for i, p in ports.items())
    extra = f'"broker.session.timeout.ms" = {SESSION_MS}\n' + extra
    procs = {i: ControllerProcess(tmp_path, i, ports[i], voters, extra) for i in IDS}
    try:
        for proc in procs.values():
            proc.start()
    except BaseException:
        for proc in procs.values():
            proc.cleanup()
        raise
    return procs


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[Procs]:
    procs = start_controllers(tmp_path)
    try:
        yield procs
    finally:
        for proc in procs.values():
            proc.cleanup()


def events(proc: ControllerProcess, name: str) -> list[dict[str, Any]]:
    """The JSON log events called `name` in this controller's log (every start)."""
    out = []
    if not proc.log_file.exists():
        return out
    for line in proc.log_file.read_text(errors="replace").splitlines():
        if f'"{name}"' in line:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == name:
                out.append(event)
    return out


def active_ids(procs: Procs, *, after: dict[int, int] | None = None) -> list[int]:
    """Running controllers that logged `controller active` (more often than in `after`)."""
    seen = after or {}
    return [
        i
        for i, p in procs.items()
        if p.running and len(events(p, "controller active")) > seen.get(i, 0)
    ]


async def wait_active(procs: Procs, *, after: dict[int, int] | None = None) -> int:
    found: list[int] = []

    def one() -> bool:
        ids = active_ids(procs, after=after)
        found[:] = ids
        return len(ids) >= 1

    await wait_until(one, within=30, every=0.05)
    return found[-1]


def counts(procs: Procs, name: str) -> dict[int, int]:
    return {i: len(events(p, name)) for i, p in procs.items()}


async def send(
    transport: PooledTransport, proc: ControllerProcess, request: Request, timeout_s: float = 10
) -> Any:
    return await transport.send(HOST, proc.port, request, timeout_s=timeout_s)


async def send_to_active(
    transport: PooledTransport, procs: Procs, request: Request, *, within: float = 30
) -> Any:
    """Ask each running controller until one answers with something else than
    NOT_CONTROLLER (a standby's answer)."""
    answer: list[Response] = []

    async def answered() -> bool:
        for proc in procs.values():
            if not proc.running:
                continue
            try:
                response = await send(transport, proc, request)
            except KafkaError:
                continue
            code = getattr(response, "error_code", 0)
            topics = getattr(response, "topics", ())
            if code == ErrorCode.NOT_CONTROLLER or any(
                t.error_code == ErrorCode.NOT_CONTROLLER for t in topics
            ):
                continue
            answer[:] = [response]
            return True
        return False

    await wait_until(answered, within=within, every=0.1)
    return answer[0]


def create_topics(*names: str, partitions: int = 3, timeout_ms: int = 30000) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(name=n, num_partitions=partitions, replication_factor=1) for n in names
        ),
        timeout_ms=timeout_ms,
    )


def topic_errors(response: CreateTopicsResponse) -> dict[str, int]:
    return {t.name: t.error_code for t in response.topics}


class FakeBroker:
    """A broker's lifecycle messages only: BrokerRegistration and BrokerHeartbeat."""

    def __init__(self, transport: PooledTransport, procs: Procs, broker_id: int) -> None:
        self.transport = transport
        self.procs = procs
        self.broker_id = broker_id
        self.epoch = -1

    async def register(self) -> BrokerRegistrationResponse:
        response: BrokerRegistrationResponse = await send_to_active(
            self.transport,
            self.procs,
            BrokerRegistrationRequest(
                broker_id=self.broker_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=f"incarnation-{self.broker_id}",
                listeners=(
                    BrokerRegistrationListener(
                        name="PLAINTEXT", host=HOST, port=19000 + self.broker_id
                    ),
                ),
            ),
        )
        assert response.error_code == 0, response.error_message
        self.epoch = response.broker_epoch
        return response

    async def heartbeat(self, offset: int) -> BrokerHeartbeatResponse:
        response: BrokerHeartbeatResponse = await send_to_active(
            self.transport,
            self.procs,
            BrokerHeartbeatRequest(
                broker_id=self.broker_id,
                broker_epoch=self.epoch,
                current_metadata_offset=offset,
                want_fence=False,
                want_shut_down=False,
            ),
        )
        return response

    async def unfence(self) -> None:
        async def unfenced() -> bool:
            response = await self.heartbeat(self.epoch)
            assert response.error_code == 0, response.error_message
            return not response.is_fenced

        await wait_until(unfenced, within=20, every=0.2)


async def registered_brokers(
    transport: PooledTransport, procs: Procs, n: int, nursery: trio.Nursery
) -> None:
    """Brokers 1..n registered, unfenced, and heartbeating (every 0.5 s) until the nursery
    ends, so placement always has usable brokers, across failovers too."""
    for broker_id in range(1, n + 1):
        broker = FakeBroker(transport, procs, broker_id)
        await broker.register()
        await broker.unfence()
        nursery.start_soon(keep_alive, broker)


async def keep_alive(broker: FakeBroker) -> None:
    while True:
        with contextlib.suppress(trio.TooSlowError):
            await broker.heartbeat(broker.epoch)
        await trio.sleep(0.5)  # the broker's heartbeat cadence, not a synchronisation


async def test_writes_replay_on_standbys_and_a_standby_takes_over(controllers: Procs) -> None:
    async with (
        PooledTransport.open(client_id="quorum-controller-test") as transport,
        trio.open_nursery() as nursery,
    ):
        first = await wait_active(controllers)
        await registered_brokers(transport, controllers, 1, nursery)
        response = await send(transport, controllers[first], create_topics("before"))
        assert topic_errors(response) == {"before": 0}, response
        # A producer-id block is a committed ProducerIdsRecord (KIP-730).
        asker = FakeBroker(transport, controllers, 2)
        await asker.register()
        allocate = AllocateProducerIdsRequest(broker_id=2, broker_epoch=asker.epoch)
        block = await send(transport, controllers[first], allocate)
        assert (block.error_code, block.producer_id_start, block.producer_id_len) == (0, 0, 1000)

        # Every controller, standbys included, replayed the committed TopicRecord.
        def replayed_everywhere(name: str) -> Callable[[], bool]:
            return lambda: all(
                any(name in e["created"] for e in events(p, "metadata topics replayed"))
                for p in controllers.values()
                if p.running
            )

        await wait_until(replayed_everywhere("before"), within=10, every=0.05)

        # A standby refuses, naming the active controller.
        standby = next(i for i in IDS if i != first)
        refused = await send(transport, controllers[standby], create_topics("nope"))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert f"the active controller is {first}" in refused.topics[0].error_message
        described = await send(
            transport, controllers[standby], DescribeConfigsRequest(resources=())
        )
        assert described.error_code == ErrorCode.NOT_CONTROLLER

        before = counts(controllers, "controller active")
        await trio.to_thread.run_sync(controllers[first].kill)
        second = await wait_active(controllers, after=before)
        assert second != first
        response = await send_to_active(transport, controllers, create_topics("after", "before"))
        # The new active controller's state came from replay: "before" exists there.
        assert topic_errors(response) == {
            "after": 0,
            "before": ErrorCode.TOPIC_ALREADY_EXISTS,
        }, response
        await wait_until(replayed_everywhere("after"), within=10, every=0.05)
        # The new active controller never hands out the old block again.
        block = await send_to_active(transport, controllers, allocate)
        assert (block.error_code, block.producer_id_start) == (0, 1000), block
        nursery.cancel_scope.cancel()


async def test_two_of_three_dead_writes_fail_clearly(controllers: Procs) -> None:
    async with (
        PooledTransport.open(client_id="quorum-controller-test") as transport,
        trio.open_nursery() as nursery,
    ):
        active = await wait_active(controllers)
        await registered_brokers(transport, controllers, 1, nursery)
        for i in IDS:
            if i != active:
                await trio.to_thread.run_sync(controllers[i].kill)
        # The survivor cannot commit: the write fails within its timeout with a clear error
        # (it resigns when no majority fetches: NOT_CONTROLLER; or the request times out).
        with trio.fail_after(20):
            response = await send(
                transport, controllers[active], create_topics("lost", timeout_ms=5000), 15
            )
        result = response.topics[0]
        assert result.error_code in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT)
        assert result.error_message
        assert "controller" in result.error_message or "within" in result.error_message

        # Once it stopped leading, it says plainly that no controller is active.
        async def says_no_active_controller() -> bool:
            again = await send(transport, controllers[active], create_topics("lost"))
            assert again.topics[0].error_code == ErrorCode.NOT_CONTROLLER
            return "no active controller" in again.topics[0].error_message

        await wait_until(says_no_active_controller, within=10, every=0.2)
        nursery.cancel_scope.cancel()


async def test_broker_registered_fenced_unfenced_and_fenced_after_the_session(
    controllers: Procs,
) -> None:
    async with PooledTransport.open(client_id="quorum-controller-test") as transport:
        active = await wait_active(controllers)
        broker = FakeBroker(transport, controllers, 7)
        registration = await broker.register()
        assert registration.broker_epoch >= 0
        # Not caught up with the metadata log: stays fenced.
        behind = await broker.heartbeat(-1)
        assert behind.error_code == 0 and behind.is_fenced and not behind.is_caught_up
        # Another epoch is refused.
        stale = await send(
            transport,
            controllers[active],
            BrokerHeartbeatRequest(
                broker_id=7,
                broker_epoch=broker.epoch + 1000,
                current_metadata_offset=0,
                want_fence=False,
                want_shut_down=False,
            ),
        )
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        await broker.unfence()
        # Usable now: a topic can be placed on it.
        created = await send(transport, controllers[active], create_topics("on-seven"))
        assert topic_errors(created) == {"on-seven": 0}, created

        # No heartbeats: after broker.session.timeout.ms the active controller fences it.
        await wait_until(
            lambda: any(
                7 in e["broker_ids"] for e in events(controllers[active], "brokers fenced")
            ),
            within=SESSION_MS / 1000 * 5,
            every=0.1,
        )
        refused = await send(transport, controllers[active], create_topics("nowhere"))
        assert refused.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR, refused
        # A heartbeat from the caught-up broker unfences it again.
        await broker.unfence()


def checkpoints(proc: ControllerProcess) -> list[Path]:
    return sorted((proc.data_dir / "__cluster_metadata-0").glob("*.checkpoint"))


def log_start(proc: ControllerProcess) -> int:
    store = DiskLogStore(proc.data_dir)
    try:
        return store.start_offset
    finally:
        store.close()


async def test_restart_recovers_from_snapshot_and_log(tmp_path: Path) -> None:
    procs = start_controllers(
        tmp_path, '"metadata.log.max.record.bytes.between.snapshots" = 2000\n'
    )
    try:
        async with (
            PooledTransport.open(client_id="quorum-controller-test") as transport,
            trio.open_nursery() as nursery,
        ):
            await wait_active(procs)
            await registered_brokers(transport, procs, 2, nursery)
            names = [f"topic-{n}" for n in range(12)]
            for name in names:
                response = await send_to_active(transport, procs, create_topics(name))
                assert topic_errors(response) == {name: 0}, response
            # Every controller wrote a snapshot of its own.
            await wait_until(
                lambda: all(events(p, "metadata snapshot written") for p in procs.values()),
                within=20,
                every=0.1,
            )
            nursery.cancel_scope.cancel()
        for proc in procs.values():
            assert await trio.to_thread.run_sync(proc.stop) == 0, proc.log_tail()
        for proc in procs.values():
            assert checkpoints(proc), f"no snapshot file in {proc.data_dir}"
            assert await trio.to_thread.run_sync(log_start, proc) > 0

        loaded_before = counts(procs, "metadata snapshot loaded")
        active_before = counts(procs, "controller active")
        for proc in procs.values():
            await trio.to_thread.run_sync(proc.start)
        async with PooledTransport.open(client_id="quorum-controller-test") as transport:
            await wait_active(procs, after=active_before)
            # Each restart loaded its snapshot, then replayed the log's tail.
            await wait_until(
                lambda: all(
                    len(events(p, "metadata snapshot loaded")) > loaded_before[i]
                    for i, p in procs.items()
                ),
                within=10,
                every=0.1,
            )
            response = await send_to_active(transport, procs, create_topics(*names))
            assert set(topic_errors(response).values()) == {ErrorCode.TOPIC_ALREADY_EXISTS}
    finally:
        for proc in procs.values():
            proc.cleanup()
