"""A broker's channel sends what piled up behind a slow request together: ZK mode propagates a
large change batch by batch (a LeaderAndIsr and an UpdateMetadata per 2,000 partitions), and a
broker slower than the batches got one round trip per batch, 0.5 s apart at 25,000 partitions.
`propagation.coalesce` merges a run of incremental LeaderAndIsr / UpdateMetadata of one epoch;
a FULL LeaderAndIsr, a StopReplica or another epoch keeps its place."""

from __future__ import annotations

import trio
import trio.testing

from controller.propagation import coalesce
from controller.service.channel import BrokerAddress, ControllerChannelManager
from protocol.messages import Request
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    LeaderAndIsrType,
)
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import (
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from tests.unit.controller.test_controller_channel import FakeSender


def lai(*parts: tuple[int, int], broker_epoch: int = 7, full: bool = False) -> LeaderAndIsrRequest:
    """LeaderAndIsr for t-<pid> with leader epoch <epoch>."""
    return LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=broker_epoch,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="t",
                topic_id="id-t",
                partition_states=tuple(
                    LeaderAndIsrPartitionState(
                        partition_index=pid, controller_epoch=3, leader=1, leader_epoch=e,
                        isr=(1,), partition_epoch=e, replicas=(1,),
                    )
                    for pid, e in parts
                ),
            ),
        ),
        live_leaders=(),
        type=int(LeaderAndIsrType.FULL if full else LeaderAndIsrType.INCREMENTAL),
    )  # fmt: skip


def um(*parts: tuple[int, int]) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=7,
        topic_states=(
            UpdateMetadataTopicState(
                topic_name="t",
                topic_id="id-t",
                partition_states=tuple(
                    UpdateMetadataPartitionState(
                        partition_index=pid, controller_epoch=3, leader=1, leader_epoch=e,
                        isr=(1,), partition_epoch=e, replicas=(1,),
                    )
                    for pid, e in parts
                ),
            ),
        ),
        live_brokers=(),
    )  # fmt: skip


def epochs(request: Request) -> dict[int, int]:
    return {
        p.partition_index: p.leader_epoch
        for t in request.topic_states  # type: ignore[attr-defined]
        for p in t.partition_states
    }


def test_a_run_of_batches_becomes_one_leader_and_isr_then_one_update_metadata() -> None:
    stop = StopReplicaRequest(controller_id=1, controller_epoch=3, broker_epoch=7, topic_states=())
    queued = [lai((0, 1), (1, 1)), um((0, 1), (1, 1)), lai((1, 2), (2, 1)), um((1, 2)), stop, lai()]
    merged, taken = coalesce(queued)
    assert taken == 4  # the StopReplica and what follows it keep their place
    assert [type(r) for r in merged] == [LeaderAndIsrRequest, UpdateMetadataRequest]
    assert epochs(merged[0]) == {0: 1, 1: 2, 2: 1}  # a partition named twice: its later state
    assert epochs(merged[1]) == {0: 1, 1: 2}


def test_what_is_not_merged() -> None:
    full = lai((0, 1), full=True)
    assert coalesce([full, lai((1, 1))]) == ([full], 1)
    first = lai((0, 1))
    assert coalesce([first, lai((1, 1), broker_epoch=8)]) == ([first], 1)
    assert coalesce([first]) == ([first], 1)


async def test_a_slow_broker_gets_what_piled_up_in_one_round_trip() -> None:
    sender = FakeSender()
    sender.gate = trio.Event()
    channels = ControllerChannelManager(sender, retry_backoff_s=0.01, max_retry_backoff_s=0.05)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(BrokerAddress(1, "127.0.0.1", 9001, 7))
        channels.send(1, [lai((0, 1)), um((0, 1))])
        await trio.testing.wait_all_tasks_blocked()  # the first is in flight, held
        channels.send(1, [lai((1, 1)), um((1, 1))])
        channels.send(1, [lai((2, 1)), um((2, 1))])
        sender.gate.set()
        await channels.wait_idle()
        delivered = sender.delivered[9001]
        # The first alone, then the four that waited behind it as two.
        assert [type(r).__name__ for r in delivered] == [
            "LeaderAndIsrRequest", "UpdateMetadataRequest", "LeaderAndIsrRequest",
            "UpdateMetadataRequest",
        ]  # fmt: skip
        assert epochs(delivered[2]) == {1: 1, 2: 1}
        nursery.cancel_scope.cancel()
