"""What an operation may use besides the state and the request: settings and randomness."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from controller.config import ControllerConfig
from protocol.metadata.topic_ids import random_uuid


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
