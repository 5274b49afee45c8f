"""What the broker needs from the rest of the system, as typing.Protocols (wired by deploy).

The broker never imports the controller or raft: `deploy.node.broker` adapts the standalone
controller driver to `ControllerChannel` and the local metadata log to `MetadataSource`; the
cluster issues will adapt a remote controller and a Raft observer the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from protocol.messages import Request, Response


class ControllerChannel(Protocol):
    """Forwards admin requests (CreateTopics, DeleteTopics, IncrementalAlterConfigs,
    CreatePartitions, ElectLeaders, Alter/ListPartitionReassignments) and the broker's own
    AlterPartition and ControlledShutdown requests to the active controller (Kafka's
    ForwardingManager / BrokerToControllerChannelManager)."""

    async def submit(self, request: Request) -> Response:
        """The controller's response once its records are committed. May raise KafkaError
        (e.g. NOT_CONTROLLER, REQUEST_TIMED_OUT) when the controller cannot answer."""
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
