"""Raft mode's metadata feed (a Raft-mode broker's observer, or a combined node's voter): the
metadata log's records through a MetadataSource into the MetadataPublisher, whose local changes
go through the code ZK mode's LeaderAndIsr uses (broker.partition_changes), fetchers included
(KRaft's BrokerMetadataPublisher -> ReplicaManager.applyDelta).

Nothing is applied locally before the initial catch-up (the publisher defers local changes
until deploy.node's lifecycle wiring calls `apply_full()`). Changes to the registered brokers
alone (registration, fencing, controlled shutdown) still reach the partitions: a leader's
ineligible replicas follow the image (KIP-841), and followers waiting for their leader's
endpoint start fetching."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

import structlog
import trio

from broker.fetcher import SourceBroker
from broker.handlers.router import Handler
from broker.partition_changes import PartitionChangeApplier, applier_for
from broker.ports import BrokerCore, MetadataSource
from broker.replica.partition_state import PartitionChange
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.metadata.image import MetadataImage
from protocol.names import TopicPartition

log = structlog.get_logger("broker")


class RaftMetadataFeed:
    """`controlled_shutdown`: the lifecycle's controlled shutdown through the heartbeat (a
    Raft-mode broker's; a combined node has none: no other broker could take over)."""

    self_listed_once_unfenced = True

    def __init__(
        self,
        source: MetadataSource,
        *,
        controlled_shutdown: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.source = source
        self._controlled_shutdown = controlled_shutdown
        self._core: BrokerCore | None = None
        self._applier: PartitionChangeApplier | None = None

    @property
    def core(self) -> BrokerCore:
        assert self._core is not None, "not attached to a broker"
        return self._core

    @property
    def applier(self) -> PartitionChangeApplier:
        """Where the image's local changes are applied (set by `attach`)."""
        assert self._applier is not None, "not attached to a broker"
        return self._applier

    def attach(self, core: BrokerCore) -> None:
        self._core = core
        self._applier = applier_for(core)
        publisher = core.publisher
        publisher.apply_changes = self._apply_from_image
        publisher.on_cluster_changed = self._brokers_changed
        # KRaft: nothing is applied locally before the initial catch-up (apply_full).
        publisher.defer_local_changes = True

    def handlers(self, relay: Handler) -> Mapping[ApiKey, Handler]:
        return {}

    async def start(self, nursery: trio.Nursery) -> None:
        await nursery.start(self.core.publisher.run, self.source)

    def forward_barrier(self) -> int | None:
        # The observer's commit lags the controller's answer, so forwarded requests wait for
        # their effect in the image (as ZK mode), not for an offset.
        return None

    def controller_id(self) -> int:
        """KRaft brokers report a random alive broker (clients send controller-bound requests
        there and it forwards them); trioka reports the lowest unfenced broker id, stable
        between requests, this broker when none."""
        cluster = self.core.publisher.image.cluster
        usable = [b for b in cluster.brokers if cluster.is_usable(b)]
        return min(usable) if usable else self.core.config.node_id

    async def controlled_shutdown(self) -> None:
        if self._controlled_shutdown is not None:
            await self._controlled_shutdown()

    # -- the image's changes through the LeaderAndIsr code ----------------------------------

    def live_sources(self, image: MetadataImage) -> dict[int, SourceBroker]:
        """Registered brokers at their inter-broker endpoint: where followers fetch from (as
        KRaft's makeFollowers, a fenced leader's registration still gives its address)."""
        config = self.core.config
        listener = config.inter_broker_listener_name
        out = {}
        for broker_id, reg in image.cluster.brokers.items():
            endpoint = reg.endpoint(listener)
            if endpoint is not None and broker_id != config.node_id:
                out[broker_id] = SourceBroker(broker_id, endpoint.host, endpoint.port)
        return out

    def _apply_from_image(
        self,
        *,
        deletes: Iterable[TopicPartition],
        leaders: Iterable[PartitionChange],
        followers: Iterable[PartitionChange],
    ) -> None:
        image = self.core.publisher.image
        fresh_leaders = [c for c in leaders if self._fresh(c)]
        fresh_followers = [c for c in followers if self._fresh(c)]
        errors = self.applier.apply_partition_changes(
            deletes=deletes,
            leaders=fresh_leaders,
            followers=fresh_followers,
            live_brokers=self.live_sources(image),
        )
        # Only the partitions this change made leaders: the others' ineligible replicas
        # change with the brokers alone (`_brokers_changed`), not with a partition change.
        self._update_ineligible(image, [c.tp for c in fresh_leaders])
        failed = {str(tp): code for tp, code in errors.items() if code}
        publisher = self.core.publisher
        log.info(
            "applied metadata changes",
            offset=image.provenance.last_offset,
            deleted=len(errors) - len(fresh_leaders) - len(fresh_followers),
            leaders=len(fresh_leaders),
            followers=len(fresh_followers),
            failed=len(failed),
            apply_ms=float(publisher.clock.monotonic_ms() - publisher.received_ms),
        )
        if failed:
            log.warning("metadata changes failed", partitions=dict(list(failed.items())[:20]))

    def _brokers_changed(self, image: MetadataImage) -> None:
        """A broker registered, was fenced/unfenced or began a controlled shutdown: the
        leaders' ineligible replicas follow (a broker back from fencing may rejoin an ISR),
        and followers waiting for their leader's endpoint start fetching."""
        self._update_ineligible(image)
        self.applier.resume_followers(self.live_sources(image))

    def _fresh(self, change: PartitionChange) -> bool:
        code = self.applier.check(change)
        if code == 0:
            return True
        if code != ErrorCode.STALE_CONTROLLER_EPOCH:
            log.warning(
                "skipping partition change", topic_partition=str(change.tp), error=code.name
            )
        return False

    def _update_ineligible(
        self, image: MetadataImage, only: Iterable[TopicPartition] | None = None
    ) -> None:
        """Fenced or shutting-down brokers may not join an ISR (KIP-841): for the partitions
        this broker leads among `only` (None: all of them)."""
        cluster = image.cluster
        unusable = {b for b, reg in cluster.brokers.items() if not reg.usable}
        partitions = self.core.partitions.partitions
        chosen = partitions.values() if only is None else map(partitions.get, only)
        for partition in chosen:
            if partition is None or not partition.state.is_leader:
                continue
            state = partition.state
            ineligible = frozenset(
                r for r in state.replicas if r in unusable or r not in cluster.brokers
            )
            if ineligible == state.ineligible_replicas:
                continue
            state.ineligible_replicas = ineligible
            # A replica out of the ISR counts for the HW while it is caught up and eligible
            # (Kafka's rule): a fenced one no longer holds it back (KAFKA-15021), and the
            # produces and fetches waiting on the HW must hear of it.
            if state.maybe_advance_high_watermark():
                self.core.notify(partition.tp)
