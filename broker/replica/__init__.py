"""The replication core: per-partition leader/follower state, HW, ISR, fetch sessions.

Pure (no trio, no I/O, no storage import): numbers and small protocols in, decisions out; the
fetchers, purgatories and LeaderAndIsr handling are its trio drivers.

- `epochs`: `EpochLookup` (the leader-epoch queries `storage.Log` answers), `EpochHistory`.
- `leader`: `FollowerState`, the KIP-497 ISR states, `AlterPartitionProposal`,
  `check_current_leader_epoch`, `diverging_epoch` (KIP-595).
- `partition_state`: `PartitionState`, one partition as leader or follower (HW, ISR changes,
  acks=all checks, follower-fetch checks).
- `follower`: `FollowerFetchState`, the follower's fetch position and truncation decisions
  (KIP-101/279), `follower_high_watermark`.
- `fetch_session`: KIP-227 `FetchSessionCache` (broker) and `FetchSessionHandler` (fetcher).
"""
