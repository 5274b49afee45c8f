"""Pure Raft core: no trio, no clock, no I/O (issue 4).

`RaftCore(config, store, rng, quorum_state, now_ms)`: inputs `step`, `tick`, `propose`,
`resign`; output `ready()` -> `Ready`, then `advance(ready)`. See `raft.core.raft`.
"""

from raft.core.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from raft.core.raft import RaftCore
from raft.core.types import (
    AbandonedProposals,
    ProposeResult,
    QuorumStateData,
    RaftConfig,
    Ready,
    Role,
)

__all__ = [
    "NO_LEADER",
    "AbandonedProposals",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Message",
    "ProposeResult",
    "QuorumStateData",
    "RaftConfig",
    "RaftCore",
    "Ready",
    "Role",
    "VoteRequest",
    "VoteResponse",
]
