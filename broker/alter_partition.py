"""ISR changes proposed by this broker as leader (Kafka's AlterPartitionManager and the
isr-expiration task): the trio driver of `PartitionState`'s KIP-497 proposals.

`submit(proposal)` queues an AlterPartition entry (an expansion from a follower fetch, or a
shrink from `shrink_loop`); `run` sends what is queued in one AlterPartitionRequest at a time
through the ControllerChannel, stamped with this broker's epoch, and hands each partition's
answer to `PartitionState.on_alter_partition_response`: the ISR changes only by the
controller's answer. Transient failures (NOT_CONTROLLER, the controller unreachable, a
retriable partition error) are retried after a backoff. `shrink_loop` checks the partitions it
leads every replica.lag.time.max.ms / 2, as Kafka. A committed change counts in
IsrShrinksPerSec / IsrExpandsPerSec (broker.metrics), as Kafka marks them on the answer.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
import trio

from broker.metrics import ReplicaManagerMetrics
from broker.partitions import PartitionManager, log_isr_change
from broker.ports import ControllerChannel
from broker.replica.leader import AlterPartitionProposal, PendingExpandIsr
from broker.replica.partition_state import AlterPartitionAction
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
)
from protocol.names import TopicPartition

log = structlog.get_logger("broker.alter_partition")


class AlterPartitionManager:
    def __init__(
        self,
        node_id: int,
        partitions: PartitionManager,
        controller: ControllerChannel,
        broker_epoch: Callable[[], int],
        *,
        on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        metrics: ReplicaManagerMetrics | None = None,
    ) -> None:
        self.metrics = metrics
        self.node_id = node_id
        self.partitions = partitions
        self.controller = controller
        self.broker_epoch = broker_epoch
        self.on_high_watermark = on_high_watermark
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._queued: dict[TopicPartition, AlterPartitionProposal] = {}
        self._wakeup = trio.Event()
        self.sent = 0
        """AlterPartition requests answered (tests, metrics)."""

    def submit(self, proposal: AlterPartitionProposal) -> None:
        self._queued[TopicPartition(proposal.topic, proposal.partition)] = proposal
        self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._queued)

    async def run(self) -> None:
        while True:
            if not self._queued:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
            batch, self._queued = self._queued, {}
            retry = await self._send(batch)
            if retry:
                for tp, proposal in retry.items():
                    self._queued.setdefault(tp, proposal)
                await trio.sleep(self.retry_backoff_ms / 1000)

    async def _send(
        self, batch: dict[TopicPartition, AlterPartitionProposal]
    ) -> dict[TopicPartition, AlterPartitionProposal]:
        by_topic: dict[tuple[str, str], list[AlterPartitionPartition]] = {}
        for proposal in batch.values():
            by_topic.setdefault((proposal.topic, proposal.topic_id), []).append(
                AlterPartitionPartition(
                    partition_index=proposal.partition,
                    leader_epoch=proposal.leader_epoch,
                    new_isr=proposal.new_isr,
                    partition_epoch=proposal.partition_epoch,
                )
            )
        request = AlterPartitionRequest(
            broker_id=self.node_id,
            broker_epoch=self.broker_epoch(),
            topics=tuple(
                AlterPartitionTopic(topic_name=name, topic_id=tid, partitions=tuple(parts))
                for (name, tid), parts in by_topic.items()
            ),
        )
        try:
            with trio.fail_after(self.request_timeout_ms / 1000):
                response = await self.controller.submit(request)
        except Exception as exc:  # the channel may fail in any way; retry
            log.warning("AlterPartition failed; will retry", error=str(exc) or repr(exc))
            return batch
        assert isinstance(response, AlterPartitionResponse)
        self.sent += 1
        if response.error_code != 0:
            log.warning(
                "AlterPartition refused; will retry",
                error=ErrorCode.from_wire(response.error_code).name,
                message=response.error_message,
            )
            return batch
        retry: dict[TopicPartition, AlterPartitionProposal] = {}
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic_name, result.partition_index)
                old_isr = self._committed_isr(tp)
                proposal = batch.get(tp)
                partition = self.partitions.get(tp)
                if proposal is None or partition is None:
                    continue
                expanding = isinstance(partition.state.isr_state, PendingExpandIsr)
                outcome = partition.state.on_alter_partition_response(
                    proposal,
                    error_code=result.error_code,
                    isr=tuple(result.isr),
                    leader_epoch=result.leader_epoch,
                    partition_epoch=result.partition_epoch,
                )
                if outcome.action is AlterPartitionAction.RETRY:
                    retry[tp] = proposal
                elif outcome.action is AlterPartitionAction.COMMITTED:
                    if self.metrics is not None:
                        counter = (
                            self.metrics.isr_expands if expanding else self.metrics.isr_shrinks
                        )
                        counter.inc()
                    log.info(
                        "ISR changed",
                        topic_partition=str(tp),
                        isr=list(result.isr),
                        partition_epoch=result.partition_epoch,
                    )
                elif outcome.action is not AlterPartitionAction.IGNORED:
                    log.info(
                        "ISR change not applied",
                        topic_partition=str(tp),
                        action=outcome.action.value,
                        error=ErrorCode.from_wire(result.error_code).name,
                    )
                committed = outcome.action is AlterPartitionAction.COMMITTED
                if committed and partition.state.isr != old_isr:
                    log_isr_change(partition.state, old_isr, "alter_partition")
                if outcome.high_watermark_changed or outcome.action in (
                    AlterPartitionAction.COMMITTED,
                    AlterPartitionAction.ROLLED_BACK,
                ):
                    # A committed shrink may complete acks=all waits (with or without an error).
                    self.on_high_watermark(tp)
        return retry

    def _committed_isr(self, tp: TopicPartition) -> tuple[int, ...]:
        partition = self.partitions.get(tp)
        return () if partition is None else partition.state.isr

    def maybe_shrink_isr(self, now_ms: int | None = None) -> int:
        """One pass of the isr-expiration task; returns how many shrinks were proposed."""
        now = self.partitions.clock.monotonic_ms() if now_ms is None else now_ms
        n = 0
        for partition in list(self.partitions.partitions.values()):
            state = partition.state
            if not state.is_leader:
                continue
            proposal = state.maybe_shrink_isr(now)
            if proposal is not None:
                log.info(
                    "shrinking ISR",
                    topic_partition=str(partition.tp),
                    isr=list(state.isr),
                    new_isr=list(proposal.new_isr),
                )
                self.submit(proposal)
                n += 1
        return n

    async def shrink_loop(self, interval_ms: int) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            self.maybe_shrink_isr()
