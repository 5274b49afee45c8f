"""The one port the controller needs: somewhere to append records and learn they committed.

Backends (raft.local_log.LocalMetadataLog for a standalone broker, the ZooKeeper adapter, the
Raft metadata log) implement it structurally; deploy wires one in. Committed records come back
to the controller through the backend's listener as `(offset, record)` pairs in offset order
(`ControllerDriver.handle_committed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from protocol.metadata.records import MetadataRecord


class MetadataLog(Protocol):
    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append records atomically; returns the offset of the last one. Raises KafkaError
        (e.g. KAFKA_STORAGE_ERROR, NOT_CONTROLLER) when nothing was appended."""
        ...

    async def wait_committed(self, offset: int) -> None:
        """Return once every record up to `offset` is committed (and delivered to listeners)."""
        ...
