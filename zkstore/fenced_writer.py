"""Fenced multi-op writes: the only way the controller changes ZooKeeper.

Every multi-op starts with a check that /controller_epoch is still at the version this
controller wrote when it was elected; a controller that lost its place (a zombie: its session
expired, another broker was elected and bumped the epoch) sees that check fail and gets
ControllerMovedError with nothing of that multi-op applied (Kafka's
`MultiRequest(CheckOp(ControllerEpochZNode.path, expectedControllerEpochZkVersion) +: ops)`).

ZooKeeper refuses a request larger than jute.maxbuffer (1 MiB - 1 by default; the server drops
the connection), so a large change is split into several multi-ops, each measured in the bytes
kazoo will send (request header + the serialized multi with the chroot prefixed, each with its
own epoch check). They are sent pipelined on the one session, at most `max_in_flight` waiting
for an answer: ZooKeeper applies one session's requests in the order sent, so a parent created
by an earlier multi-op exists for a later one. The split makes a change non-atomic across its
multi-ops; `WriteFailed.partial` says whether some of them were applied.

`split_ops` and `request_size` are pure (unit-tested); `FencedWriter.write` does the I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog
import trio
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.serialization import (
    CheckVersion,
    Create,
    Delete,
    MultiHeader,
    SetData,
    Transaction,
)
from kazoo.security import OPEN_ACL_UNSAFE

from zkstore.client import ZkClient
from zkstore.errors import ControllerMovedError, ZkMetadataWriteError, ZNodeTooLargeError
from zkstore.znodes import ControllerEpochZNode

log = structlog.get_logger("zkstore.fenced_writer")

JUTE_MAXBUFFER = 0xFFFFF
"""ZooKeeper's default jute.maxbuffer: the largest request body (bytes after the length)."""
_REQUEST_HEADER_BYTES = 8  # xid + op type
_MULTI_HEADER_BYTES = len(MultiHeader(-1, True, -1).serialize())
DEFAULT_MAX_IN_FLIGHT = 8


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1
    """Expected znode version (compare-and-set); -1 for any."""


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


ZkOp = CreateOp | SetDataOp | DeleteOp | CheckOp


def _kazoo_op(op: ZkOp, chroot: str) -> Create | SetData | Delete | CheckVersion:
    path = chroot + op.path if chroot else op.path
    match op:
        case CreateOp():
            return Create(path, op.data, OPEN_ACL_UNSAFE, 2 if op.sequential else 0)
        case SetDataOp():
            return SetData(path, op.data, op.version)
        case DeleteOp():
            return Delete(path, op.version)
        case CheckOp():
            return CheckVersion(path, op.version)
    raise TypeError(f"not a ZooKeeper op: {op!r}")


def op_size(op: ZkOp, chroot: str = "") -> int:
    """Bytes this op adds to a multi request (its multi header included)."""
    return _MULTI_HEADER_BYTES + len(_kazoo_op(op, chroot).serialize())


def request_size(ops: Sequence[ZkOp], chroot: str = "") -> int:
    """The request body size ZooKeeper compares with jute.maxbuffer for one multi of `ops`."""
    body = Transaction([_kazoo_op(op, chroot) for op in ops]).serialize()
    return _REQUEST_HEADER_BYTES + len(body)


def epoch_check(epoch_zk_version: int) -> CheckOp:
    return CheckOp(ControllerEpochZNode.PATH, epoch_zk_version)


def split_ops(
    ops: Sequence[ZkOp],
    check: CheckOp,
    *,
    max_request_bytes: int = JUTE_MAXBUFFER,
    chroot: str = "",
) -> list[list[ZkOp]]:
    """Pack `ops`, in order, into multi-ops that each start with `check` and each stay within
    `max_request_bytes`. Raises ZNodeTooLargeError if one op cannot fit even alone."""
    base = _REQUEST_HEADER_BYTES + _MULTI_HEADER_BYTES + op_size(check, chroot)
    if base >= max_request_bytes:
        raise ValueError(f"max_request_bytes {max_request_bytes} leaves no room for any op")
    chunks: list[list[ZkOp]] = []
    current: list[ZkOp] = []
    size = base
    for op in ops:
        cost = op_size(op, chroot)
        if base + cost > max_request_bytes:
            raise ZNodeTooLargeError(
                f"writing {op.path} needs {base + cost} bytes in one ZooKeeper request, more "
                f"than jute.maxbuffer ({max_request_bytes} bytes)"
            )
        if size + cost > max_request_bytes:
            chunks.append([check, *current])
            current, size = [], base
        current.append(op)
        size += cost
    if current:
        chunks.append([check, *current])
    return chunks


@dataclass(frozen=True, slots=True)
class WriteResult:
    multi_ops: int
    """How many multi-ops the change took."""
    created_paths: tuple[str, ...]
    """Real paths of created znodes, in op order (sequential ones carry their number)."""


def _failure(results: list[object], chunk: Sequence[ZkOp]) -> tuple[ZkOp, Exception] | None:
    """The op that made a multi fail (the others are RolledBack / RuntimeInconsistency)."""
    for op, result in zip(chunk, results, strict=False):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return op, result
    return None


class FencedWriter:
    """Writes op lists as fenced multi-ops for the controller elected with `epoch_zk_version`."""

    def __init__(
        self,
        zk: ZkClient,
        epoch_zk_version: int,
        *,
        max_request_bytes: int = JUTE_MAXBUFFER,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        self._zk = zk
        self.epoch_zk_version = epoch_zk_version
        self.max_request_bytes = max_request_bytes
        self.max_in_flight = max_in_flight

    def plan(self, ops: Sequence[ZkOp]) -> list[list[ZkOp]]:
        chroot = self._zk.kazoo.chroot or ""
        return split_ops(
            ops,
            epoch_check(self.epoch_zk_version),
            max_request_bytes=self.max_request_bytes,
            chroot=chroot,
        )

    async def write(self, ops: Sequence[ZkOp]) -> WriteResult:
        """Apply `ops` in order. Raises ControllerMovedError when fenced, ZkMetadataWriteError
        for any other failure (`.partial`: some multi-ops were applied)."""
        if not ops:
            return WriteResult(0, ())
        chunks = self.plan(ops)
        outcomes: list[list[object] | BaseException | None] = [None] * len(chunks)
        limiter = trio.Semaphore(self.max_in_flight)
        kz = self._zk.kazoo

        async def finish(index: int, async_result: object) -> None:
            try:
                outcomes[index] = await self._zk.wait(async_result)
            except KazooException as exc:
                outcomes[index] = exc
            finally:
                limiter.release()

        async with trio.open_nursery() as nursery:
            for index, chunk in enumerate(chunks):
                await limiter.acquire()
                tx = kz.transaction()
                for op in chunk:
                    _add(tx, op)
                # Issued here, in order, from this one task: the session's FIFO order is the
                # chunk order whatever order the answers come back in.
                nursery.start_soon(finish, index, tx.commit_async())
        return self._check(chunks, outcomes)

    def _check(
        self, chunks: list[list[ZkOp]], outcomes: list[list[object] | BaseException | None]
    ) -> WriteResult:
        applied = 0
        fenced: str | None = None
        problem: str | None = None
        created: list[str] = []
        for chunk, outcome in zip(chunks, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                problem = problem or f"ZooKeeper request failed: {outcome!r} (outcome unknown)"
                continue
            assert outcome is not None
            failure = _failure(outcome, chunk)
            if failure is None:
                applied += 1
                created.extend(r for r in outcome if isinstance(r, str))
                continue
            op, exc = failure
            if op is chunk[0] and isinstance(exc, BadVersionError | NoNodeError):
                fenced = (
                    f"controller fenced: {ControllerEpochZNode.PATH} is no longer at version "
                    f"{self.epoch_zk_version} (another controller was elected)"
                )
            else:
                problem = problem or f"{type(op).__name__} {op.path} failed: {type(exc).__name__}"
        partial = applied > 0 and applied < len(chunks)
        if fenced is not None:
            log.warning("zombie controller write refused", epoch_zk_version=self.epoch_zk_version)
            raise ControllerMovedError(
                fenced + (" (earlier parts were applied)" if partial else "")
            )
        if problem is not None:
            raise ZkMetadataWriteError(
                problem + f" ({applied} of {len(chunks)} multi-ops applied)", partial=applied > 0
            )
        return WriteResult(len(chunks), tuple(created))


def _add(tx: object, op: ZkOp) -> None:
    match op:
        case CreateOp():
            tx.create(op.path, op.data, sequence=op.sequential)  # type: ignore[attr-defined]
        case SetDataOp():
            tx.set_data(op.path, op.data, op.version)  # type: ignore[attr-defined]
        case DeleteOp():
            tx.delete(op.path, op.version)  # type: ignore[attr-defined]
        case CheckOp():
            tx.check(op.path, op.version)  # type: ignore[attr-defined]


__all__ = [
    "JUTE_MAXBUFFER",
    "CheckOp",
    "CreateOp",
    "DeleteOp",
    "FencedWriter",
    "SetDataOp",
    "WriteResult",
    "ZkOp",
    "epoch_check",
    "op_size",
    "request_size",
    "split_ops",
]
