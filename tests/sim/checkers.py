"""Safety checkers, run after every simulation event on the nodes that event touched.

They see nodes only through `NodeView` (what a node's store and core say right now) and the
calls the simulation makes when a node's state machine changes (`apply`, `snapshot_loaded`),
takes a snapshot (`snapshot_created`), crashes (`crashed`), accepts a proposal (`proposed`) or
abandons proposals (`abandoned`), never through the core's internals, so hand-made histories
test them (tests/sim/test_checkers.py) and any core can be checked.

What "committed" means here: a node's log below its high watermark. An entry first seen
committed while the observing node was in epoch E counts as committed in epoch E (the leader of
E advanced the HW, followers learn it from that leader); Raft's leader completeness is about
leaders of epochs >= E.

Logs may start above 0 (the entries below a snapshot were deleted, or a follower restarted its
log at a fetched snapshot). Log matching and leader completeness are checked over the entries a
log holds; what lies below its start is the snapshot's business: every snapshot's state (a fold
over the committed prefix, `tests.sim.state_machine`) must equal the fold of what state machines
were handed, and so must every state machine's state after each entry it applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.sim.state_machine import INITIAL_DIGEST, decode_snapshot, fold

Entry = tuple[int, int, bytes]
"""(offset, epoch, data) of one log entry (raft.log_store.Entry compares equal)."""

LEADER = "leader"


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: int
    role: str
    """The core's state name: unattached, voted, follower, candidate, leader, resigned."""
    epoch: int
    log: Sequence[Entry]
    """The entries the node's log holds, `log_start` first."""
    high_watermark: int
    """Offsets below it are committed, as this node knows."""
    up: bool = True
    log_start: int = 0
    """Offset of log[0] (above 0 once a snapshot replaced the entries below it)."""
    start_epoch: int = 0
    """Epoch of the entry just below `log_start`: the snapshot's epoch (needed when log_start
    > 0: log matching compares it as the first entry's predecessor; 0 at offset 0)."""


class InvariantViolation(AssertionError):
    """A safety property failed; `check` names it, the message says what was seen."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check
        self.detail = detail


@dataclass
class _NodeTrack:
    start: int = 0
    log: list[Entry] = field(default_factory=list)
    high_watermark: int = 0
    keep: int = 0
    """Committed entries below this offset are on the node (flushed) and must stay in its log
    or under its log start (in a snapshot)."""
    applied_next: int = 0


class Checkers:
    def __init__(self) -> None:
        self._nodes: dict[int, _NodeTrack] = {}
        self.leaders: dict[int, int] = {}
        """epoch -> the one node seen leading it."""
        self._by_key: dict[tuple[int, int], tuple[bytes, int, int]] = {}
        """(offset, epoch) -> (data, epoch of the entry before it, first node seen with it).
        Equal keys must mean equal data and equal previous epochs: by induction down the log,
        that is log matching (equal (offset, epoch) => equal logs up to there) over any two
        logs' overlap, whatever offsets they start at."""
        self._max_offset: dict[int, int] = {}
        """epoch -> the highest offset seen holding an entry of that epoch."""
        self.committed: list[Entry | None] = []
        """committed[offset]; None where no node was seen holding it committed (it went
        straight into a snapshot): its snapshot states are checked instead."""
        self.commit_epochs: list[int] = []
        """commit_epochs[offset]: the epoch in which that offset was first seen committed."""
        self._max_commit_epoch = -1
        self.applied: dict[int, bytes] = {}
        """offset -> data handed to some node's state machine."""
        self.states: dict[int, bytes] = {0: INITIAL_DIGEST}
        """offset -> digest of the state after every entry below it: the fold of `applied`
        (and, where no state machine applied the prefix, the first snapshot seen there)."""
        self._current_leaders: dict[int, int] = {}
        """node -> epoch, for nodes whose latest view is leader."""
        self.proposals: dict[tuple[int, int], bytes] = {}
        """(epoch, offset) a leader promised a proposal -> its data."""
        self._abandoned_from: dict[int, int] = {}
        """epoch -> lowest offset of proposals its leader abandoned."""
        self._abandoned_data: set[bytes] = set()

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
        self._log_matching(view, track, log)
        self._commit(view, track, log)
        if view.role == LEADER:
            self._current_leaders[view.node_id] = view.epoch
            self._leader_completeness(view.node_id, view.epoch, view.log_start, log)
        else:
            self._current_leaders.pop(view.node_id, None)

    def crashed(self, node_id: int, flushed_end: int) -> None:
        """The node lost its log beyond `flushed_end`; its high watermark restarts from its
        log start (it is not persisted, as in KRaft), but committed entries it had flushed must
        stay; its state machine is gone (a restart loads the latest snapshot)."""
        track = self._track(node_id)
        track.keep = min(track.keep, flushed_end)
        track.high_watermark = 0
        track.applied_next = 0
        self._current_leaders.pop(node_id, None)

    # -- state machines ----------------------------------------------------------------------
    def apply(self, node_id: int, offset: int, data: bytes, digest: bytes | None = None) -> None:
        """The node's state machine got the committed entry at `offset`; `digest` is its state
        after it (None: not reported)."""
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
        states = self.states
        after = states.get(offset + 1)
        if after is None:
            after = states[offset + 1] = fold(states[offset], offset, data)
        if digest is not None and digest != after:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id}'s state after offset {offset} is {digest.hex()}, the fold of the "
                f"committed prefix is {after.hex()}",
            )

    def _check_snapshot(self, node_id: int, what: str, end_offset: int, epoch: int,
                        data: bytes) -> None:  # fmt: skip
        try:
            next_offset, digest = decode_snapshot(data)
        except ValueError as e:
            raise InvariantViolation(
                "state-machine safety", f"node {node_id} {what}: {e}"
            ) from None
        if end_offset > len(self.committed):
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} {what} ({end_offset}, {epoch}) above the high watermark: no "
                f"node was seen committing beyond offset {len(self.committed) - 1}",
            )
        if next_offset != end_offset:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} {what} ({end_offset}, {epoch}) holding the state at offset "
                f"{next_offset}",
            )
        expected = self.states.setdefault(end_offset, digest)
        if digest != expected:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} {what} ({end_offset}, {epoch}) whose state {digest.hex()} is not "
                f"the fold of the committed prefix below {end_offset} ({expected.hex()})",
            )
        below = self.committed[end_offset - 1] if 0 < end_offset <= len(self.committed) else None
        if below is not None and below[1] != epoch:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} {what} ({end_offset}, {epoch}) but the entry committed at "
                f"offset {end_offset - 1} has epoch {below[1]}",
            )

    def snapshot_created(self, node_id: int, end_offset: int, epoch: int, data: bytes) -> None:
        """The node stored a snapshot of its state below `end_offset`."""
        self._check_snapshot(node_id, "created snapshot", end_offset, epoch, data)

    def snapshot_loaded(self, node_id: int, end_offset: int, epoch: int, data: bytes) -> None:
        """The node's state machine was reset to a snapshot (fetched, or at start-up)."""
        self._check_snapshot(node_id, "loaded snapshot", end_offset, epoch, data)
        track = self._track(node_id)
        if end_offset < track.applied_next:
            raise InvariantViolation(
                "commit never goes back",
                f"node {node_id} loaded snapshot ({end_offset}, {epoch}) after applying up to "
                f"offset {track.applied_next}",
            )
        track.applied_next = end_offset

    # -- proposals -----------------------------------------------------------------------
    def proposed(self, epoch: int, offset: int, data: bytes) -> None:
        """A leader of `epoch` accepted a proposal and said it will be at `offset`."""
        self.proposals[(epoch, offset)] = data

    def abandoned(self, node_id: int, epoch: int, first_offset: int, last_offset: int) -> None:
        """The leader of `epoch` said its proposals at first..last will never commit. They
        were never appended, and that leader appends nothing in `epoch` any more, so: no log
        may ever hold an entry of `epoch` at or above `first_offset` (checked against what was
        seen and what will be), and their data (every proposal's is unique) never shows up."""
        if first_offset > last_offset:
            raise InvariantViolation(
                "abandoned proposals", f"node {node_id} abandoned an empty range {first_offset}.."
                f"{last_offset} of epoch {epoch}"
            )  # fmt: skip
        if self.leaders.get(epoch, node_id) != node_id:
            raise InvariantViolation(
                "abandoned proposals",
                f"node {node_id} abandoned proposals of epoch {epoch}, led by node "
                f"{self.leaders[epoch]}",
            )
        seen = self._max_offset.get(epoch, -1)
        if seen >= first_offset:
            raise InvariantViolation(
                "abandoned proposals",
                f"node {node_id} abandoned epoch {epoch}'s proposals from offset {first_offset}, "
                f"but a log already holds an entry of epoch {epoch} at offset {seen}",
            )
        self._abandoned_from[epoch] = min(self._abandoned_from.get(epoch, first_offset),
                                          first_offset)  # fmt: skip
        for offset in range(first_offset, last_offset + 1):
            data = self.proposals.get((epoch, offset))
            if data is not None:
                self._abandoned_data.add(data)

    # -- properties ------------------------------------------------------------------------
    def _election_safety(self, view: NodeView) -> None:
        if view.role != LEADER:
            return
        other = self.leaders.setdefault(view.epoch, view.node_id)
        if other != view.node_id:
            raise InvariantViolation(
                "election safety",
                f"nodes {other} and {view.node_id} were both leader of epoch {view.epoch}",
            )

    def _log_matching(self, view: NodeView, track: _NodeTrack, log: list[Entry]) -> None:
        node_id, start = view.node_id, view.log_start
        old = track.log
        if start == track.start:
            n = min(len(old), len(log))
            if old[:n] == log[:n]:
                same = n
            else:
                same = 0
                while old[same] == log[same]:
                    same += 1
            if same == len(log) and same == len(old):
                return
        else:
            same = 0  # the start moved (a snapshot): check the whole log again
        by_key, max_offset = self._by_key, self._max_offset
        proposals, abandoned_from = self.proposals, self._abandoned_from
        prev_epoch = log[same - 1][1] if same else view.start_epoch
        for i in range(same, len(log)):
            offset, epoch, data = log[i]
            if offset != start + i:
                raise InvariantViolation(
                    "log matching", f"node {node_id} holds offset {offset} at position {i} of a "
                    f"log starting at {start}"
                )  # fmt: skip
            seen = by_key.get((offset, epoch))
            if seen is None:
                by_key[(offset, epoch)] = (data, prev_epoch, node_id)
                if offset > max_offset.get(epoch, -1):
                    max_offset[epoch] = offset
                if offset >= abandoned_from.get(epoch, offset + 1):
                    raise InvariantViolation(
                        "abandoned proposals",
                        f"node {node_id} holds offset {offset} of epoch {epoch}, whose leader "
                        f"abandoned that epoch's proposals from offset {abandoned_from[epoch]}",
                    )
                promised = proposals.get((epoch, offset))
                if promised is not None and promised != data:
                    raise InvariantViolation(
                        "abandoned proposals",
                        f"offset {offset} epoch {epoch} holds {data!r} on node {node_id}, but "
                        f"the leader of epoch {epoch} promised it to proposal {promised!r}",
                    )
                if data in self._abandoned_data:
                    raise InvariantViolation(
                        "abandoned proposals",
                        f"node {node_id} holds abandoned proposal {data!r} at offset {offset}",
                    )
            elif seen[0] != data:
                raise InvariantViolation(
                    "log matching",
                    f"offset {offset} epoch {epoch} holds {data!r} on node {node_id} but "
                    f"{seen[0]!r} on node {seen[2]}",
                )
            elif seen[1] != prev_epoch:
                raise InvariantViolation(
                    "log matching",
                    f"offset {offset} epoch {epoch} is the same entry on nodes {node_id} and "
                    f"{seen[2]} but the logs before it differ (epoch {prev_epoch} vs {seen[1]} "
                    f"at offset {offset - 1})",
                )
            prev_epoch = epoch
        track.start = start
        track.log = log.copy()

    def _first_disagreement(self, start: int, log: list[Entry], lo: int, hi: int,
                            epoch: int) -> int | None:  # fmt: skip
        """The first offset in [lo, hi) where `log` (starting at `start`) differs from what
        was committed there; an offset no node was seen committing is learnt from `log`."""
        committed = self.committed
        if log[lo - start : hi - start] == committed[lo:hi]:
            return None
        for offset in range(lo, hi):
            have = committed[offset]
            if have is None:
                committed[offset] = log[offset - start]
                self.commit_epochs[offset] = epoch
            elif have != log[offset - start]:
                return offset
        return None

    def _commit(self, view: NodeView, track: _NodeTrack, log: list[Entry]) -> None:
        node_id, hw, start = view.node_id, view.high_watermark, view.log_start
        if hw < track.high_watermark:
            raise InvariantViolation(
                "commit never goes back",
                f"node {node_id} high watermark went from {track.high_watermark} to {hw}",
            )
        track.high_watermark = hw
        end = start + len(log)
        committed_here = min(hw, end)
        committed = self.committed
        # Entries committed on this node must agree with what any node committed there.
        bad = self._first_disagreement(start, log, start, min(committed_here, len(committed)),
                                       view.epoch)  # fmt: skip
        if bad is not None:
            raise InvariantViolation(
                "state-machine safety",
                f"node {node_id} committed {log[bad - start]!r} at offset {bad}, another node "
                f"{committed[bad]!r} (offset, epoch, data)",
            )
        if committed_here > len(committed):
            if start > len(committed):  # the offsets between went straight into a snapshot
                self.commit_epochs.extend([view.epoch] * (start - len(committed)))
                committed.extend([None] * (start - len(committed)))
            self.commit_epochs.extend([view.epoch] * (committed_here - len(committed)))
            committed.extend(log[len(committed) - start : committed_here - start])
            self._max_commit_epoch = max(self._max_commit_epoch, view.epoch)
            # Every current leader must hold what was just committed (unless it is a stale
            # leader of an older epoch, which Raft allows to exist for a while).
            for leader, epoch in self._current_leaders.items():
                if leader != node_id:
                    other = self._nodes[leader]
                    self._leader_completeness(leader, epoch, other.start, other.log)
        # Commit never goes back: what was committed here must stay in this node's log (a
        # crash may only drop what was not flushed: `crashed` lowers `keep`), or below its log
        # start, in a snapshot (whose state is checked when created and loaded).
        keep = track.keep
        if keep > start and (
            end < keep or self._first_disagreement(start, log, start, keep, view.epoch) is not None
        ):
            raise InvariantViolation(
                "commit never goes back",
                f"node {node_id} lost committed entries: it had {keep} committed and flushed "
                f"entries, its log now holds [{start}, {end}) and differs from them",
            )
        track.keep = max(keep, committed_here)

    def _leader_completeness(self, node_id: int, epoch: int, start: int,
                             log: Sequence[Entry]) -> None:  # fmt: skip
        committed, epochs = self.committed, self.commit_epochs
        n = len(committed) - start
        if n <= 0:
            return  # everything committed lies below its log start, in its snapshot
        if self._max_commit_epoch <= epoch and log[:n] == committed[start:]:
            return  # the common case, compared in C
        for offset in range(start, len(committed)):
            want = committed[offset]
            if want is None or epochs[offset] > epoch:
                continue
            i = offset - start
            if i >= len(log) or log[i] != want:
                have = log[i] if i < len(log) else "nothing"
                raise InvariantViolation(
                    "leader completeness",
                    f"node {node_id} leads epoch {epoch} without the entry committed at offset "
                    f"{offset} in epoch {epochs[offset]}: {want!r} (it has {have})",
                )
