"""Log cleaner throughput: compact one partition of N MB with K keys and print the figures.

    .venv/bin/python bench/run_cleaner.py                  # 200 MB, 10,000 keys, 1 KiB values
    .venv/bin/python bench/run_cleaner.py --mb 50 --keys 1000 --compression zstd

Builds the log with storage.Log directly (random keys, batches of --batch records, segments of
--segment-mb), rolls it so that everything is cleanable, then runs the same three steps as the
broker's cleaner (plan, clean in this thread, swap in) and reports the time of each step. The
throughput is the log's size before cleaning over the clean step's time (Kafka's cleaner log
line "Cleaned log ... at X MB/sec" counts the same way); the cleaner reads the dirty segments
twice (offset map, then copy), so it reads about twice that.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import tempfile
import time

from protocol.record_batch import Compression, Record, build_batch
from storage import Log, LogConfig
from storage.cleaner import DEFAULT_DEDUPE_BUFFER_BYTES, clean, plan_cleaning, swap_in


def build_log(directory: str, args: argparse.Namespace) -> tuple[Log, int]:
    cfg = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=args.segment_mb << 20,
        segment_ms=10**15,
        delete_retention_ms=0,
    )
    log = Log.open(os.path.join(directory, "bench-0"), cfg)
    rng = random.Random(42)
    value = os.urandom(args.value_bytes)
    target = args.mb * 1_000_000
    records = 0
    now = int(time.time() * 1000)
    codec = Compression.from_name(args.compression)
    while log.size < target:
        batch = [
            Record(value=value, key=b"key-%08d" % rng.randrange(args.keys), timestamp=now)
            for _ in range(args.batch)
        ]
        log.append_as_leader(build_batch(batch, compression=codec), 1)
        records += args.batch
    log.roll()
    log.flush()
    return log, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="log size to build (MB)")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=16, help="records per batch")
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--compression", default="none", choices=("none", "lz4", "zstd"))
    parser.add_argument("--dir", default=None, help="where to build the log (default: a tmp dir)")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="trioka-cleaner-bench-", dir=args.dir)
    try:
        t0 = time.monotonic()
        log, records = build_log(base, args)
        size_before = log.size
        segments_before = len(log.segments)
        t1 = time.monotonic()
        plan = plan_cleaning(log, first_dirty=0, now_ms=int(time.time() * 1000) + 1)
        assert plan is not None
        t2 = time.monotonic()
        result = clean(plan, DEFAULT_DEDUPE_BUFFER_BYTES)
        t3 = time.monotonic()
        assert swap_in(log, result)
        t4 = time.monotonic()
        clean_s = t3 - t2
        print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
        print(
            f"log: {size_before / 1e6:.1f} MB, {records:,} records, {args.keys:,} keys, "
            f"{segments_before} segments of <= {args.segment_mb} MiB, values "
            f"{args.value_bytes} B, {args.batch} records/batch, compression {args.compression}"
            f" (built in {t1 - t0:.1f} s)"
        )
        print(
            f"cleaned: {log.size / 1e6:.2f} MB in {len(log.segments)} segments, "
            f"{result.stats.records_kept:,} records kept"
        )
        print(
            f"plan {t2 - t1:.3f} s, clean {clean_s:.2f} s, swap {t4 - t3:.3f} s; read "
            f"{result.stats.bytes_read / 1e6:.1f} MB"
        )
        print(
            f"throughput: {size_before / 1e6 / clean_s:.1f} MB/s, "
            f"{records / clean_s:,.0f} records/s"
        )
        log.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
