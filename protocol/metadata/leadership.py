"""The vocabulary a controller and its metadata backend share about leadership (the
controller.service.leadership port; zkstore.leadership and raft.leadership implement it): this
node was elected controller in an epoch, lost it, and what its term starts from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.metadata.image import MetadataImage


@dataclass(frozen=True, slots=True)
class Elected:
    """This node is the active controller in `epoch`."""

    epoch: int
    fencing_token: int = -1
    """What the backend fences this term's writes with (ZooKeeper: /controller_epoch's zk
    version); -1 where the epoch itself fences (Raft)."""


@dataclass(frozen=True, slots=True)
class Lost:
    """This node is no longer the active controller."""

    reason: str


LeadershipChange = Elected | Lost


@dataclass(frozen=True)
class Claim:
    """What a term starts from, once claimed."""

    image: MetadataImage | None
    """The state loaded for the term; None: the one every controller replays (Raft) is current."""
    topics_to_delete: tuple[str, ...] = ()
    """Topics a previous controller queued for deletion (ZooKeeper's /admin/delete_topics)."""
    records: int = -1
    """How many records the loaded state holds (-1: not loaded)."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Load timings for the "controller active" event (seconds, by phase)."""
