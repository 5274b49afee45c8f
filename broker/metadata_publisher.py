"""The broker's metadata image, kept current from committed metadata records (KRaft's
BrokerMetadataListener + BrokerMetadataPublisher).

`publish(records)` replays committed `(offset, record)` pairs into a MetadataDelta, builds the
next MetadataImage, then hands the local replica changes (deletes, then leaders, then
followers) to `PartitionManager.apply_leader_and_isr` and applies changed topic configs to the
live logs. `run(source)` does that for every batch a MetadataSource delivers.
`wait_for(offset)` lets a request handler answer only after the image includes a change it
asked the controller for.

Raft mode (KRaft's BrokerMetadataPublisher): a source may deliver a whole `MetadataImage` (a
snapshot loaded by the observer) among the records: `load_snapshot(image)` takes it and applies
it as a FULL change set (`apply_full()`): every local partition the image names is applied
(leaders, then followers) and every local log it does not name, or names with another topic
id, is a stray and is deleted first, as ZK mode's FULL LeaderAndIsr (KIP-516). With
`defer_local_changes` set (a starting Raft-mode broker until it has caught up with the
metadata log, KRaft's initial catch-up) the image follows the records but nothing is applied
locally; the broker then calls `apply_full()` once. `apply_changes` (default
`PartitionManager.apply_leader_and_isr`) is where the change sets go: the broker's metadata
feed sets it (broker.metadata_feeds: Raft mode to the code ZK mode's LeaderAndIsr uses,
broker.partition_changes, fetchers included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import structlog
import trio

from broker.partitions import PartitionManager
from broker.ports import MetadataSource
from broker.replica.partition_state import PartitionChange
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.config_defs import TOPIC_CONFIGS, ConfigError
from protocol.metadata.delta import LocalReplica, LocalReplicaChanges, MetadataDelta
from protocol.metadata.image import TOPIC_RESOURCE, MetadataImage
from protocol.metadata.records import PartitionChangeRecord
from protocol.names import TopicPartition

log = structlog.get_logger("broker.metadata")


class ApplyChanges(Protocol):
    """Applies one change set: deletes, then leaders, then followers."""

    def __call__(
        self,
        *,
        deletes: Iterable[TopicPartition],
        leaders: Iterable[PartitionChange],
        followers: Iterable[PartitionChange],
    ) -> object: ...


def full_local_changes(
    image: MetadataImage, node_id: int, local: Iterable[tuple[TopicPartition, str | None]]
) -> tuple[list[TopicPartition], list[PartitionChange], list[PartitionChange]]:
    """The FULL change set of `image` for broker `node_id`: (deletes, leaders, followers).
    `local` lists the (partition, topic id) this broker has logs or state of; those the image
    does not name, or names with another topic id, are the deletes (strays)."""
    leaders: list[PartitionChange] = []
    followers: list[PartitionChange] = []
    named: dict[TopicPartition, str] = {}
    for topic in image.topics.by_id.values():
        for tp, reg in topic.topic_partitions():
            if node_id not in reg.replicas:
                continue
            named[tp] = topic.topic_id
            change = partition_change(tp, LocalReplica(topic.topic_id, reg))
            (leaders if reg.leader == node_id else followers).append(change)
    deletes = []
    for tp, topic_id in local:
        if tp not in named or (topic_id and topic_id != named[tp]):
            deletes.append(tp)
    return sorted(set(deletes)), leaders, followers


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
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.node_id = node_id
        self.clock = clock
        self.received_ms = clock.monotonic_ms()
        """When the records being published were received (monotonic ms): the broker's
        "applied ..." event measures its apply_ms from it."""
        self.topic_defaults = dict(topic_defaults)
        self.image = MetadataImage.empty(cluster_id)
        self.partitions: PartitionManager | None = None
        self.apply_changes: ApplyChanges | None = None
        """Where change sets go (None: `partitions.apply_leader_and_isr`)."""
        self.defer_local_changes = False
        """True: keep the image current but apply nothing locally until `apply_full()`."""
        self.on_published: Callable[[], None] = lambda: None
        """Called after every image change (e.g. the lifecycle's catch-up check)."""
        self.on_cluster_changed: Callable[[MetadataImage], None] = lambda image: None
        """Called with the new image after every applied change that may touch the brokers
        (registrations, fencing, controlled shutdown; a snapshot or FULL apply): state that
        depends on other brokers (KIP-841 ineligible replicas, followers waiting for their
        leader's endpoint) must follow these even when no partition changed."""
        self._offset_changed = trio.Event()
        self._applied_offset = self.image.provenance.last_offset

    @property
    def applied_offset(self) -> int:
        """The last offset whose records are in the image and whose local changes are
        applied (the image may be ahead while a large delta is applied in slices)."""
        return self._applied_offset

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

    def publish(self, records: Sequence[Any], *, received_ms: int | None = None) -> None:
        """Replay committed records and apply what changed to the local partitions. An item
        that is a MetadataImage (a snapshot) replaces everything before it. `received_ms`:
        when the records were read (monotonic ms; default now)."""
        for _ in self._publishing(records, received_ms):
            pass

    async def apublish(self, records: Sequence[Any], *, received_ms: int | None = None) -> None:
        """`publish`, letting other tasks run between two slices of local changes."""
        for _ in self._publishing(records, received_ms):
            await trio.lowlevel.checkpoint()

    def _publishing(self, records: Sequence[Any], received_ms: int | None) -> Iterator[None]:
        """`publish`, yielding between two slices of at most LOCAL_STEP local changes."""
        self.received_ms = self.clock.monotonic_ms() if received_ms is None else received_ms
        run: list[tuple[int, Any]] = []
        for item in records:
            if isinstance(item, MetadataImage):
                yield from self._publish_records(run)
                run = []
                self.load_snapshot(item)
            else:
                run.append(item)
        yield from self._publish_records(run)

    def _publish_records(self, records: Sequence[tuple[int, Any]]) -> Iterator[None]:
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
        if self.partitions is not None and not self.defer_local_changes:
            if changes:
                yield from self._apply_in_slices(
                    list(changes.deletes),
                    [partition_change(tp, r) for tp, r in changes.leaders.items()],
                    [partition_change(tp, r) for tp, r in changes.followers.items()],
                )
            configs = delta.configs_delta
            if configs is not None:
                for topic in self._changed_topic_configs(delta):
                    n = self.partitions.update_topic_config(topic)
                    if n:
                        log.info("applied topic config", topic=topic, partitions=n)
            if delta.cluster_delta is not None:
                self.on_cluster_changed(self.image)
        self._changed()

    def _apply(
        self,
        *,
        deletes: list[TopicPartition],
        leaders: list[PartitionChange],
        followers: list[PartitionChange],
    ) -> None:
        assert self.partitions is not None
        apply = self.apply_changes or self.partitions.apply_leader_and_isr
        apply(deletes=deletes, leaders=leaders, followers=followers)

    def _apply_in_slices(
        self,
        deletes: list[TopicPartition],
        leaders: list[PartitionChange],
        followers: list[PartitionChange],
    ) -> Iterator[None]:
        """Deletes, leaders, followers in that order, LOCAL_STEP at a time: a topic's
        creation is one atomic batch of records, but its logs' files are made here, in the
        event loop, and on a busy disk 1,000 of them took 4 s, during which the broker's
        heartbeats stopped and the controller fenced it."""
        ordered: list[tuple[str, Any]] = [("d", tp) for tp in deletes]
        ordered += [("l", c) for c in leaders] + [("f", c) for c in followers]
        for start in range(0, len(ordered), LOCAL_STEP):
            if start:
                yield
            piece = ordered[start : start + LOCAL_STEP]
            self._apply(
                deletes=[x for kind, x in piece if kind == "d"],
                leaders=[x for kind, x in piece if kind == "l"],
                followers=[x for kind, x in piece if kind == "f"],
            )

    def _changed(self) -> None:
        self._applied_offset = self.image.provenance.last_offset
        self._offset_changed.set()
        self._offset_changed = trio.Event()
        self.on_published()

    def load_snapshot(self, image: MetadataImage) -> None:
        """Take a whole new image (a snapshot): configs reach the live logs, and unless local
        changes are deferred it is applied as a FULL change set."""
        before, self.image = self.image, image
        log.info(
            "metadata snapshot loaded",
            offset=image.provenance.last_offset,
            topics=len(image.topics.by_id),
            brokers=len(image.cluster.brokers),
        )
        if self.partitions is not None and not self.defer_local_changes:
            for topic in _changed_topic_configs(before, image):
                self.partitions.update_topic_config(topic)
            self.apply_full()
        self._changed()

    def apply_full(self) -> None:
        """Apply the current image as a FULL change set (strays deleted first) and stop
        deferring local changes."""
        self.defer_local_changes = False
        if self.partitions is None:
            return
        local: dict[TopicPartition, str | None] = {}
        for the_log in self.partitions.log_manager.logs():
            local[the_log.topic_partition] = the_log.topic_id
        for tp, partition in self.partitions.partitions.items():
            local.setdefault(tp, partition.state.topic_id or partition.log.topic_id)
        deletes, leaders, followers = full_local_changes(self.image, self.node_id, local.items())
        for tp in deletes:
            log.warning(
                "deleting stray partition",
                topic_partition=str(tp),
                reason="not in the metadata image, or another topic id",
            )
        for topic in {tp.topic for tp in local} | set(self.image.topics.by_name):
            self.partitions.update_topic_config(topic)
        self._apply(deletes=deletes, leaders=leaders, followers=followers)
        self.on_cluster_changed(self.image)
        log.info(
            "applied full metadata image",
            offset=self.applied_offset,
            deleted=len(deletes),
            leaders=len(leaders),
            followers=len(followers),
        )

    def replace_image(self, image: MetadataImage) -> None:
        """ZK mode: take an image built from UpdateMetadata (broker.metadata_cache); changed
        topic configs reach the live logs as they do from records."""
        before, self.image = self.image, image
        if self.partitions is not None:
            for topic in _changed_topic_configs(before, image):
                n = self.partitions.update_topic_config(topic)
                if n:
                    log.info("applied topic config", topic=topic, partitions=n)
        self._applied_offset = image.provenance.last_offset
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
            records = await source.read_committed(self.applied_offset)
            # Every step counts from the read: a later step's wait behind the earlier ones is
            # this broker's time too.
            received = self.clock.monotonic_ms()
            steps = publish_steps(records, PUBLISH_STEP)
            await self.apublish(next(steps), received_ms=received)
            for step in steps:
                # Requests run between the steps of a large delta (a fenced broker's 25,000
                # partition changes took 2 s in one go, during which nothing was served).
                await trio.lowlevel.checkpoint()
                await self.apublish(step, received_ms=received)


PUBLISH_STEP = 2_000
"""Records published at most in one step (between two steps, requests are served)."""
LOCAL_STEP = 200
"""Local partition changes applied at most in one go (between two, requests and heartbeats
run); the image takes a whole step at once."""


def publish_steps(records: Sequence[Any], step: int) -> Iterator[Sequence[Any]]:
    """`records` in consecutive slices of about `step` items, the first one always (maybe
    empty). A slice ends only between two PartitionChangeRecords, each a whole change of one
    partition that the controller writes without atomicity (KRaft's non-atomic batches: a
    fenced broker's elections and ISR shrinks); anything else - a topic's creation with its
    partitions, a snapshot - is published whole, as the controller wrote it."""
    start = 0
    n = len(records)
    while n - start > step:
        end = start + step
        while end < n and not (_is_change(records[end - 1]) and _is_change(records[end])):
            end += 1
        if end >= n:
            break
        yield records[start:end]
        start = end
    yield records[start:]


def _is_change(item: Any) -> bool:
    return isinstance(item, tuple) and isinstance(item[1], PartitionChangeRecord)


def _changed_topic_configs(before_image: MetadataImage, after_image: MetadataImage) -> list[str]:
    before = before_image.configs.resources
    after = after_image.configs.resources
    names = set()
    for resource in set(before) | set(after):
        if resource.type == TOPIC_RESOURCE and before.get(resource) != after.get(resource):
            names.add(resource.name)
    return sorted(names)
