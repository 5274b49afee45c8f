"""The ports the controller needs: a metadata log, and a way to send requests to brokers.

Backends (raft.local_log.LocalMetadataLog for a standalone broker, the ZooKeeper adapter, the
Raft metadata log) implement `MetadataLog` structurally; deploy wires one in. Committed records
come back to the controller through the backend's listener as `(offset, record)` pairs in offset
order (`ControllerDriver.handle_committed`).

`BrokerSender` is how the active controller's per-broker channels (`controller.service.channel`) reach a
broker; deploy wires `deploy.node.transport.PooledTransport` in (the broker's `broker.ports.Transport`
has the same signature). `ListenerProbe` is how the fast fencing asks a broker's listener who
answers (deploy.node.liveness_probe).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from controller.liveness import ProbeResult
from protocol.messages import Request, Response
from protocol.metadata.records import MetadataRecord


class MetadataLog(Protocol):
    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append records atomically; returns the offset of the last one. Raises KafkaError
        (e.g. KAFKA_STORAGE_ERROR, NOT_CONTROLLER) when nothing was appended."""
        ...

    async def wait_committed(self, offset: int) -> None:
        """Return once every record up to `offset` is committed (and delivered to listeners)."""
        ...


class BrokerSender(Protocol):
    """Sends one request to one broker and returns its response."""

    async def send(self, host: str, port: int, request: Request, *, timeout_s: float) -> Response:
        """The broker's response (whose error codes the caller inspects). Raises KafkaError
        (NETWORK_EXCEPTION, REQUEST_TIMED_OUT) or OSError when no response came back; the
        request may or may not have reached the broker."""
        ...


class ListenerProbe(Protocol):
    """Connects to a broker's listener and asks who answers, for the fast fencing
    (controller.liveness); deploy wires deploy.node.liveness_probe.TcpListenerProbe in."""

    async def probe(self, host: str, port: int) -> ProbeResult:
        """REFUSED, TIMEOUT, UNREACHABLE, ERROR, NO_ANSWER, or ANSWERED with the node id and
        broker epoch the broker's ApiVersions named. Never raises."""
        ...
