"""File plumbing: an LRU of open descriptors, positional I/O, atomic replace, directory fsync.

Every log file is opened lazily through a FileHandleCache, so tens of thousands of partitions
fit in a small RLIMIT_NOFILE: a descriptor is borrowed for one system call at a time and never
held across another `fd()` call (which may close it to make room).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
from collections import OrderedDict
from collections.abc import Callable

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC


def default_max_open_files() -> int:
    """Half the soft RLIMIT_NOFILE (the rest is for sockets and the like), at least 16."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft // 2))


class FileHandleCache:
    """Descriptors for paths, opened on demand and closed least-recently-used first."""

    def __init__(self, max_open_files: int) -> None:
        if max_open_files < 2:
            raise ValueError(f"max_open_files must be at least 2, got {max_open_files}")
        self.max_open_files = max_open_files
        self._fds: OrderedDict[str, int] = OrderedDict()
        self.opens = 0
        """How many times a file was opened (tests and metrics)."""

    def __len__(self) -> int:
        return len(self._fds)

    def fd(self, path: str) -> int:
        """A descriptor open read-write on `path` (created if missing). Valid until the next
        call on this cache."""
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        while len(self._fds) >= self.max_open_files:
            self._evict_oldest()
        try:
            fd = os.open(path, _OPEN_FLAGS, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._fds:
                raise
            # Other parts of the process hold descriptors too: give back half of ours.
            for _ in range(max(1, len(self._fds) // 2)):
                self._evict_oldest()
            fd = os.open(path, _OPEN_FLAGS, 0o644)
        self.opens += 1
        self._fds[path] = fd
        return fd

    def is_open(self, path: str) -> bool:
        return path in self._fds

    def close(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            _close_quietly(fd)

    def close_under(self, directory: str) -> None:
        """Close every descriptor of a file in `directory` (before renaming or deleting it)."""
        prefix = os.path.join(directory, "")
        for path in [p for p in self._fds if p.startswith(prefix)]:
            self.close(path)

    def close_all(self) -> None:
        while self._fds:
            _path, fd = self._fds.popitem(last=False)
            _close_quietly(fd)

    def _evict_oldest(self) -> None:
        _path, fd = self._fds.popitem(last=False)
        _close_quietly(fd)


def _close_quietly(fd: int) -> None:
    # Nothing useful can be done about a failing close of a file we only read or wrote with
    # positional I/O; data durability is decided by fsync, not close.
    with contextlib.suppress(OSError):
        os.close(fd)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """Write all of `data` at `position` (pwrite may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        if written <= 0:
            raise OSError(errno.EIO, "pwrite wrote no bytes")
        view = view[written:]
        position += written


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Read up to `size` bytes at `position`; shorter only at the end of the file."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, fsync: bool = True) -> None:
    """Replace `path` by `data` all at once: write a tmp file, fsync it, rename, fsync the dir.

    With fsync=False the replacement is still atomic for readers and survives a process kill
    (the page cache does), only not a power loss.
    """
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            pwrite_all(fd, data, 0)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


def read_text(path: str, corrupt: Callable[[str], Exception]) -> str | None:
    """The file's text, or None when it does not exist; `corrupt(message)` is raised, naming
    the file in one line, when it is not UTF-8 text (a damaged disk, binary garbage)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise corrupt(
            f"{path} is damaged: byte {bad:#04x} at offset {exc.start} is not UTF-8 text"
        ) from None
