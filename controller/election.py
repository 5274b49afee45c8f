"""Leader election rules (Kafka's PartitionLeaderElectionAlgorithms / bestLeader).

Elections walk the replicas in assignment order, so the preferred (first) replica wins whenever
it can. Only the rules a new partition needs are used now; the offline, reassignment,
preferred and controlled-shutdown elections of issue 3 build on `offline_leader`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.metadata.records import NO_LEADER


@dataclass(frozen=True, slots=True)
class NewPartitionLeadership:
    leader: int
    isr: tuple[int, ...]


def new_partition_leadership(
    replicas: Sequence[int], is_live: Callable[[int], bool]
) -> NewPartitionLeadership:
    """A new partition's ISR is its live replicas and its leader the first of them in
    assignment order (NO_LEADER and an empty ISR when none is live)."""
    isr = tuple(r for r in replicas if is_live(r))
    return NewPartitionLeadership(leader=isr[0] if isr else NO_LEADER, isr=isr)


def offline_leader(
    replicas: Sequence[int],
    isr: Sequence[int],
    is_live: Callable[[int], bool],
    *,
    unclean_allowed: bool,
) -> int:
    """Kafka's offline election: the first live replica in the ISR, in assignment order; when
    none and unclean election is allowed, the first live replica at all; else NO_LEADER."""
    first_live = NO_LEADER
    for replica in replicas:
        if is_live(replica):
            if replica in isr:
                return replica
            if first_live == NO_LEADER:
                first_live = replica
    return first_live if unclean_allowed else NO_LEADER
