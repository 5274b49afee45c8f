"""What a Raft leader pays to serve its fetchers one big metadata batch (RAFTPERF).

Appends one controller result of N PartitionChangeRecords (a broker fencing at 25,000
partitions: N=25,000) to a DiskLogStore as one proposal, then reads it back the way the
leader's Fetch answers and committed-entry hand-outs do: `fetch_max_entries` at a time from
the start of the batch, once per fetcher (2 followers + 3 broker observers), and encodes each
answer (raft.wire.encode_entries, cached across fetchers). Reported: the append, the reads
from the in-memory tail (what a leader does), the same reads with no tail (every read from
disk: a leader restarted, or a fetcher behind the tail) and the encodings.

    .venv/bin/python bench/run_raft_log_read.py [--records 25000] [--fetchers 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid

from protocol.metadata.records import PartitionChangeRecord, encode_record
from raft import wire
from raft.disk_log_store import TAIL_CACHE_BYTES, DiskLogStore
from raft.log_store import Entry


def _records(n: int) -> list[bytes]:
    topics = [str(uuid.uuid4()) for _ in range(max(1, n // 100))]
    return [
        encode_record(
            PartitionChangeRecord(partition_id=i % 100, topic_id=topics[i // 100], isr=(1, 2))
        )
        for i in range(n)
    ]


def _catch_up(store: DiskLogStore, first: int, fetchers: int, per_fetch: int) -> float:
    """Seconds to read [first, end) `per_fetch` entries at a time, once per fetcher."""
    t0 = time.perf_counter()
    for _ in range(fetchers):
        offset = first
        while offset < store.end_offset:
            got = store.read(offset, per_fetch)
            offset = got[-1].offset + 1
    return time.perf_counter() - t0


def _encodings(store: DiskLogStore, first: int, fetchers: int, per_fetch: int) -> float:
    """Reads + encoded answers, the fetchers taking turns (as they fetch side by side)."""
    t0 = time.perf_counter()
    offsets = [first] * fetchers
    while any(o < store.end_offset for o in offsets):
        for i, offset in enumerate(offsets):
            if offset < store.end_offset:
                got = store.read(offset, per_fetch)
                wire.encode_entries(got)
                offsets[i] = got[-1].offset + 1
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=25_000)
    parser.add_argument("--fetchers", type=int, default=5)
    parser.add_argument("--per-fetch", type=int, default=1000, help="RaftConfig.fetch_max_entries")
    args = parser.parse_args()
    records = _records(args.records)
    with tempfile.TemporaryDirectory() as directory:
        store = DiskLogStore(directory, tail_cache_bytes=TAIL_CACHE_BYTES)
        store.append([Entry(0, 1, b"")])
        store.flush()
        t0 = time.perf_counter()
        store.append([Entry(1 + i, 1, r) for i, r in enumerate(records)])
        append_s = time.perf_counter() - t0
        store.flush()
        tail_s = _catch_up(store, 1, args.fetchers, args.per_fetch)
        encode_s = _encodings(store, 1, args.fetchers, args.per_fetch)
        store.close()
        cold = DiskLogStore(directory, tail_cache_bytes=0)
        disk_s = _catch_up(cold, 1, args.fetchers, args.per_fetch)
        cold.close()
    print(
        f"{args.records} records ({sum(map(len, records))} bytes) in one append: {append_s:.3f} s; "
        f"{args.fetchers} fetchers x {args.per_fetch}-entry reads: from the tail {tail_s:.4f} s, "
        f"from disk (no tail) {disk_s:.4f} s; reads + encodings {encode_s:.4f} s"
    )


if __name__ == "__main__":
    main()
