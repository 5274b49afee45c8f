"""What the broker needs from the rest of the system, as typing.Protocols (wired by deploy.node).

The broker never imports the controller or raft: deploy.node gives it a ControllerRoute per kind
of node (deploy.node.controller_routes) behind the one broker.controller_channel, and one
MetadataFeed per metadata source (broker.metadata_feeds: the controller's LeaderAndIsr /
UpdateMetadata requests in ZK mode, the metadata log's records through a MetadataSource in Raft
and standalone mode)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from protocol.messages import ApiKey, Request, Response

if TYPE_CHECKING:
    import trio

    from broker.config import BrokerConfig
    from broker.fetcher import ReplicaFetcherManager
    from broker.handlers.router import Handler
    from broker.metadata_publisher import MetadataPublisher
    from broker.partition_changes import LeadershipListener
    from broker.partitions import PartitionManager
    from protocol.names import TopicPartition


class Failpoints(Protocol):
    """The process's failpoint registry (deploy.node.failpoints.Failpoints), given to the
    components that hold failpoints; None (the default everywhere): all off."""

    def eval(self, name: str) -> object | None:
        """The failpoint's value when it fires, else None."""
        ...


class ControllerChannel(Protocol):
    """Forwards admin requests (CreateTopics, DeleteTopics, IncrementalAlterConfigs,
    CreatePartitions, ElectLeaders, Alter/ListPartitionReassignments) and the broker's own
    AlterPartition and ControlledShutdown requests to the active controller (Kafka's
    ForwardingManager / BrokerToControllerChannelManager). broker.controller_channel is the
    implementation; tests may use a fake."""

    async def submit(self, request: Request) -> Response:
        """The controller's response once its records are committed. May raise KafkaError
        (e.g. NOT_CONTROLLER, REQUEST_TIMED_OUT) when the controller cannot answer."""
        ...


@dataclass(frozen=True)
class Local:
    """The active controller runs in this process: submit to it directly."""

    submit: Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Remote:
    """The active controller (or the one to try) listens at host:port."""

    node_id: int
    host: str
    port: int
    description: str
    """How refusals name it ("controller 3001", "the active controller 2")."""


@dataclass(frozen=True)
class Unknown:
    """No controller to ask now (an election is under way); `reason` says why."""

    reason: str


class ControllerRoute(Protocol):
    """Where the active controller is, for broker.controller_channel: one adapter per metadata
    mode (ZooKeeper's /controller, the Raft observer's leader, the controller in this process)."""

    async def resolve(self, hint: int | None) -> Local | Remote | Unknown:
        """The controller to ask; `hint` is the node a refusal just named, if any."""
        ...

    def learned_new_leader(self, asked: int | None) -> bool:
        """True when the route has learned of an active controller other than `asked` since
        (a fresh lead, tried after the base backoff rather than a growing one)."""
        ...


class MetadataSource(Protocol):
    """Committed metadata records, in log order (the broker's view of the metadata log)."""

    def committed_offset(self) -> int:
        """Offset of the last committed record, -1 when the log is empty."""
        ...

    async def read_committed(self, after_offset: int) -> Sequence[tuple[int, Any]]:
        """Committed `(offset, record)` pairs with offset > after_offset, in order; waits until
        there is at least one. Records are protocol.metadata.records messages. A Raft-mode
        source may also deliver a `MetadataImage` item (a snapshot the observer loaded): it
        replaces everything before it. Offsets may have holes (Raft control entries)."""
        ...


class Transport(Protocol):
    """Sends one request to another node and returns its response (the replica fetchers use it
    to reach leaders). Raises OSError / trio errors / KafkaError when the node cannot answer
    within `timeout_s`; the caller backs off and retries."""

    async def send(
        self, host: str, port: int, request: Request, *, timeout_s: float
    ) -> Response: ...


@dataclass(frozen=True)
class BrokerCore:
    """The parts of a broker a MetadataFeed plugs into (built by broker.node.Broker)."""

    config: BrokerConfig
    partitions: PartitionManager
    publisher: MetadataPublisher
    """The metadata image (every feed keeps it current) and the records' publisher."""
    fetchers: ReplicaFetcherManager | None
    """The replica fetchers; None when the broker was given no transport (standalone)."""
    controller: ControllerChannel
    broker_epoch: Callable[[], int]
    notify: Callable[[TopicPartition], None]
    """Wakes the produce and fetch waits of a partition whose state changed."""
    on_leadership: LeadershipListener
    """The group coordinator's: partitions this broker now leads, and stopped leading."""
    failpoints: Failpoints | None = None


class MetadataFeed(Protocol):
    """Where a broker's metadata comes from: everything of the broker that depends on the
    metadata mode. One adapter per source (broker.metadata_feeds), chosen by deploy.node:
    `ZkMetadataFeed` (the controller's LeaderAndIsr / StopReplica / UpdateMetadata requests),
    `RaftMetadataFeed` (the metadata log's records through the Raft observer or the combined
    node's voter), `StandaloneMetadataFeed` (the standalone broker's local metadata log)."""

    self_listed_once_unfenced: bool
    """True: Metadata lists this broker only once its image has it registered and unfenced
    (Raft mode, as KRaft's getAliveBrokerNodes); False: always."""

    def attach(self, core: BrokerCore) -> None:
        """Hook into the broker's parts: where partition changes are applied (ZK and Raft mode
        through broker.partition_changes, fetchers included). Called once, by the Broker; may
        raise ConfigError (no fetchers where replicas must follow leaders)."""
        ...

    def handlers(self, relay: Handler) -> Mapping[ApiKey, Handler]:
        """The APIs this source adds to the broker's (ZK mode: the controller's requests, and
        `relay` for the broker-to-controller requests other brokers send here)."""
        ...

    async def start(self, nursery: trio.Nursery) -> None:
        """Start following the source in `nursery` (the broker's background loops); returns
        once the metadata committed so far is loaded (ZK mode: nothing to start)."""
        ...

    def forward_barrier(self) -> int | None:
        """Read once the controller answered a forwarded admin request: the metadata offset the
        image must reach before the broker answers it, or None to wait (bounded) for the
        request's effect in the image instead (when the image lags the controller's answer)."""
        ...

    def controller_id(self) -> int:
        """The controller id Metadata and DescribeCluster report."""
        ...

    async def controlled_shutdown(self) -> None:
        """The first step of a graceful shutdown: move this broker's leaderships away (ZK
        mode: the ControlledShutdown request; Raft mode: through the lifecycle heartbeat)."""
        ...
