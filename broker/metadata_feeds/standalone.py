"""The standalone broker's metadata feed (`metadata.mode=standalone`, the legacy single-node
broker on a local metadata log): the log's records through a MetadataSource into the
MetadataPublisher, whose local changes the partition manager applies directly (one node: no
follower, no fetcher). Its controller runs in the same process, so a forwarded admin request is
answered once the image reaches the log's commit offset, and Metadata names this broker as the
controller."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import trio

from broker.handlers.router import Handler
from broker.ports import BrokerCore, MetadataSource
from broker.replica.partition_state import PartitionChange
from protocol.messages import ApiKey
from protocol.names import TopicPartition


class StandaloneMetadataFeed:
    self_listed_once_unfenced = False

    def __init__(self, source: MetadataSource) -> None:
        self.source = source
        self._core: BrokerCore | None = None

    @property
    def core(self) -> BrokerCore:
        assert self._core is not None, "not attached to a broker"
        return self._core

    def attach(self, core: BrokerCore) -> None:
        self._core = core
        core.publisher.apply_changes = self._apply

    def handlers(self, relay: Handler) -> Mapping[ApiKey, Handler]:
        return {}

    async def start(self, nursery: trio.Nursery) -> None:
        await nursery.start(self.core.publisher.run, self.source)

    def forward_barrier(self) -> int | None:
        return self.source.committed_offset()

    def controller_id(self) -> int:
        return self.core.config.node_id  # the controller is local

    async def controlled_shutdown(self) -> None:
        """None: no other broker could take the leaderships over."""

    def _apply(
        self,
        *,
        deletes: Iterable[TopicPartition],
        leaders: Iterable[PartitionChange],
        followers: Iterable[PartitionChange],
    ) -> None:
        """The partition manager applies, the group coordinator follows."""
        deletes, leaders, followers = list(deletes), list(leaders), list(followers)
        self.core.partitions.apply_leader_and_isr(
            deletes=deletes, leaders=leaders, followers=followers
        )
        self.core.on_leadership(
            [(c.tp, c.leader_epoch) for c in leaders],
            [(c.tp, c.leader_epoch) for c in followers] + [(tp, None) for tp in deletes],
        )
