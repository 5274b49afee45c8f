"""The group coordinator (Kafka's GroupCoordinator with the classic protocol).

Pure modules (no trio, no I/O): `hashing` (the partition of a group), `records` (the
`__consumer_offsets` key/value codec), `group` (group and member state), `effects` (what the
core hands back), `rebalance` (one group's rebalance transitions), `snapshot` (a group to and
from its record), `coordinator` (the state machine's API: join, sync, heartbeat, leave,
offsets, ownership, deadlines from an injected clock), `loader` (folding an offsets
partition's records into groups). Trio side: `driver` (timers,
loads, appends to the offsets partitions) and `handlers` (the APIs' handlers).
"""
