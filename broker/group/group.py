"""A group and its members (Kafka's GroupMetadata and MemberMetadata), plain data plus the
rules about states and protocols that need no clock."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from broker.group.records import OffsetValue
from protocol.names import TopicPartition


class GroupState(Enum):
    """Kafka's classic group states (the values are their names on the wire)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupMetadata.validPreviousStates.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    """(name, metadata) in the member's preference order."""
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    sent_sync: bool = False
    """Sent SyncGroup in the current generation (DelayedSync removes those that did not)."""
    heartbeat_deadline_ms: int = 0
    is_new: bool = False

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)


@dataclass(slots=True, eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)
    """KIP-394: member ids given with MEMBER_ID_REQUIRED -> the deadline to join with them."""
    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    state_timestamp_ms: int = 0
    join_deadline_ms: int | None = None
    """PreparingRebalance: when the delayed join completes anyway."""
    initial_delay_remaining_ms: int = 0
    """group.initial.rebalance.delay.ms phase: how much longer the delay may be extended."""
    in_initial_delay: bool = False
    new_member_added: bool = False
    sync_deadline_ms: int | None = None
    """CompletingRebalance: when members that did not sync are removed (DelayedSync)."""

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka's supportsProtocols: an empty group takes anything non-empty; otherwise the
        type must match and one protocol must be common to every member and this one."""
        names = {name for name, _ in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: each member votes its first candidate; most votes wins (ties:
        the candidate named first by the earliest member, so the choice is deterministic)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values())).protocol_names()
        order = {name: i for i, name in enumerate(first)}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
