"""The quorum-state file: a Raft node's durable vote and epoch (KRaft's FileQuorumStateStore).

A voter must never forget the epoch it reached or whom it voted for in it, or it could vote
twice in one epoch after a restart and let two leaders be elected. So the driver writes this
file before it sends anything that depends on it (a granted vote, a candidacy).

Layout and JSON as Kafka's: `<metadata.log.dir>/__cluster_metadata-0/quorum-state`, one JSON
object in Kafka's QuorumStateData form. Version 0 (what trioka writes):

    {"clusterId": "", "leaderId": 1, "leaderEpoch": 5, "votedId": -1, "appliedOffset": 0,
     "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}

Version 1 (Kafka since KIP-853) drops clusterId, appliedOffset and currentVoters and adds
votedDirectoryId; it is read too (the directory id is ignored: trioka has none). -1 means none.

Writes are atomic (storage.files.atomic_write: write `quorum-state.tmp`, fsync, rename over the
file, fsync the directory), so a crash leaves either the old or the new state, never a mix; a
left-over `.tmp` from a crash mid-write is ignored by `read` and replaced by the next write. A
file that is nonetheless torn or corrupt (a disk fault, a hand edit) is refused with a
QuorumStateError naming the path and the problem: guessing an epoch or a vote is unsafe.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any

from protocol.errors import TriokaError
from raft.core.types import QuorumStateData
from storage.files import atomic_write

QUORUM_STATE_FILE = "quorum-state"
"""Kafka's file name, in the metadata partition's directory."""
WRITE_VERSION = 0
SUPPORTED_VERSIONS = (0, 1)
NONE = -1


class QuorumStateError(TriokaError):
    """The quorum-state file cannot be read or written; says which file and why."""

    def __init__(self, path: str, problem: str, os_error: OSError | None = None) -> None:
        super().__init__(f"quorum-state file {path}: {problem}")
        self.path = path
        self.problem = problem
        self.os_error = os_error


@dataclass(frozen=True, slots=True)
class StoredQuorumState:
    """The file's content (Kafka's QuorumStateData)."""

    leader_epoch: int = NONE
    """The latest epoch this node knows (-1: none yet)."""
    leader_id: int = NONE
    """The leader of that epoch, if known."""
    voted_id: int = NONE
    """The candidate this node voted for in that epoch, if any."""
    applied_offset: int = 0
    """Kafka writes 0 and never reads it; kept for the format."""
    current_voters: tuple[int, ...] | None = None
    """The voter ids this node was configured with (v0 only), None when not recorded."""
    cluster_id: str = ""
    """The cluster id (v0 only; Kafka writes an empty string)."""

    def to_core(self) -> QuorumStateData:
        """The core's view: epoch 0 stands for 'no epoch yet'."""
        return QuorumStateData(
            epoch=max(self.leader_epoch, 0), voted_for=self.voted_id, leader_id=self.leader_id
        )

    @classmethod
    def from_core(
        cls,
        state: QuorumStateData,
        *,
        voters: tuple[int, ...] | None = None,
        cluster_id: str = "",
    ) -> StoredQuorumState:
        return cls(
            leader_epoch=state.epoch,
            leader_id=state.leader_id,
            voted_id=state.voted_for,
            current_voters=None if voters is None else tuple(sorted(voters)),
            cluster_id=cluster_id,
        )


def encode_quorum_state(state: StoredQuorumState) -> bytes:
    """The file's bytes for `state` (version 0 JSON, Kafka's field names)."""
    _check(state)
    doc: dict[str, Any] = {
        "clusterId": state.cluster_id,
        "leaderId": state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": state.voted_id,
        "appliedOffset": state.applied_offset,
        "currentVoters": None
        if state.current_voters is None
        else [{"voterId": v} for v in state.current_voters],
        "data_version": WRITE_VERSION,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _check(state: StoredQuorumState) -> None:
    """Refuse to write what `decode_quorum_state` would refuse to read."""
    for name in ("leader_epoch", "leader_id", "voted_id"):
        value = getattr(state, name)
        if type(value) is not int or value < NONE:
            raise ValueError(f"quorum state {name} must be an integer >= -1, got {value!r}")
    if state.leader_epoch == NONE and (state.leader_id != NONE or state.voted_id != NONE):
        raise ValueError("quorum state names a leader or a vote without an epoch")
    if state.current_voters is not None and any(
        type(v) is not int or v < 0 for v in state.current_voters
    ):
        raise ValueError(f"quorum state voter ids must be integers >= 0: {state.current_voters}")


def decode_quorum_state(path: str, data: bytes) -> StoredQuorumState:
    """Parse the file's bytes; QuorumStateError naming `path` and the problem otherwise."""
    if not data:
        raise QuorumStateError(path, "the file is empty (a torn write?)")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise QuorumStateError(path, f"not UTF-8 text (corrupt?): {exc}") from None
    except json.JSONDecodeError as exc:
        raise QuorumStateError(
            path, f"not valid JSON ({exc.msg} at byte {exc.pos} of {len(data)}; torn or corrupt?)"
        ) from None
    if not isinstance(doc, dict):
        raise QuorumStateError(path, f"expected a JSON object, got {type(doc).__name__}")

    def integer(key: str, default: int | None = None, minimum: int = NONE) -> int:
        value = doc.get(key, default)
        if value is None:
            raise QuorumStateError(path, f"field {key!r} is missing")
        if type(value) is not int:
            raise QuorumStateError(path, f"field {key!r} must be an integer, got {value!r}")
        if value < minimum:
            raise QuorumStateError(path, f"field {key!r} must be >= {minimum}, got {value}")
        return value

    version = integer("data_version", minimum=0)
    if version not in SUPPORTED_VERSIONS:
        raise QuorumStateError(
            path, f"data_version {version} is not supported (this node reads 0 and 1)"
        )
    epoch = integer("leaderEpoch", NONE)
    leader = integer("leaderId", NONE)
    voted = integer("votedId", NONE)
    if epoch == NONE and (leader != NONE or voted != NONE):
        raise QuorumStateError(path, "names a leader or a vote but no leaderEpoch")
    if version > 0:
        return StoredQuorumState(leader_epoch=epoch, leader_id=leader, voted_id=voted)
    cluster_id = doc.get("clusterId", "")
    if not isinstance(cluster_id, str):
        raise QuorumStateError(path, f"field 'clusterId' must be a string, got {cluster_id!r}")
    applied = integer("appliedOffset", 0)
    raw_voters = doc.get("currentVoters")
    voters: tuple[int, ...] | None = None
    if raw_voters is not None:
        if not isinstance(raw_voters, list):
            raise QuorumStateError(
                path, f"field 'currentVoters' must be a list or null, got {raw_voters!r}"
            )
        ids = []
        for item in raw_voters:
            vid = item.get("voterId") if isinstance(item, dict) else None
            if type(vid) is not int or vid < 0:
                raise QuorumStateError(
                    path, f"'currentVoters' entries must be {{\"voterId\": id >= 0}}, got {item!r}"
                )
            ids.append(vid)
        voters = tuple(ids)
    return StoredQuorumState(
        leader_epoch=epoch,
        leader_id=leader,
        voted_id=voted,
        applied_offset=applied,
        current_voters=voters,
        cluster_id=cluster_id,
    )


class FileQuorumStateStore:
    """Reads and atomically writes `<directory>/quorum-state`.

    `voters` and `cluster_id` are recorded in every write (Kafka's v0 file) for a person
    reading it; the Raft core's state is epoch, vote and leader. `fsync=False` is for tests
    that do not need power-loss durability (the rename is still atomic).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        voters: tuple[int, ...] | None = None,
        cluster_id: str = "",
        fsync: bool = True,
    ) -> None:
        self.path = os.path.join(os.fspath(directory), QUORUM_STATE_FILE)
        self._voters = voters
        self._cluster_id = cluster_id
        self._fsync = fsync

    def read_stored(self) -> StoredQuorumState | None:
        """The file's content, or None when there is no file (a node that never voted)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise QuorumStateError(self.path, f"cannot read it: {exc}", exc) from None
        return decode_quorum_state(self.path, data)

    def read(self) -> QuorumStateData | None:
        """The Raft core's state from the file, or None when there is none."""
        stored = self.read_stored()
        return None if stored is None else stored.to_core()

    def write(self, state: QuorumStateData) -> None:
        """Replace the file with `state`, atomically and (by default) durably."""
        self.write_stored(
            StoredQuorumState.from_core(state, voters=self._voters, cluster_id=self._cluster_id)
        )

    def write_stored(self, state: StoredQuorumState) -> None:
        data = encode_quorum_state(state)
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            atomic_write(self.path, data, fsync=self._fsync)
        except OSError as exc:
            raise QuorumStateError(self.path, f"cannot write it: {exc}", exc) from None

    def clear(self) -> None:
        """Remove the file and any left-over temporary file (Kafka's clear)."""
        for path in (self.path, self.path + ".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
