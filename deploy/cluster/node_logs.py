"""Reading a supervised node's log file (`trioka cluster logs`): its last lines, and the lines
appended afterwards (`-f`, like `docker logs -f`).

    lines, end = tail_lines(path, 20)          # the last 20 lines and the offset they end at
    for line in follow(path, end): ...         # every later line, until the caller stops
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

BLOCK = 64 * 1024
FOLLOW_POLL_S = 0.2

__all__ = ["follow", "tail_lines"]


def tail_lines(path: Path, count: int | None) -> tuple[list[bytes], int]:
    """The last `count` complete or partial lines of `path` (None: all), with the file's size
    when read. Reads backwards in blocks, so a long broker log costs only its tail."""
    with path.open("rb") as f:
        end = f.seek(0, 2)
        if count is None:
            f.seek(0)
            return f.read(end).splitlines(keepends=True), end
        data = b""
        pos = end
        # One newline more than lines wanted: the first (partial) line is cut off.
        while pos > 0 and data.count(b"\n") <= count:
            step = min(BLOCK, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    lines = data.splitlines(keepends=True)
    return (lines[-count:] if count > 0 else []), end


def follow(path: Path, offset: int, poll_s: float = FOLLOW_POLL_S) -> Iterator[bytes]:
    """Lines appended to `path` after `offset`, as they come (a partial last line waits for its
    newline). A file that shrank (truncated or replaced) is read again from its start."""
    pending = b""
    while True:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:
            offset, pending = 0, b""
        if size > offset:
            with path.open("rb") as f:
                f.seek(offset)
                chunk = f.read(size - offset)
            offset += len(chunk)
            *complete, pending = (pending + chunk).split(b"\n")
            yield from (line + b"\n" for line in complete)
        else:
            time.sleep(poll_s)  # waiting for a writer, as tail -f does
