"""The Raft core's configuration, its persisted quorum state and its outputs."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from raft.core.messages import NO_LEADER, Message
from raft.log_store import Entry, SnapshotId


class Role(enum.Enum):
    """KRaft's quorum states plus KIP-996's prospective (pre-vote) state."""

    UNATTACHED = "unattached"  # epoch known, no leader, no vote yet
    VOTED = "voted"  # voted for someone in this epoch, no leader known
    FOLLOWER = "follower"  # knows the leader of this epoch and fetches from it
    PROSPECTIVE = "prospective"  # pre-vote: asking whether it could win epoch + 1
    CANDIDATE = "candidate"  # voted for itself in this epoch, asking for votes
    LEADER = "leader"
    RESIGNED = "resigned"  # a leader that gave up this epoch (graceful or no quorum)


@dataclass(frozen=True)
class RaftConfig:
    """Timeouts are Kafka's `controller.quorum.*` settings (same defaults)."""

    node_id: int
    voters: frozenset[int]
    # controller.quorum.election.timeout.ms: a timeout is drawn in [T, 2T).
    election_timeout_ms: int = 1000
    # controller.quorum.fetch.timeout.ms: a follower without a good Fetch answer for this long
    # starts an election; a leader resigns when a majority has not fetched for 1.5x this
    # (KRaft's check-quorum timer).
    fetch_timeout_ms: int = 2000
    # controller.quorum.election.backoff.max.ms: after a lost election, wait up to this.
    election_backoff_max_ms: int = 1000
    # controller.quorum.request.timeout.ms: resend a Fetch/Vote that got no answer.
    request_timeout_ms: int = 2000
    # controller.quorum.retry.backoff.ms: after an error answer.
    retry_backoff_ms: int = 20
    # controller.quorum.append.linger.ms: how long proposals wait to be appended together.
    append_linger_ms: int = 25
    # Entries per append batch (drained at once when reached).
    max_batch_entries: int = 1000
    # KRaft's fetch max wait: the leader parks a Fetch with nothing new for this long.
    fetch_max_wait_ms: int = 500
    # Entries per Fetch answer. KRaft bounds an answer by bytes only; so does this default in
    # practice: a broker's 25,000-partition fencing (25,000 records of ~60 bytes) replicated
    # 1,000 entries per Fetch took 25 round trips, each with its fsync on the follower, before
    # it committed (3-5 s), and as many again for every broker's observer.
    fetch_max_entries: int = 200_000
    # Bytes of entry data per Fetch answer (KafkaRaftClient's MAX_FETCH_SIZE_BYTES, 8 MiB; at
    # least one entry goes): an answer never carries an unbounded run of big records.
    fetch_max_bytes: int = 8 * 1024 * 1024
    # Bytes per FetchSnapshot answer (KRaft fetches snapshots in chunks of at most this).
    fetch_snapshot_max_bytes: int = 8 * 1024 * 1024
    # Entries handed out as committed per Ready (the controller replays, a broker applies
    # them as one batch).
    max_committed_per_ready: int = 10_000
    # KIP-996 pre-vote before bumping the epoch.
    pre_vote: bool = True
    # UNSAFE when False: grant votes without the log up-to-date check. Exists only so the
    # simulator can prove it catches the safety violation this causes.
    check_log_up_to_date: bool = True

    def __post_init__(self) -> None:
        if not self.voters:
            raise ValueError("RaftConfig.voters must name at least one voter")
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "request_timeout_ms",
            "fetch_max_wait_ms",
            "fetch_max_entries",
            "fetch_max_bytes",
            "max_batch_entries",
            "max_committed_per_ready",
            "fetch_snapshot_max_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"RaftConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("election_backoff_max_ms", "retry_backoff_ms", "append_linger_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"RaftConfig.{name} must be >= 0, got {getattr(self, name)}")

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1


@dataclass(frozen=True)
class QuorumStateData:
    """What the quorum-state file holds (KRaft's quorum-state: epoch, voted-for, leader).
    -1 means none."""

    epoch: int = 0
    voted_for: int = NO_LEADER
    leader_id: int = NO_LEADER


@dataclass(frozen=True)
class ProposeResult:
    """`propose`'s answer: on NONE, `last_offset` is the offset the last record will have
    (it commits when the high watermark passes it) in `epoch`. On NOT_LEADER_OR_FOLLOWER,
    `leader_id`/`epoch` say whom to ask (NO_LEADER when unknown)."""

    error: ErrorCode
    epoch: int
    leader_id: int
    last_offset: int = -1
    message: str = ""


@dataclass(frozen=True)
class AbandonedProposals:
    """Proposals of `epoch` at offsets `first_offset`..`last_offset` (inclusive) that will
    never commit: the leader stopped leading while they were still queued (never appended).
    The driver fails their waiters with NOT_LEADER_OR_FOLLOWER."""

    epoch: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class Ready:
    """What the driver must do, in this order: (1) write `quorum_state` atomically if not
    None, (2) `flush()` the log store if `must_flush` (`entries` are the un-flushed ones,
    for information), (3) send `messages`, (4) apply `committed`, (5) `advance(ready)`.
    Messages may depend on (1) and (2) (a granted vote, a Fetch offset): never send first.
    `next_deadline_ms` is when to call `tick` at the latest (None: nothing scheduled).
    `snapshot`: before (4), reset the state machine to this snapshot (`store.read_snapshot`),
    then apply `committed` (which follow it). `abandoned`: proposals that will never commit
    (fail their waiters); proposals appended but not yet committed when leadership is lost
    may still commit under the next leader: the committed entries tell."""

    quorum_state: QuorumStateData | None
    must_flush: bool
    entries: tuple[Entry, ...]
    messages: tuple[tuple[int, Message], ...]
    committed: tuple[Entry, ...]
    high_watermark: int
    next_deadline_ms: int | None
    role: Role = field(default=Role.UNATTACHED)
    snapshot: SnapshotId | None = None
    abandoned: tuple[AbandonedProposals, ...] = ()

    @property
    def is_empty(self) -> bool:
        return (
            self.quorum_state is None
            and not self.must_flush
            and not self.messages
            and not self.committed
            and self.snapshot is None
            and not self.abandoned
        )
