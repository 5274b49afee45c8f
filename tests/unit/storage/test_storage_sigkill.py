"""SIGKILL a process that appends to a log, many times at seeded moments, and check recovery.

Invariant: the page cache survives a process kill, so every append that *returned* before the
kill must be in the recovered log, fsync or not (only a power loss may lose unflushed data).
The recovered log must be a clean prefix: offsets 0..end-1, every record where it belongs.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from storage import LogManager
from tests.unit.storage.sigkill_writer import TP
from tests.unit.storage.storage_helpers import read_all

ROOT = Path(__file__).resolve().parents[3]
WRITER = Path(__file__).with_name("sigkill_writer.py")
SEED = 1122
ITERATIONS = 24


class LineReader:
    """Lines from a child's stdout with a deadline (never a bare blocking readline)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)
        self.buf = b""

    def readline(self, timeout: float = 30.0) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the writer printed nothing for 30 s")
            if not self.sel.select(left):
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def rest(self) -> list[str]:
        """Everything printed before the process died (call after wait())."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.buf += chunk
        self.sel.close()
        return [line for line in self.buf.decode().split("\n") if line]


def test_sigkill_mid_write_keeps_every_acknowledged_append(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    log_dir = tmp_path / "logs"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    acked_end = 0  # one past the highest acknowledged offset so far
    torn = 0
    for it in range(ITERATIONS):
        flush_messages = rng.choice([1, 50, 2**63 - 1])
        stderr_path = tmp_path / f"writer-{it}.stderr"
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(WRITER), str(log_dir), str(rng.randrange(10**9)),
                 str(flush_messages)],
                stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT, env=env,
            )  # fmt: skip
        reader = LineReader(proc)
        try:
            ready = reader.readline()
            assert ready is not None and ready.startswith("ready "), stderr_path.read_text()
            assert int(ready.split()[1]) >= acked_end, f"iteration {it}: the writer lost acks"
            lines = []
            for _ in range(rng.randint(1, 150)):
                line = reader.readline()
                assert line is not None, stderr_path.read_text()
                lines.append(line)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        lines += reader.rest()
        assert proc.returncode == -signal.SIGKILL
        for line in lines:
            _first, last = map(int, line.split())
            acked_end = max(acked_end, last + 1)

        manager = LogManager([log_dir], node_id=1, cluster_id="sigkill")
        manager.startup()
        log = manager.get_log(TP)
        assert log is not None
        torn += log.recovered_bytes_truncated > 0
        what = f"iteration {it} (flush.messages={flush_messages})"
        assert log.log_end_offset >= acked_end, f"{what}: acknowledged appends lost"
        records = read_all(log)
        assert [r.offset for r in records] == list(range(log.log_end_offset)), what
        bad = [
            r.offset for r in records if not (r.value or b"").startswith(f"{r.offset}:".encode())
        ]
        assert not bad, f"{what}: records out of place at {bad[:5]}"
        if it % 2:
            manager.shutdown()  # the next writer trusts the files
        else:
            manager.handles.close_all()  # the next writer runs recovery itself
    print(f"{ITERATIONS} kills, {torn} left a torn tail, {acked_end} offsets acknowledged")
