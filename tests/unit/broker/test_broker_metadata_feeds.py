"""broker.metadata_feeds: the one port (broker.ports.MetadataFeed) through which a broker takes
its metadata, one adapter per source, plugged into the same Broker (which has no metadata-mode
branch): the APIs each adds, the fetchers it needs, the controller id Metadata reports, what a
forwarded admin request waits for, and the controlled shutdown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.metadata_feeds.raft_log import RaftMetadataFeed
from broker.metadata_feeds.standalone import StandaloneMetadataFeed
from broker.metadata_feeds.zk import ZkMetadataFeed
from broker.node import Broker
from broker.ports import MetadataFeed
from broker.server import ConnectionInfo
from protocol.codec import RequestEnvelope
from protocol.config_defs import ConfigError
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.metadata.records import (
    BrokerEndpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from protocol.names import TopicPartition
from storage.log_manager import LogManager

CONN = ConnectionInfo(peer="127.0.0.1:1", listener="PLAINTEXT")
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAg"
ZK_APIS = {
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.ALTER_PARTITION,
    ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.ALLOCATE_PRODUCER_IDS,
}
MODES = {
    "zk": {"metadata.mode": "zk", "zookeeper.connect": "127.0.0.1:1"},
    "raft": {
        "metadata.mode": "raft",
        "process.roles": ["broker"],
        "controller.quorum.voters": "3001@127.0.0.1:9093",
        "controller.listener.names": ["CONTROLLER"],
    },
    "standalone": {"metadata.mode": "standalone"},
}


class Unused:
    """Controller channel and transport: never called by these tests."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


class Source:
    """A MetadataSource whose committed offset the test sets."""

    def __init__(self, committed: int = -1) -> None:
        self.committed = committed

    def committed_offset(self) -> int:
        return self.committed

    async def read_committed(self, after_offset: int) -> Any:
        raise AssertionError("not followed in these tests")


def feed_of(mode: str, source: Source) -> MetadataFeed:
    if mode == "zk":
        return ZkMetadataFeed()
    if mode == "raft":
        return RaftMetadataFeed(source)
    return StandaloneMetadataFeed(source)


class Made:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.log_managers: list[LogManager] = []

    def __call__(
        self, mode: str, *, transport: bool = True, source: Source | None = None
    ) -> Broker:
        config = BrokerConfig.from_values(
            {"node.id": 1, "log.dirs": [str(self.tmp / mode / "logs")], **MODES[mode]}
        )
        log_manager = LogManager(list(config.log_dirs), node_id=1, cluster_id="c")
        log_manager.startup()
        self.log_managers.append(log_manager)
        return Broker(
            config,
            log_manager=log_manager,
            controller=Unused(),  # type: ignore[arg-type]
            feed=feed_of(mode, source or Source()),
            cluster_id="c",
            transport=Unused() if transport else None,  # type: ignore[arg-type]
        )


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Made]:
    made = Made(tmp_path)
    try:
        yield made
    finally:
        for log_manager in made.log_managers:
            log_manager.shutdown()


async def served(broker: Broker) -> set[ApiKey]:
    envelope = RequestEnvelope(ApiKey.API_VERSIONS, 0, 1, "c", ApiVersionsRequest())
    response = await broker.apis.handle(envelope, CONN)
    assert isinstance(response, ApiVersionsResponse)
    return {ApiKey(r.api_key) for r in response.api_keys}


@pytest.mark.parametrize("mode", ["zk", "raft", "standalone"])
async def test_only_the_zk_feed_adds_the_controller_requests(make: Made, mode: str) -> None:
    apis = await served(make(mode))
    assert ApiKey.PRODUCE in apis and ApiKey.JOIN_GROUP in apis
    assert apis & ZK_APIS == (ZK_APIS if mode == "zk" else set())


@pytest.mark.parametrize("mode", ["zk", "raft"])
def test_feeds_whose_replicas_follow_leaders_need_a_transport(make: Made, mode: str) -> None:
    with pytest.raises(ConfigError) as err:
        make(mode, transport=False)
    assert err.value.message == (
        f"metadata.mode={mode}: the broker needs a transport to reach leaders"
    )
    assert make(mode).fetchers is not None


def test_a_standalone_broker_has_no_fetchers_and_applies_to_its_partitions(make: Made) -> None:
    broker = make("standalone", transport=False)
    assert broker.fetchers is None
    broker.publisher.publish(
        [
            (0, TopicRecord(name="t", topic_id=TOPIC_ID)),
            (
                1,
                PartitionRecord(
                    partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1
                ),
            ),
        ]
    )
    assert broker.partitions.partitions[TopicPartition("t", 0)].state.is_leader


async def test_zk_controller_id_is_the_last_controller_that_sent_a_request(make: Made) -> None:
    broker = make("zk")
    assert broker.feed.controller_id() == -1
    request = UpdateMetadataRequest(
        controller_id=5, controller_epoch=1, broker_epoch=-1, topic_states=(), live_brokers=()
    )
    envelope = RequestEnvelope(ApiKey.UPDATE_METADATA, 0, 1, "c", request)
    response = await broker.apis.handle(envelope, CONN)
    assert isinstance(response, UpdateMetadataResponse) and response.error_code == 0
    assert broker.feed.controller_id() == 5


def test_raft_controller_id_is_the_lowest_unfenced_broker(make: Made) -> None:
    broker = make("raft")
    assert broker.feed.controller_id() == 1  # none registered: this broker
    records = [
        RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=f"inc-{b}",
            broker_epoch=b,
            endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=19090 + b),),
        )
        for b in (2, 3, 4)
    ] + [UnfenceBrokerRecord(id=b, epoch=b) for b in (3, 4)]
    broker.publisher.publish(list(enumerate(records)))
    assert broker.feed.controller_id() == 3


def test_standalone_controller_id_is_this_broker(make: Made) -> None:
    assert make("standalone").feed.controller_id() == 1


@pytest.mark.parametrize("mode", ["zk", "raft", "standalone"])
def test_what_forwarded_admin_requests_wait_for(make: Made, mode: str) -> None:
    source = Source(committed=41)
    feed = make(mode, source=source).feed
    # Standalone: the local log's commit offset, read when asked; else the effect in the image.
    assert feed.forward_barrier() == (41 if mode == "standalone" else None)
    source.committed = 42
    assert feed.forward_barrier() == (42 if mode == "standalone" else None)
    assert feed.self_listed_once_unfenced == (mode == "raft")


async def test_raft_controlled_shutdown_is_the_wiring_s_hook(tmp_path: Path) -> None:
    calls = []

    async def hook() -> None:
        calls.append("lifecycle")

    await RaftMetadataFeed(Source(), controlled_shutdown=hook).controlled_shutdown()
    await RaftMetadataFeed(Source()).controlled_shutdown()  # combined: none
    assert calls == ["lifecycle"]


def _lai(*partitions: tuple[int, int]) -> LeaderAndIsrRequest:
    """A LeaderAndIsr from controller 5 for t-<pid> led by <leader>, replicas (1, 2, 3)."""
    return LeaderAndIsrRequest(
        controller_id=5,
        controller_epoch=1,
        broker_epoch=-1,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="t",
                topic_id=TOPIC_ID,
                partition_states=tuple(
                    LeaderAndIsrPartitionState(
                        partition_index=pid, controller_epoch=1, leader=leader, leader_epoch=1,
                        isr=(1, 2, 3), partition_epoch=1, replicas=(1, 2, 3),
                    )
                    for pid, leader in partitions
                ),
            ),
        ),
        live_leaders=(),
    )  # fmt: skip


def _um(*live: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=5,
        controller_epoch=1,
        broker_epoch=-1,
        topic_states=(),
        live_brokers=tuple(
            UpdateMetadataBroker(
                id=b,
                endpoints=(UpdateMetadataEndpoint(port=9000 + b, host="h", listener="PLAINTEXT"),),
            )
            for b in live
        ),
    )


def test_zk_update_metadata_recomputes_ineligible_replicas_only_where_needed(make: Made) -> None:
    """A large ZK-mode change arrives as several LeaderAndIsr + UpdateMetadata pairs; each
    UpdateMetadata walked every led partition (O(partitions) per request). Now: all of them
    when the live brokers changed, else only the leaders made since."""
    broker = make("zk")
    requests = broker.feed.requests  # type: ignore[attr-defined]
    requests.leader_and_isr(_lai((0, 1)))
    requests.update_metadata(_um(1, 2))
    led = broker.partitions.partitions[TopicPartition("t", 0)].state
    assert led.ineligible_replicas == frozenset({3})
    led.ineligible_replicas = frozenset({99})  # a marker: untouched unless recomputed
    requests.leader_and_isr(_lai((1, 1)))
    requests.update_metadata(_um(1, 2))  # the same live brokers: only t-1 is computed
    assert led.ineligible_replicas == frozenset({99})
    assert broker.partitions.partitions[TopicPartition("t", 1)].state.ineligible_replicas == {3}
    requests.update_metadata(_um(1, 2, 3))  # broker 3 is back: every leader
    assert led.ineligible_replicas == frozenset()


async def test_a_zk_broker_that_knows_its_epoch_refuses_control_requests_without_it(
    make: Made,
) -> None:
    """Kafka's pre-2.2 pass (broker_epoch -1 accepted) let any client's LeaderAndIsr,
    StopReplica or UpdateMetadata through; trioka's controller always names the epoch."""
    broker = make("zk")
    broker.broker_epoch = 4242

    async def update(epoch: int) -> int:
        request = UpdateMetadataRequest(
            controller_id=5, controller_epoch=1, broker_epoch=epoch, topic_states=(),
            live_brokers=(),
        )  # fmt: skip
        envelope = RequestEnvelope(ApiKey.UPDATE_METADATA, 0, 1, "c", request)
        response = await broker.apis.handle(envelope, CONN)
        assert isinstance(response, UpdateMetadataResponse)
        return response.error_code

    assert await update(-1) == ErrorCode.STALE_BROKER_EPOCH
    assert await update(4241) == ErrorCode.STALE_BROKER_EPOCH
    assert await update(4242) == 0
