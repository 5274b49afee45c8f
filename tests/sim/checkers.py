"""Safety checkers, run after every simulation event on the nodes that event touched.

They see nodes only through `NodeView` (what a node's store and core say right now) and
`Checkers.applied` (what its state machine was handed), never through the core's internals,
so hand-made histories test them (tests/sim/test_checkers.py) and any core can be checked.

What "committed" means here: a node's log below its high watermark. An entry first seen
committed while the observing node was in epoch E counts as committed in epoch E (the leader of
E advanced the HW, followers learn it from that leader); Raft's leader completeness is about
leaders of epochs >= E.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

Entry = tuple[int, int, bytes]
"""(offset, epoch, data) of one log entry (raft.log_store.Entry compares equal); a node's log
is a list of them from offset 0 (no snapshots in the simulation yet)."""

LEADER = "leader"


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: int
    role: str
    """The core's state name: unattached, voted, follower, candidate, leader, resigned."""
    epoch: int
    log: Sequence[Entry]
    """The node's whole log, offset 0 first (snapshots would move the start: not yet)."""
    high_watermark: int
    """Offsets below it are committed, as this node knows."""
    up: bool = True


class InvariantViolation(AssertionError):
    """A safety property failed; `check` names it, the message says what was seen."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check
        self.detail = detail


@dataclass
class _NodeTrack:
    log: list[Entry] = field(default_factory=list)
    prefix: list[int] = field(default_factory=list)
    """prefix[i] = hash of log[0..i]: equal (offset, epoch) must mean equal prefixes."""
    high_watermark: int = 0
    keep: int = 0
    """This many leading entries are committed on the node and must stay in its log."""
    applied_next: int = 0


class Checkers:
    def __init__(self) -> None:
        self._nodes: dict[int, _NodeTrack] = {}
        self.leaders: dict[int, int] = {}
        """epoch -> the one node seen leading it."""
        self._by_key: dict[tuple[int, int], tuple[bytes, int, int]] = {}
        """(offset, epoch) -> (data, prefix hash, first node seen with it)."""
        self.committed: list[Entry] = []
        self.commit_epochs: list[int] = []
        """commit_epochs[offset]: the epoch in which that offset was first seen committed."""
        self._max_commit_epoch = -1
        self.applied: dict[int, bytes] = {}
        """offset -> data handed to some node's state machine."""
        self._current_leaders: dict[int, int] = {}
        """node -> epoch, for nodes whose latest view is leader."""

    def _track(self, node_id: int) -> _NodeTrack:
        track = self._nodes.get(node_id)
        if track is None:
            track = self._nodes[node_id] = _NodeTrack()
        return track

    def observe(self, view: NodeView) -> None:
        """Check one node's current state against everything seen so far."""
        track = self._track(view.node_id)
        if not view.up:
            self._current_leaders.pop(view.node_id, None)
            return
        log = view.log if isinstance(view.log, list) else list(view.log)
        self._election_safety(view)
        self._log_matching(view.node_id, track, log)
        self._commit(view, track, log)
        if view.role == LEADER:
            self._current_leaders[view.node_id] = view.epoch
            self._leader_completeness(view.node_id, view.epoch, log)
        else:
            self._current_leaders.pop(view.node_id, None)

    def crashed(self, node_id: int, flushed_end: int) -> None:
        """The node lost its log beyond `flushed_end`; its high watermark restarts from 0
        (it is not persisted, as in KRaft), but committed entries it had flushed must stay."""
        track = self._track(node_id)
        track.keep = min(track.keep, flushed_end)
        track.high_watermark = 0
        track.applied_next = 0
        self._current_leaders.pop(node_id, None)

    def apply(self, node_id: int, offset: int, data: bytes) -> None:
        """The node's state machine got the committed entry at `offset`."""
        track = self._track(node_id)
        if offset != track.applied_next:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} applied offset {offset} but its next is {track.applied_next}",
            )
        track.applied_next = offset + 1
        seen = self.applied.setdefault(offset, data)
        if seen != data:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} applied {data!r} at offset {offset}, another node {seen!r}",
            )

    def _election_safety(self, view: NodeView) -> None:
        if view.role != LEADER:
            return
        other = self.leaders.setdefault(view.epoch, view.node_id)
        if other != view.node_id:
            raise InvariantViolation(
                "election safety",
                f"nodes {other} and {view.node_id} were both leader of epoch {view.epoch}",
            )

    def _log_matching(self, node_id: int, track: _NodeTrack, log: list[Entry]) -> None:
        old = track.log
        n = min(len(old), len(log))
        if old[:n] == log[:n]:
            same = n
        else:
            same = 0
            while old[same] == log[same]:
                same += 1
        if same == len(log) and same == len(old):
            return
        prefix = track.prefix
        del prefix[same:]
        h = prefix[-1] if prefix else 0
        by_key = self._by_key
        for offset in range(same, len(log)):
            _, epoch, data = log[offset]
            h = hash((h, epoch, data))
            prefix.append(h)
            seen = by_key.get((offset, epoch))
            if seen is None:
                by_key[(offset, epoch)] = (data, h, node_id)
            elif seen[0] != data:
                raise InvariantViolation(
                    "log matching",
                    f"offset {offset} epoch {epoch} holds {data!r} on node {node_id} but "
                    f"{seen[0]!r} on node {seen[2]}",
                )
            elif seen[1] != h:
                raise InvariantViolation(
                    "log matching",
                    f"offset {offset} epoch {epoch} is the same entry on nodes {node_id} and "
                    f"{seen[2]} but the logs before it differ",
                )
        track.log = log.copy()

    def _commit(self, view: NodeView, track: _NodeTrack, log: list[Entry]) -> None:
        node_id, hw = view.node_id, view.high_watermark
        if hw < track.high_watermark:
            raise InvariantViolation(
                "commit never goes back",
                f"node {node_id} high watermark went from {track.high_watermark} to {hw}",
            )
        track.high_watermark = hw
        committed_here = min(hw, len(log))
        committed = self.committed
        # Entries committed on this node must agree with what any node committed there.
        n = min(committed_here, len(committed))
        if log[:n] != committed[:n]:
            offset = next(i for i in range(n) if log[i] != committed[i])
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} committed {log[offset]!r} at offset {offset}, another node "
                f"{committed[offset]!r} (offset, epoch, data)",
            )
        if committed_here > len(committed):
            committed.extend(log[len(committed) : committed_here])
            self.commit_epochs.extend([view.epoch] * (committed_here - len(self.commit_epochs)))
            self._max_commit_epoch = max(self._max_commit_epoch, view.epoch)
            # Every current leader must hold what was just committed (unless it is a stale
            # leader of an older epoch, which Raft allows to exist for a while).
            for leader, epoch in self._current_leaders.items():
                if leader != node_id:
                    self._leader_completeness(leader, epoch, self._nodes[leader].log)
        # Commit never goes back: what was committed here must stay in this node's log (a
        # crash may only drop what was not flushed: `crashed` lowers `keep`).
        keep = track.keep
        if len(log) < keep or log[:keep] != committed[:keep]:
            raise InvariantViolation(
                "commit never goes back",
                f"node {node_id} lost committed entries: it had {keep} committed and flushed "
                f"entries, its log now has {len(log)} and differs from them",
            )
        track.keep = max(keep, committed_here)

    def _leader_completeness(self, node_id: int, epoch: int, log: Sequence[Entry]) -> None:
        committed, epochs = self.committed, self.commit_epochs
        if self._max_commit_epoch <= epoch and log[: len(committed)] == committed:
            return  # the common case, compared in C
        for offset in range(len(committed)):
            if epochs[offset] > epoch:
                continue
            if offset >= len(log) or log[offset] != committed[offset]:
                have = log[offset] if offset < len(log) else "nothing"
                raise InvariantViolation(
                    "leader completeness",
                    f"node {node_id} leads epoch {epoch} without the entry committed at offset "
                    f"{offset} in epoch {epochs[offset]}: {committed[offset]!r} (it has {have})",
                )
