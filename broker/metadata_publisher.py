"""The broker's metadata image, kept current from committed metadata records (KRaft's
BrokerMetadataListener + BrokerMetadataPublisher).

`publish(records)` replays committed `(offset, record)` pairs into a MetadataDelta, builds the
next MetadataImage, then hands the local replica changes (deletes, then leaders, then
followers) to `PartitionManager.apply_leader_and_isr` and applies changed topic configs to the
live logs. `run(source)` does that for every batch a MetadataSource delivers.
`wait_for(offset)` lets a request handler answer only after the image includes a change it
asked the controller for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
import trio

from broker.partitions import PartitionManager
from broker.ports import MetadataSource
from broker.replica.partition_state import PartitionChange
from protocol.config_defs import TOPIC_CONFIGS, ConfigError
from protocol.metadata.delta import LocalReplica, LocalReplicaChanges, MetadataDelta
from protocol.metadata.image import TOPIC_RESOURCE, MetadataImage
from protocol.names import TopicPartition

log = structlog.get_logger("broker.metadata")


def partition_change(tp: TopicPartition, replica: LocalReplica) -> PartitionChange:
    part = replica.partition
    return PartitionChange(
        tp=tp,
        topic_id=replica.topic_id,
        leader=part.leader,
        leader_epoch=part.leader_epoch,
        isr=part.isr,
        replicas=part.replicas,
        partition_epoch=part.partition_epoch,
    )


class MetadataPublisher:
    def __init__(
        self,
        node_id: int,
        topic_defaults: Mapping[str, Any],
        cluster_id: str = "",
    ) -> None:
        self.node_id = node_id
        self.topic_defaults = dict(topic_defaults)
        self.image = MetadataImage.empty(cluster_id)
        self.partitions: PartitionManager | None = None
        self._offset_changed = trio.Event()

    @property
    def applied_offset(self) -> int:
        return self.image.provenance.last_offset

    def topic_config(self, topic: str) -> dict[str, Any]:
        """Typed topic config in force: broker defaults overlaid with the topic's dynamic
        configs. A stored value this broker cannot parse is logged and skipped."""
        out = dict(self.topic_defaults)
        for name, value in self.image.configs.topic_configs(topic).items():
            try:
                out[name] = TOPIC_CONFIGS[name].parse(value)
            except ConfigError as exc:
                log.warning("ignoring bad topic config", topic=topic, error=exc.message)
        return out

    def publish(self, records: Sequence[tuple[int, Any]]) -> None:
        """Replay committed records and apply what changed to the local partitions."""
        if not records:
            return
        delta = MetadataDelta(self.image)
        for offset, record in records:
            delta.replay(record, offset)
        self.image = delta.apply()
        topics = delta.topics_delta
        changes = (
            topics.local_changes(self.node_id) if topics is not None else LocalReplicaChanges()
        )
        if self.partitions is not None:
            if changes:
                self.partitions.apply_leader_and_isr(
                    deletes=list(changes.deletes),
                    leaders=[partition_change(tp, r) for tp, r in changes.leaders.items()],
                    followers=[partition_change(tp, r) for tp, r in changes.followers.items()],
                )
            configs = delta.configs_delta
            if configs is not None:
                for topic in self._changed_topic_configs(delta):
                    n = self.partitions.update_topic_config(topic)
                    if n:
                        log.info("applied topic config", topic=topic, partitions=n)
        self._offset_changed.set()
        self._offset_changed = trio.Event()

    def replace_image(self, image: MetadataImage) -> None:
        """ZK mode: take an image built from UpdateMetadata (broker.metadata_cache); changed
        topic configs reach the live logs as they do from records."""
        before, self.image = self.image, image
        if self.partitions is not None:
            for topic in _changed_topic_configs(before, image):
                n = self.partitions.update_topic_config(topic)
                if n:
                    log.info("applied topic config", topic=topic, partitions=n)
        self._offset_changed.set()
        self._offset_changed = trio.Event()

    def changed(self) -> trio.Event:
        """An event set at the next image change."""
        return self._offset_changed

    def _changed_topic_configs(self, delta: MetadataDelta) -> list[str]:
        return _changed_topic_configs(delta.image, self.image)

    async def wait_for(self, offset: int) -> None:
        """Return once the image includes every record up to `offset`."""
        while self.applied_offset < offset:
            await self._offset_changed.wait()

    async def run(
        self,
        source: MetadataSource,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Publish everything committed so far, report started, then follow the source."""
        target = source.committed_offset()
        while self.applied_offset < target:
            self.publish(await source.read_committed(self.applied_offset))
        log.info(
            "metadata loaded",
            offset=self.applied_offset,
            topics=len(self.image.topics),
        )
        task_status.started()
        while True:
            self.publish(await source.read_committed(self.applied_offset))


def _changed_topic_configs(before_image: MetadataImage, after_image: MetadataImage) -> list[str]:
    before = before_image.configs.resources
    after = after_image.configs.resources
    names = set()
    for resource in set(before) | set(after):
        if resource.type == TOPIC_RESOURCE and before.get(resource) != after.get(resource):
            names.add(resource.name)
    return sorted(names)
