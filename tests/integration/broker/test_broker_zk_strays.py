"""A ZK-mode broker and stray replicas (KIP-516): an INCREMENTAL LeaderAndIsr naming another
topic id than a log's is refused with INCONSISTENT_TOPIC_ID; a FULL one (type 1) deletes every
local log it does not name, or names with another topic id, then applies its partitions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrType
from protocol.names import TopicPartition
from tests.integration.broker.zk_brokers import (
    PartitionReg,
    cluster_nursery,
    start_cluster,
    stop_cluster,
)

TP = TopicPartition("orders", 0)
OLD_ID = "b2xkLXRvcGljLWlkLTAwMA"
NEW_ID = "bmV3LXRvcGljLWlkLTAwMA"


async def test_full_leader_and_isr_deletes_strays(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path)
        controller = cluster.controller
        controller.create(
            TP.topic, OLD_ID, {0: PartitionReg(replicas=(1, 2), isr=(1, 2), leader=1)}
        )
        controller.create("other", "b3RoZXItdG9waWMtaWQtMA", {0: PartitionReg((2,), (2,), 2)})
        await controller.propagate()
        broker = cluster.broker(2)
        assert broker.log_manager.get_log(TP).topic_id == OLD_ID

        # The topic is recreated (new id) on the same brokers.
        controller.create(
            TP.topic, NEW_ID, {0: PartitionReg(replicas=(1, 2), isr=(1, 2), leader=1)}
        )
        controller.partitions[TP] = PartitionReg(replicas=(1, 2), isr=(1, 2), leader=1)
        incremental = controller.leader_and_isr(2, [TP])
        answer = await controller.send(2, incremental)
        codes = [p.error_code for t in answer.topics for p in t.partition_errors]
        assert codes == [ErrorCode.INCONSISTENT_TOPIC_ID]
        assert broker.log_manager.get_log(TP).topic_id == OLD_ID

        full = dataclasses.replace(incremental, type=int(LeaderAndIsrType.FULL))
        answer = await controller.send(2, full)
        assert [p.error_code for t in answer.topics for p in t.partition_errors] == [0]
        assert broker.log_manager.get_log(TP).topic_id == NEW_ID
        # "other" was not named: a stray, deleted.
        assert broker.log_manager.get_log(TopicPartition("other", 0)) is None
        assert broker.partitions.get(TopicPartition("other", 0)) is None
        await stop_cluster(cluster)
