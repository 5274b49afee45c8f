"""ControllerResult: what an operation returns (Kafka's ControllerResult)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.state_machines import StateChange
from protocol.metadata.records import MetadataRecord

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: Sequence[MetadataRecord]
    """Records to append; the response holds only once they are committed."""
    response: T
    """The answer to send once the records are committed."""
    state_changes: Sequence[StateChange] = ()
    """The partition / replica state changes the records make (checked against Kafka's
    state machines when the operation ran); logged once the records are committed."""
    atomic: bool = True
    """False: the records may be appended (and committed, and applied by brokers) in several
    batches, as KRaft's non-atomic results; each record must stand on its own (a fenced
    broker's partition changes). The answer still waits for the last one."""
