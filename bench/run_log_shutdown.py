"""A clean shutdown's cost per partition (issue 15): LogManager.shutdown of N fresh, empty
logs, then of the same logs after an unclean start (recovered), in a temporary directory.

    .venv/bin/python bench/run_log_shutdown.py [--logs 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from protocol.names import TopicPartition
from storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager


def timed_shutdown(manager: LogManager) -> float:
    started = time.perf_counter()
    manager.shutdown()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=int, default=2000)
    args = parser.parse_args()
    d = tempfile.mkdtemp(prefix="trioka-bench-logs-")
    try:
        manager = LogManager([d], node_id=1, cluster_id=None)
        manager.startup()
        for i in range(args.logs):
            manager.get_or_create_log(TopicPartition(f"t-{i // 100:04d}", i % 100))
        fresh = timed_shutdown(manager)
        os.unlink(os.path.join(d, CLEAN_SHUTDOWN_FILE))  # as after a SIGKILL
        manager = LogManager([d], node_id=1, cluster_id=None)
        manager.startup()
        recovered = timed_shutdown(manager)
        print(f"{args.logs:,} empty logs: shutdown {fresh:.2f} s fresh, {recovered:.2f} s "
              "after an unclean start")  # fmt: skip
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
