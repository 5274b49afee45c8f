"""Kafka's controller metrics: a rate-and-time timer per event type (ControllerState), the
unclean election counter and the KafkaController gauges, through the real driver."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from prometheus_client import CollectorRegistry

from controller.elect_leaders import AutoLeaderRebalance
from controller.metrics import ControllerMetrics, ControllerStateName
from controller.service.driver import ControllerDriver
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.elect_leaders import ElectionType, ElectLeadersRequest
from protocol.messages.topics import DeleteTopicsRequest
from protocol.metadata.records import MetadataRecord
from tests.unit.controller.test_controller_cluster_ops import create, live, set_unclean

Harness = Any
STATS = "kafka_controller_controllerstats_"  # + the timer's Kafka name, lower case
GAUGES = "kafka_controller_kafkacontroller_"


class OffsetLog:
    """A MetadataLog that commits at once, continuing after the harness' state."""

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.next_offset += len(records)
        return self.next_offset - 1

    async def wait_committed(self, offset: int) -> None:
        return None


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness({1: None, 2: None, 3: None})


def driver_for(h: Harness, metrics: ControllerMetrics) -> ControllerDriver:
    return ControllerDriver(OffsetLog(h.state.next_offset), h.state, h.ctx, metrics=metrics)


def count(registry: CollectorRegistry, state: ControllerStateName) -> float:
    value = registry.get_sample_value(STATS + state.value.lower() + "_count")
    assert value is not None, state
    return value


async def test_each_event_type_has_its_own_timer(h: Harness) -> None:
    create(h, "t", (1, 2, 3), (2, 3, 1))
    registry = CollectorRegistry()
    driver = driver_for(h, ControllerMetrics(registry))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.submit(live(h, 2, 3))  # BrokerChange: 1 died
        await driver.submit(live(h, 1, 2, 3))  # and came back
        epoch = h.state.image.cluster.broker(3).epoch
        await driver.submit(ControlledShutdownRequest(broker_id=3, broker_epoch=epoch))
        await driver.submit(ElectLeadersRequest(election_type=int(ElectionType.PREFERRED)))
        await driver.submit(AutoLeaderRebalance())
        await driver.submit(DeleteTopicsRequest(topic_names=("t",)))
        nursery.cancel_scope.cancel()
    S = ControllerStateName
    expected = {
        S.BROKER_CHANGE: 2,  # LeaderElectionRateAndTimeMs: BrokerChange only
        S.CONTROLLED_SHUTDOWN: 1,
        S.MANUAL_LEADER_BALANCE: 1,
        S.AUTO_LEADER_BALANCE: 1,
        S.TOPIC_DELETION: 1,
        S.TOPIC_CHANGE: 0,
        S.ISR_CHANGE: 0,
        S.CONTROLLER_CHANGE: 0,
    }
    assert {s: count(registry, s) for s in expected} == expected
    assert registry.get_sample_value(STATS + "leaderelectionrateandtimems_count") == 2
    # Every Kafka ControllerState with a timer exists (at zero when unused).
    for state in S:
        count(registry, state)


async def test_unclean_elections_are_counted(h: Harness) -> None:
    create(h, "t", (1, 2))
    h.commit(h.run(live(h, 1, 3)).records)  # 2 dies: ISR (1)
    set_unclean(h, "t")
    h.commit(h.run(live(h, 3)).records)  # 1 dies: ISR stays (1), no leader
    registry = CollectorRegistry()
    driver = driver_for(h, ControllerMetrics(registry))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.submit(live(h, 2, 3))  # 2 back: elected out of the ISR
        nursery.cancel_scope.cancel()
    assert h.state.topic("t").partitions[0].leader == 2
    assert registry.get_sample_value(STATS + "uncleanleaderelections_total") == 1


async def test_gauges_follow_the_running_driver_and_terms_share_the_metrics(h: Harness) -> None:
    create(h, "t", (1, 2, 3), (2, 3, 1), (3, 1, 2))
    create(h, "u", (1, 2))
    u_id = h.state.topic("u").topic_id
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)

    def gauge(name: str) -> float | None:
        return registry.get_sample_value(GAUGES + name.lower())

    assert gauge("ActiveControllerCount") == 0
    assert gauge("GlobalPartitionCount") == 0
    for term in range(2):  # a re-elected controller reuses the metrics (no re-registration)
        driver = driver_for(h, metrics)
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.run)
            assert gauge("ActiveControllerCount") == 1
            assert gauge("GlobalTopicCount") == 2
            assert gauge("GlobalPartitionCount") == 4
            assert gauge("OfflinePartitionsCount") == 0
            imbalanced = sum(
                1
                for t in h.state.image.topics.by_id.values()
                for p in t.partitions.values()
                if p.leader != p.replicas[0]
            )
            assert gauge("PreferredReplicaImbalanceCount") == imbalanced == (0 if term == 0 else 3)
            if term == 0:
                await driver.submit(live(h, 2, 3))  # 1 dies: t-0 and u-0 move to 2
                assert gauge("PreferredReplicaImbalanceCount") == 2
                await driver.submit(live(h, 3))  # 2 dies too: u-0 has no live replica
                assert gauge("OfflinePartitionsCount") == 1
                # Topics queued for deletion are left out, as Kafka's.
                driver.set_excluded_topics(lambda: frozenset({u_id}))
                assert gauge("OfflinePartitionsCount") == 0
                await driver.submit(live(h, 1, 2, 3))
            nursery.cancel_scope.cancel()
        assert gauge("ActiveControllerCount") == 0
        assert gauge("GlobalPartitionCount") == 0


def test_an_old_term_stopping_does_not_unbind_a_newer_one(h: Harness) -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    old, new = driver_for(h, metrics), driver_for(h, metrics)
    metrics.bind(old, lambda: old.state.image)
    metrics.bind(new, lambda: new.state.image)  # the next term, before the old one ended
    metrics.unbind(old)
    assert registry.get_sample_value(GAUGES + "activecontrollercount") == 1
    metrics.unbind(new)
    assert registry.get_sample_value(GAUGES + "activecontrollercount") == 0


async def test_unclean_enable_has_its_own_timer(h: Harness) -> None:
    from controller.metrics import state_for_request
    from protocol.messages.configs import IncrementalAlterConfigsRequest

    create(h, "t", (1, 2))
    registry = CollectorRegistry()
    driver = driver_for(h, ControllerMetrics(registry))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.submit(set_unclean_request("t"))
        nursery.cancel_scope.cancel()
    S = ControllerStateName
    assert count(registry, S.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE) == 1
    # Other config changes are not controller events with a timer (as Kafka's).
    assert state_for_request(IncrementalAlterConfigsRequest(resources=())) is None


def set_unclean_request(topic: str) -> Any:
    from protocol.messages.configs import (
        AlterableConfig,
        AlterConfigOp,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
        ResourceType,
    )

    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=int(ResourceType.TOPIC),
                resource_name=topic,
                configs=(
                    AlterableConfig(
                        name="unclean.leader.election.enable",
                        config_operation=int(AlterConfigOp.SET),
                        value="true",
                    ),
                ),
            ),
        )
    )
