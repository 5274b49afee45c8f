"""In-process ZK-mode brokers for the replication tests: real Broker objects with real storage in
tmp dirs and real loopback sockets, in one trio run, driven by a fake controller that sends
LeaderAndIsr / UpdateMetadata / StopReplica over the wire and answers AlterPartition and
ControlledShutdown as the real one would (partition epoch check, ISR from the proposal).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from broker.config import BrokerConfig
from broker.metadata_feeds.zk import ZkMetadataFeed
from broker.node import Broker
from deploy.node.transport import PooledTransport
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages.alter_partition import (
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from protocol.messages.topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from protocol.names import TopicPartition
from storage.log_manager import LogManager
from tests.support.waiting import wait_until as support_wait_until
from tests.support.wire import WireClient

CLUSTER_ID = "zk-test-cluster-0000"


class WireTransport:
    """broker.ports.Transport over WireClient connections, pooled per address. `blocked`
    makes every send fail (a follower that stops fetching); `child()` is a transport of its
    own (the broker's transport_factory) blocked with its parent."""

    def __init__(self, parent: WireTransport | None = None) -> None:
        self._idle: dict[tuple[str, int], list[WireClient]] = {}
        self._blocked = False
        self.parent = parent
        self.children: list[WireTransport] = []
        self.sent = 0
        self.refused = 0
        """Sends failed because `blocked` (a test waits for one to know no fetch is in flight)."""

    @property
    def blocked(self) -> bool:
        return self.parent.blocked if self.parent is not None else self._blocked

    @blocked.setter
    def blocked(self, value: bool) -> None:
        self._blocked = value

    def child(self) -> WireTransport:
        child = WireTransport(self)
        self.children.append(child)
        return child

    async def send(self, host: str, port: int, request: Request, *, timeout_s: float) -> Response:
        if self.blocked:
            await trio.sleep(0.05)
            self.refused += 1
            if self.parent is not None:
                self.parent.refused += 1
            raise OSError(f"{host}:{port} unreachable (blocked by the test)")
        pool = self._idle.setdefault((host, port), [])
        client = pool.pop() if pool else await WireClient.connect(host, port)
        try:
            with trio.fail_after(timeout_s):
                response = await client.request(request)
        except BaseException:
            with trio.CancelScope(shield=True):
                await client.aclose()
            raise
        pool.append(client)
        self.sent += 1
        return response

    async def aclose(self) -> None:
        for child in self.children:
            await child.aclose()
        for pool in self._idle.values():
            for client in pool:
                await client.aclose()
        self._idle.clear()


@dataclass
class PartitionReg:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class FakeController:
    """The controller's side as the brokers see it (ControllerChannel + requests it sends)."""

    controller_id: int = 1
    epoch: int = 1
    brokers: dict[int, Broker] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionReg] = field(default_factory=dict)
    received: list[Request] = field(default_factory=list)
    fail_alter_partition: bool = False
    nursery: trio.Nursery | None = None
    """Where CreateTopics propagates after answering (as the real controller: its answer comes
    once ZooKeeper has the topic, before the brokers know)."""

    def address(self, broker_id: int) -> tuple[str, int]:
        bound = self.brokers[broker_id].bound[0]
        return bound.host, bound.port

    # -- ControllerChannel ---------------------------------------------------------------

    async def submit(self, request: Request) -> Response:
        self.received.append(request)
        if isinstance(request, AlterPartitionRequest):
            return await self._alter_partition(request)
        if isinstance(request, ControlledShutdownRequest):
            return ControlledShutdownResponse()
        if isinstance(request, CreateTopicsRequest):
            return self._create_topics(request)
        if isinstance(request, CreatePartitionsRequest):
            return CreatePartitionsResponse(
                results=tuple(
                    CreatePartitionsTopicResult(name=t.name, error_code=0) for t in request.topics
                )
            )
        raise AssertionError(f"unexpected request {request!r}")

    def _create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        ids = sorted(self.brokers)
        tps = []
        for n, topic in enumerate(request.topics):
            rf = topic.replication_factor
            replicas = tuple(ids[:rf])
            self.create(
                topic.name,
                f"dG9waWMtaWQt{len(self.topic_ids):02d}{n}",
                {
                    p: PartitionReg(replicas, replicas, replicas[0])
                    for p in range(topic.num_partitions)
                },
            )
            tps += [TopicPartition(topic.name, p) for p in range(topic.num_partitions)]
        assert self.nursery is not None
        self.nursery.start_soon(self.propagate, tps)
        return CreateTopicsResponse(
            topics=tuple(
                CreatableTopicResult(
                    name=t.name,
                    error_code=0,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                )
                for t in request.topics
            )
        )

    async def _alter_partition(self, request: AlterPartitionRequest) -> Response:
        if self.fail_alter_partition:
            return AlterPartitionResponse(
                error_code=int(ErrorCode.NOT_CONTROLLER), error_message="no controller"
            )
        topics = []
        changed = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                reg = self.partitions[tp]
                if p.leader_epoch != reg.leader_epoch:
                    code = ErrorCode.FENCED_LEADER_EPOCH
                elif p.partition_epoch != reg.partition_epoch:
                    code = ErrorCode.INVALID_UPDATE_VERSION
                else:
                    code = ErrorCode.NONE
                    reg.isr = tuple(p.new_isr)
                    reg.partition_epoch += 1
                    changed.append(tp)
                results.append(
                    AlterPartitionPartitionResult(
                        partition_index=p.partition_index,
                        error_code=int(code),
                        leader_id=reg.leader,
                        leader_epoch=reg.leader_epoch,
                        isr=reg.isr,
                        partition_epoch=reg.partition_epoch,
                    )
                )
            topics.append(
                AlterPartitionTopicResult(
                    topic_name=topic.topic_name, topic_id=topic.topic_id, partitions=tuple(results)
                )
            )
        if changed:
            await self.update_metadata(changed)
        return AlterPartitionResponse(topics=tuple(topics))

    # -- requests to brokers -------------------------------------------------------------

    async def send(self, broker_id: int, request: Request) -> Any:
        host, port = self.address(broker_id)
        async with await WireClient.connect(host, port) as client:
            return await client.request(request)

    def create(self, topic: str, topic_id: str, assignment: dict[int, PartitionReg]) -> None:
        self.topic_ids[topic] = topic_id
        for pid, reg in assignment.items():
            self.partitions[TopicPartition(topic, pid)] = reg

    def leader_and_isr(self, broker_id: int, tps: list[TopicPartition]) -> LeaderAndIsrRequest:
        by_topic: dict[str, list[LeaderAndIsrPartitionState]] = {}
        leaders = set()
        for tp in tps:
            reg = self.partitions[tp]
            leaders.add(reg.leader)
            by_topic.setdefault(tp.topic, []).append(
                LeaderAndIsrPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=self.epoch,
                    leader=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    isr=reg.isr,
                    partition_epoch=reg.partition_epoch,
                    replicas=reg.replicas,
                )
            )
        return LeaderAndIsrRequest(
            controller_id=self.controller_id,
            controller_epoch=self.epoch,
            broker_epoch=self.brokers[broker_id].broker_epoch,
            topic_states=tuple(
                LeaderAndIsrTopicState(
                    topic_name=name, topic_id=self.topic_ids[name], partition_states=tuple(states)
                )
                for name, states in by_topic.items()
            ),
            live_leaders=tuple(
                LeaderAndIsrLiveLeader(broker_id=i, host_name=h, port=p)
                for i in sorted(leaders)
                if i in self.brokers
                for h, p in [self.address(i)]
            ),
        )

    def update_metadata_request(
        self, broker_id: int, tps: list[TopicPartition]
    ) -> UpdateMetadataRequest:
        by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
        for tp in tps:
            reg = self.partitions[tp]
            by_topic.setdefault(tp.topic, []).append(
                UpdateMetadataPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=self.epoch,
                    leader=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    isr=reg.isr,
                    partition_epoch=reg.partition_epoch,
                    replicas=reg.replicas,
                )
            )
        return UpdateMetadataRequest(
            controller_id=self.controller_id,
            controller_epoch=self.epoch,
            broker_epoch=self.brokers[broker_id].broker_epoch,
            topic_states=tuple(
                UpdateMetadataTopicState(
                    topic_name=name, topic_id=self.topic_ids[name], partition_states=tuple(s)
                )
                for name, s in by_topic.items()
            ),
            live_brokers=tuple(
                UpdateMetadataBroker(
                    id=i,
                    endpoints=(
                        UpdateMetadataEndpoint(
                            port=self.address(i)[1], host=self.address(i)[0], listener="PLAINTEXT"
                        ),
                    ),
                )
                for i in sorted(self.brokers)
            ),
        )

    async def propagate(self, tps: list[TopicPartition] | None = None) -> None:
        """LeaderAndIsr to every replica of `tps` (all by default), then UpdateMetadata to all."""
        tps = list(self.partitions) if tps is None else tps
        for broker_id in sorted(self.brokers):
            mine = [tp for tp in tps if broker_id in self.partitions[tp].replicas]
            if mine:
                response = await self.send(broker_id, self.leader_and_isr(broker_id, mine))
                assert response.error_code == 0, response
        await self.update_metadata(tps)

    async def update_metadata(self, tps: list[TopicPartition]) -> None:
        for broker_id in sorted(self.brokers):
            response = await self.send(broker_id, self.update_metadata_request(broker_id, tps))
            assert response.error_code == 0, response

    async def elect(self, tp: TopicPartition, leader: int, isr: tuple[int, ...]) -> None:
        reg = self.partitions[tp]
        reg.leader, reg.isr = leader, isr
        reg.leader_epoch += 1
        reg.partition_epoch += 1
        await self.propagate([tp])


def broker_config(node_id: int, tmp: Path, **overrides: Any) -> BrokerConfig:
    values = {
        "node.id": node_id,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp / f"broker-{node_id}"),
        "metadata.mode": "zk",
        "zookeeper.connect": "127.0.0.1:1/unused-in-process",
        "replica.fetch.wait.max.ms": 100,
        "replica.fetch.backoff.ms": 50,
        "replica.socket.timeout.ms": 5000,
        "controlled.shutdown.retry.backoff.ms": 10,
    }
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return BrokerConfig.from_values(values)


@dataclass
class Cluster:
    controller: FakeController
    brokers: dict[int, Broker]
    transports: dict[int, WireTransport]
    nursery: trio.Nursery
    stops: list[trio.CancelScope] = field(default_factory=list)
    """Cancelled by stop_cluster (pooled transports' tasks)."""

    async def block(self, *broker_ids: int) -> None:
        """Stop these brokers' outgoing requests, and return once none is in flight."""
        before = {i: self.transports[i].refused for i in broker_ids}
        for i in broker_ids:
            self.transports[i].blocked = True
        await wait_until(
            f"brokers {broker_ids} stopped fetching",
            lambda: all(self.transports[i].refused > before[i] for i in broker_ids),
        )

    def unblock(self, *broker_ids: int) -> None:
        for i in broker_ids:
            self.transports[i].blocked = False

    def broker(self, broker_id: int) -> Broker:
        return self.brokers[broker_id]

    def log_of(self, broker_id: int, tp: TopicPartition):
        partition = self.brokers[broker_id].partitions.get(tp)
        assert partition is not None, f"broker {broker_id} has no {tp}"
        return partition.log

    async def client(self, broker_id: int) -> WireClient:
        host, port = self.controller.address(broker_id)
        return await WireClient.connect(host, port)


_epochs = itertools.count(100)


TEST_DEADLINE_S = 60.0


@asynccontextmanager
async def cluster_nursery(deadline_s: float = TEST_DEADLINE_S) -> AsyncIterator[trio.Nursery]:
    """The nursery an in-process cluster test runs in, under a deadline: a hang fails in
    seconds with trio.TooSlowError instead of running into pytest's global timeout."""
    with trio.fail_after(deadline_s):
        async with trio.open_nursery() as nursery:
            yield nursery


async def start_cluster(
    nursery: trio.Nursery,
    tmp: Path,
    ids: tuple[int, ...] = (1, 2, 3),
    configure: Callable[[int], dict[str, Any]] | None = None,
    local_controller: object | None = None,
    pooled_transport: bool = False,
) -> Cluster:
    """Brokers `ids`, started. `pooled_transport`: deploy's PooledTransport (one per broker, one
    more per fetcher) instead of the test's WireTransport (which can block)."""
    controller = FakeController(controller_id=ids[0], nursery=nursery)
    stops: list[trio.CancelScope] = []
    brokers: dict[int, Broker] = {}
    transports: dict[int, WireTransport] = {}
    for node_id in ids:
        config = broker_config(node_id, tmp, **(configure(node_id) if configure else {}))
        log_manager = LogManager(list(config.log_dirs), node_id=node_id, cluster_id=CLUSTER_ID)
        transports[node_id] = WireTransport()
        transport: Any = transports[node_id]
        factory: Callable[[], Any] = transports[node_id].child
        if pooled_transport:
            transport = PooledTransport(client_id=f"broker-{node_id}")
            await nursery.start(_run_until_stopped, transport, stops)

            def factory(node_id: int = node_id) -> PooledTransport:
                return PooledTransport(client_id=f"broker-{node_id}-fetcher")

        broker = Broker(
            config,
            log_manager=log_manager,
            controller=controller,
            feed=ZkMetadataFeed(),
            cluster_id=CLUSTER_ID,
            transport=transport,
            local_controller=local_controller,  # type: ignore[arg-type]
            transport_factory=factory,
        )
        broker.broker_epoch = next(_epochs)
        await nursery.start(broker.run)
        brokers[node_id] = broker
        controller.brokers[node_id] = broker
    return Cluster(controller, brokers, transports, nursery, stops)


async def stop_cluster(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        broker.request_shutdown()
    for broker in cluster.brokers.values():
        await broker.stopped.wait()
    for transport in cluster.transports.values():
        await transport.aclose()
    for scope in cluster.stops:
        scope.cancel()


async def _run_until_stopped(
    transport: PooledTransport,
    stops: list[trio.CancelScope],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.CancelScope() as scope:
        stops.append(scope)
        await transport.run(task_status=task_status)


async def wait_until(what: str, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """tests.support.waiting.wait_until, failing with what was awaited."""
    try:
        await support_wait_until(predicate, within=timeout_s)
    except trio.TooSlowError:
        raise AssertionError(f"timed out after {timeout_s} s waiting for: {what}") from None
