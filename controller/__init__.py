"""The backend-agnostic controller (docs/architecture.md; its contracts: docs/internals.md,
controller/).

State is replayed from metadata records only (`state`); operations are pure functions
`(state, request, ctx) -> ControllerResult(records, response)` (`topics`, `configs`, `brokers`,
dispatched by `operations`); `driver` is the single-writer trio loop that runs them against a
`ports.MetadataLog` (a local log, ZooKeeper or Raft, wired in by deploy).
"""
