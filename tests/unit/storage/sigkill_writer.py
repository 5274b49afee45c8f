"""Appends to a storage log until it is killed (run by test_storage_sigkill.py).

Usage: python sigkill_writer.py LOG_DIR SEED FLUSH_MESSAGES

Prints `ready <log end offset>` once the log is open (after its own recovery), then one line
`<first offset> <last offset>` per append that returned. Record values start with
`<offset>:` so a reader can tell each record is where it belongs.
"""

from __future__ import annotations

import random
import sys

import structlog

from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch
from storage import LogConfig, LogManager

TP = TopicPartition("killed", 0)


def main() -> None:
    log_dir, seed, flush_messages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    # stdout carries only the protocol above; logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    manager = LogManager([log_dir], node_id=1, cluster_id="sigkill", max_open_files=16)
    manager.startup()
    config = LogConfig(
        segment_bytes=1 << 20,
        index_interval_bytes=1024,
        flush_messages=flush_messages,
        segment_ms=10**12,
        retention_ms=-1,
    )
    log = manager.get_or_create_log(TP, config)
    epoch = (log.latest_epoch() or 0) + rng.randint(0, 1)
    out = sys.stdout
    out.write(f"ready {log.log_end_offset}\n")
    out.flush()
    appends = 0
    while True:
        offset = log.log_end_offset
        big = rng.random() < 0.05  # a large append is the likeliest to be torn by the kill
        batches = []
        for _ in range(4 if big else 1):
            records = []
            for _ in range(rng.randint(1, 6)):
                filler = rng.randbytes(rng.randint(20_000, 60_000) if big else rng.randint(0, 300))
                records.append(Record(value=f"{offset}:".encode() + filler, timestamp=offset))
                offset += 1
            batches.append(build_batch(records))
        info = log.append_as_leader(b"".join(batches), epoch)
        out.write(f"{info.first_offset} {info.last_offset}\n")
        out.flush()
        appends += 1
        if appends % 40 == 0:
            manager.flush_dirty()
            manager.checkpoint_recovery_points()


if __name__ == "__main__":
    main()
