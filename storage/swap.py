"""The log cleaner's swap of its output into a log, and its crash recovery (Kafka's `.cleaned`
and `.swap`).

A cleaning writes `<base>.log.cleaned` (complete and fsynced before anything else happens);
`swap_files` (from storage.log.Log.replace_segments) renames it `<base>.log.swap`, renames the
segments it replaces to `.deleted`, then renames the swap file to `<base>.log`. A kill can stop
that anywhere; `complete_swaps` (run when a log opens, before its segments are listed) finishes
the job:

- `.cleaned`: the cleaning never started replacing anything; the originals are intact, so the
  half-written output goes.
- `.swap`: complete by construction, and it holds every record the cleaning keeps from the
  segments it replaces; those are the segments whose base offset lies in
  [swap base, swap's next offset). They go (if still there) and the swap becomes the segment.
  A replaced segment that lost all its records starts at or after the swap's next offset: if it
  survived, it is left as it was (older values, still in offset order), which costs space and
  nothing else; the next cleaning removes them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from typing import Protocol

import structlog

from protocol.errors import CorruptRecordBatchError
from protocol.record_batch import HEADER_SIZE, read_header
from storage.files import fsync_dir
from storage.segment import LogSegment

logger = structlog.get_logger("storage.swap")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_SEGMENT_EXTS = (".log", ".index", ".timeindex")


class Failpoints(Protocol):
    """The process's failpoint registry (deploy.node.failpoints.Failpoints; None: all off)."""

    def eval(self, name: str) -> object | None: ...


class FailpointCrash(Exception):
    """A cleaner failpoint fired: the cleaning stops there, as a kill would stop it (tests reopen
    the log from what is on disk)."""


def crash_point(failpoints: Failpoints | None, name: str) -> None:
    """Stop here when failpoint `name` fires: `return(exit)` SIGKILLs the process (an
    integration test's broker), any other value raises FailpointCrash (a unit test)."""
    value = None if failpoints is None else failpoints.eval(name)
    if value is None:
        return
    if value == "exit":
        os.kill(os.getpid(), signal.SIGKILL)
    raise FailpointCrash(name)


def swap_files(
    directory: str,
    old: Sequence[LogSegment],
    cleaned_path: str,
    failpoints: Failpoints | None = None,
) -> None:
    """Replace the consecutive segments `old` of the log in `directory` by the cleaned file
    (see the module doc); `old[0]`'s files are then the cleaned segment's."""
    swap_path = old[0].log_path + SWAP_SUFFIX
    os.replace(cleaned_path, swap_path)
    fsync_dir(directory)
    crash_point(failpoints, "log.cleaner.after_swap_rename")
    for seg in old:
        seg.release_handles()
        os.replace(seg.log_path, seg.log_path + DELETED_SUFFIX)
        for path in (seg.index_path, seg.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    crash_point(failpoints, "log.cleaner.before_swap_complete")
    os.replace(swap_path, old[0].log_path)
    fsync_dir(directory)
    for seg in old:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(seg.log_path + DELETED_SUFFIX)


def next_offset_of(path: str) -> int | None:
    """Offset after the last whole batch of a segment file (headers only), None if empty."""
    next_offset = None
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        try:
            h = read_header(data, pos)
        except CorruptRecordBatchError:
            break
        if pos + h.size > len(data):
            break
        next_offset = h.next_offset
        pos += h.size
    return next_offset


def complete_swaps(directory: str) -> int:
    """Finish or undo every cleaning a crash interrupted in `directory` (see the module doc).
    Returns how many swaps were completed."""
    names = os.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            os.unlink(os.path.join(directory, name))
    swaps = sorted(n for n in names if n.endswith(".log" + SWAP_SUFFIX))
    if not swaps:
        return 0
    for name in swaps:
        swap_path = os.path.join(directory, name)
        base = int(name.split(".", 1)[0])
        end = next_offset_of(swap_path)
        end = base + 1 if end is None else max(end, base + 1)
        for other in os.listdir(directory):
            stem, ext = os.path.splitext(other)
            ours = ext in _SEGMENT_EXTS and len(stem) == 20 and stem.isdigit()
            if ours and base <= int(stem) < end:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, other))
        os.replace(swap_path, os.path.join(directory, f"{base:020d}.log"))
        logger.info("cleaner_swap_completed", directory=directory, base_offset=base, end=end)
    fsync_dir(directory)
    return len(swaps)
