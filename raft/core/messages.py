"""The Raft core's messages: pure frozen dataclasses (KIP-595's RPCs, KIP-996's pre-vote).

Not wire messages: a driver maps them to protocol/ requests. Every message names its
`sender`; the receiver is the `to` of the (to, message) pair in a `Ready`. Error codes are
Kafka's (`protocol.errors.ErrorCode`). Responses echo what they answer so a late, duplicated
or reordered response is recognised and ignored (the core has no correlation ids).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import ErrorCode
from raft.log_store import Entry, OffsetAndEpoch

# KRaft's "no leader known".
NO_LEADER = -1


@dataclass(frozen=True)
class VoteRequest:
    """A candidate asks for a vote in `epoch` (or, pre_vote, whether it could win one: the
    receiver neither votes nor changes epoch). `last_epoch`/`end_offset` describe the
    candidate's log for the up-to-date check."""

    sender: int
    epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True)
class VoteResponse:
    """`epoch`/`leader_id` are the voter's; `candidate_epoch` echoes the request's epoch."""

    sender: int
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool
    candidate_epoch: int
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    """The new leader of `epoch` announces itself to the voters."""

    sender: int
    epoch: int
    leader_id: int


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    sender: int
    epoch: int
    leader_id: int
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    """A leader resigning gracefully; `preferred_successors` are voters ordered by how far
    they had replicated (the first may start an election at once)."""

    sender: int
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    sender: int
    epoch: int
    leader_id: int
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class FetchRequest:
    """Pull replication: `epoch` is the fetcher's current leader epoch; `fetch_offset` its log
    end offset and `last_fetched_epoch` its last entry's epoch (the leader checks they match
    its own log). Observers fetch the same way; only voters' offsets count for the HW."""

    sender: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class FetchResponse:
    """Either `entries` from `fetch_offset` on, or `diverging_epoch` (truncate to this end
    offset for this epoch, then fetch again), with the leader's `high_watermark`.
    `snapshot_id`: the fetcher is below the leader's log start (or diverges below it): load
    this snapshot with FetchSnapshot, then fetch from its end offset.
    On error, `epoch`/`leader_id` tell the fetcher whom to follow."""

    sender: int
    epoch: int
    leader_id: int
    fetch_offset: int
    last_fetched_epoch: int
    error: ErrorCode = ErrorCode.NONE
    entries: tuple[Entry, ...] = ()
    high_watermark: int = 0
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None


@dataclass(frozen=True)
class FetchSnapshotRequest:
    """A follower told by a Fetch answer to load `snapshot_id` asks for its bytes from
    `position` on, at most `max_bytes` per answer (KRaft's FetchSnapshot)."""

    sender: int
    epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


@dataclass(frozen=True)
class FetchSnapshotResponse:
    """`data` is the chunk at `position` of a snapshot of `size` bytes. Errors:
    SNAPSHOT_NOT_FOUND (the leader no longer has it: Fetch again), POSITION_OUT_OF_RANGE,
    and the Fetch ones (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH)."""

    sender: int
    epoch: int
    leader_id: int
    snapshot_id: OffsetAndEpoch
    position: int
    error: ErrorCode = ErrorCode.NONE
    size: int = 0
    data: bytes = b""


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)
