"""ControllerService on a real ZooKeeper with fake brokers (loopback servers that record what
they receive): election, failover propagation, BrokerChange, fencing, resignation, rebalance."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from controller.config import ControllerConfig
from controller.service.terms import ControllerService
from deploy.node.controller_services import zk_controller_service
from deploy.node.transport import PooledTransport
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
)
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrType,
)
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.integration.zk_controller.fake_broker import FakeBroker
from tests.support.waiting import wait_until
from tests.support.zookeeper import ZooKeeperChroot
from zkstore import BrokerInfo, BrokerRegistrar, ZkClient, ensure_persistent_paths
from zkstore.election import read_controller_epoch
from zkstore.znodes import (
    ControllerEpochZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicZNode,
)

SESSION_S = 2.0
WITHIN = 15.0


class Node:
    """One 'broker': a fake broker server, its ZooKeeper session and registration, and
    (optionally) its controller candidate; `stop()` makes all of it go away, like a kill."""

    def __init__(self, broker_id: int, hosts: str, transport: PooledTransport) -> None:
        self.broker_id = broker_id
        self.hosts = hosts
        self.transport = transport
        self.fake = FakeBroker(broker_id)
        self.zk: ZkClient | None = None
        self.registrar: BrokerRegistrar | None = None
        self.service: ControllerService | None = None
        self.scope: trio.CancelScope | None = None

    async def start(
        self, nursery: trio.Nursery, *, controller: bool = True, **service_kwargs: Any
    ) -> Node:
        await nursery.start(self.fake.serve)  # the same port again after a stop
        self.zk = ZkClient(self.hosts, session_timeout_s=SESSION_S)
        await self.zk.start()
        await ensure_persistent_paths(self.zk)
        self.registrar = BrokerRegistrar(
            self.zk, BrokerInfo(broker_id=self.broker_id, endpoints=(self.fake.endpoint,))
        )
        service_kwargs.setdefault("config", ControllerConfig(auto_leader_rebalance_enable=False))
        self.service = (
            zk_controller_service(
                self.zk,
                self.broker_id,
                self.transport,
                request_timeout_s=5.0,
                channel_retry_backoff_s=0.05,
                **service_kwargs,
            )
            if controller
            else None
        )
        self.scope = await nursery.start(self._run)
        return self

    async def _run(self, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        assert self.registrar is not None
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.registrar.run)
                if self.service is not None:
                    await nursery.start(self.service.run)
                task_status.started(scope)

    async def stop(self) -> None:
        if self.scope is not None:
            self.scope.cancel()
            self.scope = None
        self.fake.stop()
        if self.zk is not None:
            await self.zk.close()  # the ephemerals (registration, /controller) go at once
            self.zk = None


@asynccontextmanager
async def cluster(
    zookeeper: ZooKeeperChroot,
) -> AsyncIterator[tuple[trio.Nursery, Callable[[int], Node], ZkClient]]:
    nodes: list[Node] = []
    async with (
        PooledTransport.open(client_id="trioka-controller") as transport,
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as observer,
        trio.open_nursery() as nursery,
    ):

        def node(broker_id: int) -> Node:
            made = Node(broker_id, zookeeper.hosts, transport)
            nodes.append(made)
            return made

        try:
            yield nursery, node, observer
        finally:
            with trio.CancelScope(shield=True):
                for made in nodes:
                    await made.stop()
            nursery.cancel_scope.cancel()


def active_of(nodes: list[Node]) -> Node | None:
    active = [n for n in nodes if n.service is not None and n.service.is_active]
    assert len(active) <= 1, "two active controllers at once"
    return active[0] if active else None


def partition_states(request: LeaderAndIsrRequest, topic: str) -> dict[int, Any]:
    return {
        p.partition_index: p
        for t in request.topic_states
        if t.topic_name == topic
        for p in t.partition_states
    }


def latest_states(fake: FakeBroker, topic: str) -> dict[int, LeaderAndIsrPartitionState]:
    """Each partition's state as last sent to this broker."""
    out: dict[int, LeaderAndIsrPartitionState] = {}
    for request in fake.requests(LeaderAndIsrRequest):
        out.update(partition_states(request, topic))
    return out


def create(name: str, partitions: int = 3, rf: int = 3) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf),)
    )


async def state_znode(observer: ZkClient, topic: str, partition: int) -> Any:
    data, stat = await observer.get(TopicPartitionStateZNode.path(topic, partition))
    return TopicPartitionStateZNode.decode(topic, partition, data, stat.version)


async def test_election_propagation_and_failover_to_another_broker(
    zookeeper: ZooKeeperChroot,
) -> None:
    async with cluster(zookeeper) as (nursery, node, observer):
        nodes = [await node(i).start(nursery) for i in (1, 2)]
        third = await node(3).start(nursery, controller=False)
        everyone = [*nodes, third]
        await wait_until(lambda: active_of(nodes) is not None, within=WITHIN)
        first = active_of(nodes)
        assert first is not None and first.service is not None
        standby = next(n for n in nodes if n is not first)
        assert standby.service is not None
        assert first.service.epoch == 1
        await wait_until(lambda: standby.service.active_id == first.broker_id, within=WITHIN)
        # The BrokerChange at start-up saw all three registrations.
        await wait_until(
            lambda: sorted(first.service.image.cluster.brokers) == [1, 2, 3], within=WITHIN
        )

        # A standby answers NOT_CONTROLLER in the request's own shape, naming the controller.
        refused = await standby.service.submit(create("t"))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert f"broker {first.broker_id}" in (refused.topics[0].error_message or "")

        created = await first.service.submit(create("t"))
        assert created.topics[0].error_code == 0, created
        for n in everyone:
            await wait_until(lambda n=n: len(latest_states(n.fake, "t")) == 3, within=WITHIN)
            await wait_until(
                lambda n=n: any(
                    any(t.topic_name == "t" for t in r.topic_states)
                    for r in n.fake.requests(UpdateMetadataRequest)
                ),
                within=WITHIN,
            )
            assert all(r.controller_epoch == 1 for r in n.fake.requests(LeaderAndIsrRequest))
            assert n.fake.client_ids() == {"trioka-controller"}
        leaders = {p: s.leader for p, s in latest_states(third.fake, "t").items()}
        assert sorted(leaders.values()) == [1, 2, 3]  # striped over the brokers

        # The controller's broker dies: the standby takes over with the next epoch.
        for n in everyone:
            n.fake.received.clear()
        await first.stop()
        await wait_until(lambda: standby.service.is_active, within=WITHIN)
        assert standby.service.epoch == 2
        assert await read_controller_epoch(observer) == (2, standby.service.epoch)
        survivors = [standby, third]
        for n in survivors:
            # Failover: a FULL LeaderAndIsr with every partition, and a full UpdateMetadata.
            await wait_until(
                lambda n=n: any(
                    r.type == LeaderAndIsrType.FULL and len(partition_states(r, "t")) == 3
                    for r in n.fake.requests(LeaderAndIsrRequest)
                ),
                within=WITHIN,
            )
            await wait_until(lambda n=n: bool(n.fake.requests(UpdateMetadataRequest)))
            # Then the BrokerChange: the dead broker's partitions are led by the survivors, and
            # it leaves every ISR, also those of partitions it only followed.
            await wait_until(
                lambda n=n: all(
                    s.leader in (2, 3) and first.broker_id not in s.isr
                    for s in latest_states(n.fake, "t").values()
                ),
                within=WITHIN,
            )
            assert {r.controller_epoch for r in n.fake.requests(LeaderAndIsrRequest)} == {2}
            live = n.fake.requests(UpdateMetadataRequest)[-1].live_brokers
            assert sorted(b.id for b in live) == sorted(x.broker_id for x in survivors)
        for p in range(3):
            state = await state_znode(observer, "t", p)
            assert state.leader in (2, 3) and first.broker_id not in state.isr
            assert state.controller_epoch == 2


async def test_broker_change_when_a_registration_goes_and_comes_back(
    zookeeper: ZooKeeperChroot,
) -> None:
    async with cluster(zookeeper) as (nursery, node, _observer):
        controller = await node(1).start(nursery)
        others = [await node(i).start(nursery, controller=False) for i in (2, 3)]
        service = controller.service
        assert service is not None
        await wait_until(lambda: service.is_active, within=WITHIN)
        await wait_until(lambda: len(service.image.cluster.brokers) == 3, within=WITHIN)
        assert (await service.submit(create("t"))).topics[0].error_code == 0
        led_by_3 = [
            p for p, s in service.image.topics.by_name["t"].partitions.items() if s.leader == 3
        ]
        assert led_by_3
        three = others[1]
        old_epoch = service.image.cluster.brokers[3].epoch

        await three.stop()
        await wait_until(lambda: 3 not in service.image.cluster.brokers, within=WITHIN)
        for p in led_by_3:
            await wait_until(
                lambda p=p: latest_states(others[0].fake, "t")[p].leader in (1, 2),
                within=WITHIN,
            )
        parts = service.image.topics.by_name["t"].partitions
        assert all(3 not in s.isr and s.leader != 3 for s in parts.values())
        assert service.term_state is not None
        assert service.term_state.channels.broker_ids == [1, 2]

        # It registers again (a new session: a new czxid, the broker epoch).
        three.fake.received.clear()
        await three.start(nursery, controller=False)
        await wait_until(lambda: 3 in service.image.cluster.brokers, within=WITHIN)
        new_epoch = service.image.cluster.brokers[3].epoch
        assert new_epoch > old_epoch
        # As Kafka's onBrokerStartup: every partition it hosts, and full metadata.
        await wait_until(lambda: len(latest_states(three.fake, "t")) == 3, within=WITHIN)
        assert all(r.broker_epoch == new_epoch for r in three.fake.requests(LeaderAndIsrRequest))
        await wait_until(
            lambda: any(
                sorted(b.id for b in r.live_brokers) == [1, 2, 3]
                for r in three.fake.requests(UpdateMetadataRequest)
            ),
            within=WITHIN,
        )


async def test_a_fenced_zombie_cannot_write_and_resigns(zookeeper: ZooKeeperChroot) -> None:
    async with cluster(zookeeper) as (nursery, node, observer):
        zombie = await node(1).start(nursery)
        service = zombie.service
        assert service is not None
        await wait_until(lambda: service.is_active, within=WITHIN)
        assert service.epoch == 1
        # Another controller was elected while this one was not looking: /controller_epoch
        # moved on (its /controller znode is still there, so it does not know yet).
        data, stat = await observer.get(ControllerEpochZNode.PATH)
        await observer.set(
            ControllerEpochZNode.PATH,
            ControllerEpochZNode.encode(ControllerEpochZNode.decode(data) + 1),
            version=stat.version,
        )
        refused = await service.submit(create("z", rf=1))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert await observer.exists(TopicZNode.path("z")) is None
        # It resigns (deleting its /controller), and the election runs again: a fresh term
        # with a new epoch, loaded from ZooKeeper, can write.
        await wait_until(lambda: service.terms == 2 and service.is_active, within=WITHIN)
        assert service.epoch == 3
        assert (await service.submit(create("z", rf=1))).topics[0].error_code == 0
        assert await observer.exists(TopicZNode.path("z")) is not None


async def test_resigns_when_another_controller_takes_over(zookeeper: ZooKeeperChroot) -> None:
    async with cluster(zookeeper) as (nursery, node, observer):
        controller = await node(1).start(nursery)
        other = await node(2).start(nursery, controller=False)
        service = controller.service
        assert service is not None
        await wait_until(lambda: service.is_active, within=WITHIN)
        await wait_until(lambda: len(service.image.cluster.brokers) == 2, within=WITHIN)
        assert (await service.submit(create("t", partitions=2, rf=2))).topics[0].error_code == 0
        assert service.term_state is not None
        await service.term_state.channels.wait_idle()

        # Broker 9 takes over (as if elected while broker 1's session hung).
        data, stat = await observer.get(ControllerEpochZNode.PATH)
        tx = observer.kazoo.transaction()
        tx.delete(ControllerZNode.PATH)
        tx.create(ControllerZNode.PATH, ControllerZNode.encode(9, 0))
        tx.set_data(
            ControllerEpochZNode.PATH,
            ControllerEpochZNode.encode(ControllerEpochZNode.decode(data) + 1),
            stat.version,
        )
        results = await observer.wait(tx.commit_async())
        assert not [r for r in results if isinstance(r, Exception)], results

        await wait_until(lambda: not service.is_active and service.active_id == 9, within=WITHIN)
        assert service.driver is None and service.term_state is None and service.image is None
        refused = await service.submit(create("u"))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert "broker 9" in (refused.topics[0].error_message or "")
        # Nothing more comes from broker 1's former controller, even when a broker goes away.
        controller.fake.received.clear()
        await other.stop()
        with trio.move_on_after(1.0):
            await wait_until(lambda: bool(controller.fake.received), within=2.0)
        assert controller.fake.received == []


async def test_auto_rebalance_gives_leadership_back_to_the_preferred_replica(
    zookeeper: ZooKeeperChroot,
) -> None:
    async with cluster(zookeeper) as (nursery, node, observer):
        controller = await node(1).start(
            nursery,
            config=ControllerConfig(
                auto_leader_rebalance_enable=True, leader_imbalance_per_broker_percentage=10
            ),
            rebalance_initial_delay_s=0.2,
            rebalance_interval_s=0.2,
        )
        two = await node(2).start(nursery, controller=False)
        service = controller.service
        assert service is not None
        await wait_until(lambda: service.is_active, within=WITHIN)
        await wait_until(lambda: len(service.image.cluster.brokers) == 2, within=WITHIN)
        request = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="r",
                    assignments=(CreatableReplicaAssignment(partition_index=0, broker_ids=(2, 1)),),
                ),
            )
        )
        assert (await service.submit(request)).topics[0].error_code == 0

        def partition() -> Any:
            return service.image.topics.by_name["r"].partitions[0]

        assert partition().leader == 2
        await two.stop()
        await wait_until(lambda: partition().leader == 1 and partition().isr == (1,), within=WITHIN)
        await two.start(nursery, controller=False)
        await wait_until(lambda: 2 in service.image.cluster.brokers, within=WITHIN)
        assert partition().leader == 1  # not in the ISR yet: no preferred election
        # The leader adds broker 2 back to the ISR (it caught up), as a real leader would.
        part = partition()
        epoch = service.image.cluster.brokers[1].epoch
        topic_id = service.image.topics.by_name["r"].topic_id
        altered = await service.submit(
            AlterPartitionRequest(
                broker_id=1,
                broker_epoch=epoch,
                topics=(
                    AlterPartitionTopic(
                        topic_name="r",
                        topic_id=topic_id,
                        partitions=(
                            AlterPartitionPartition(
                                partition_index=0,
                                leader_epoch=part.leader_epoch,
                                new_isr=(1, 2),
                                partition_epoch=part.partition_epoch,
                            ),
                        ),
                    ),
                ),
            )
        )
        assert altered.error_code == 0 and altered.topics[0].partitions[0].error_code == 0, altered
        # The periodic check moves leadership back to broker 2, its preferred replica.
        await wait_until(lambda: partition().leader == 2, within=WITHIN)
        await wait_until(lambda: latest_states(two.fake, "r")[0].leader == 2, within=WITHIN)
        state = await state_znode(observer, "r", 0)
        assert state.leader == 2 and set(state.isr) == {1, 2}


async def test_session_expiry_drops_the_controller_and_the_new_session_elects_again(
    zookeeper: ZooKeeperChroot,
) -> None:
    from kazoo.client import KazooClient  # only to expire the session, as ZooKeeper tests do

    async with cluster(zookeeper) as (nursery, node, _observer):
        controller = await node(1).start(nursery)
        service = controller.service
        assert service is not None and controller.zk is not None
        await wait_until(lambda: service.is_active, within=WITHIN)
        assert service.epoch == 1
        old_driver = service.driver
        assert old_driver is not None

        # Another client attaching to the same session and closing it expires the session.
        session_id, password = controller.zk.kazoo.client_id

        def expire() -> None:
            twin = KazooClient(hosts=zookeeper.hosts, client_id=(session_id, password))
            twin.start(10)
            twin.stop()
            twin.close()

        await trio.to_thread.run_sync(expire)
        # The old term is over: NOT_CONTROLLER from its driver, then a new term with the next
        # epoch once kazoo has a new session (registration and election run again).
        await wait_until(lambda: service.terms == 2 and service.is_active, within=WITHIN)
        assert service.epoch == 2
        assert service.driver is not old_driver
        stale = await old_driver.submit(create("x", rf=1))
        assert stale.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert (await service.submit(create("x", rf=1))).topics[0].error_code == 0
