"""What an operation may use besides the state and the request: settings and randomness."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.config import ControllerConfig
from protocol.clock import SYSTEM_CLOCK
from protocol.metadata.topic_ids import random_uuid

if TYPE_CHECKING:
    from controller.cluster_control import ClusterControl


@dataclass(frozen=True, slots=True)
class ControllerContext:
    config: ControllerConfig = field(default_factory=ControllerConfig)
    rng: random.Random = field(default_factory=random.Random)
    """Placement's start index and shift; seeded in tests for determinism."""
    new_topic_id: Callable[[], str] = random_uuid
    """A fresh Uuid string per call (os.urandom by default: ids are never reused)."""
    topics_queued_for_deletion: Callable[[], Collection[str]] = frozenset
    """Ids of the topics queued for deletion right now (ZK mode: the driver's
    TopicDeletionManager, state outside the replayed image; none elsewhere). Read when an
    operation runs: the rebalance check skips them, ElectLeaders refuses them, as Kafka's
    topicDeletionManager.isTopicQueuedUpForDeletion."""
    cluster_control: ClusterControl | None = None
    """Raft mode: the active controller's broker sessions (KRaft's ClusterControlManager),
    built by `ClusterControl.activate` for one term; the broker lifecycle operations
    (BrokerRegistration, BrokerHeartbeat, UnregisterBroker, FenceStaleBrokers) need it and
    answer NOT_CONTROLLER without it. Soft state, never replayed."""
    clock_ms: Callable[[], int] = SYSTEM_CLOCK.monotonic_ms
    """Monotonic milliseconds for the broker sessions (the Raft driver passes its own clock,
    so the fencing timer and the sessions agree)."""
