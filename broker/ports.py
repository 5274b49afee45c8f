"""What the broker needs from the rest of the system, as typing.Protocols (wired by deploy.node).

The broker never imports the controller or raft: deploy.node gives it a ControllerRoute per kind
of node (deploy.node.controller_routes) behind the one broker.controller_channel, and a
MetadataSource (the standalone local log, the Raft observer) or, in ZK mode, the controller's
LeaderAndIsr/UpdateMetadata requests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.messages import Request, Response


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
