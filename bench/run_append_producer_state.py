"""Leader-append cost per batch, plain batches vs idempotent ones (issue 5, producer state).

    PYTHONPATH=. .venv/bin/python bench/run_append_producer_state.py plain|idem

15 runs of 5,000 Log.append_as_leader calls of one 100-record (100 B values) batch each, on
tmpfs; prints microseconds per append (sorted runs), the minimum and the median.
"""

import shutil
import sys
import tempfile
import time

from protocol.record_batch import Record, build_batch
from storage import Log, LogConfig


def run(idem: bool, n: int = 20000) -> float:
    d = tempfile.mkdtemp(dir="/dev/shm")
    log = Log.open(f"{d}/t-0", LogConfig())
    recs = [Record(value=b"x" * 100, timestamp=1) for _ in range(100)]
    if idem:
        batches = [
            build_batch(recs, producer_id=7, producer_epoch=0, base_sequence=i * 100)
            for i in range(n)
        ]
    else:
        batches = [build_batch(recs) for _ in range(n)]
    t = time.perf_counter()
    for b in batches:
        log.append_as_leader(b, 0)
    dt = time.perf_counter() - t
    log.close()
    shutil.rmtree(d)
    return dt / n * 1e6


mode = sys.argv[1]
res = sorted(run(mode == "idem", 5000) for _ in range(15))
print(
    mode,
    "us/append (15 runs):",
    " ".join(f"{r:.1f}" for r in res),
    "min",
    f"{res[0]:.1f}",
    "median",
    f"{res[7]:.1f}",
)
