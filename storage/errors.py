"""Storage errors. Every disk failure reaches callers as a KafkaError they can answer with."""

from __future__ import annotations

import errno
import os

from protocol.errors import ErrorCode, KafkaError, TriokaError


class KafkaStorageError(KafkaError):
    """A disk operation failed (ENOSPC, EIO, ...): Kafka's KAFKA_STORAGE_ERROR.

    The message names the partition, the file and the OS error. A failed append has been rolled
    back, so the log is exactly as it was and accepts writes again once the cause is gone.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        os_error: OSError | None = None,
    ) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)
        self.path = None if path is None else os.fspath(path)
        self.os_error = os_error

    @classmethod
    def from_os_error(cls, what: str, exc: OSError, path: str | None = None) -> KafkaStorageError:
        """`what` says what was being done, e.g. "appending 4096 bytes to partition t-0"."""
        where = path or exc.filename
        name = errno.errorcode.get(exc.errno or 0, "E?")
        reason = exc.strerror or str(exc)
        text = f"{what} failed: {reason} ({name})"
        if where:
            text += f" on {os.fspath(where)}"
        return cls(text, path=where, os_error=exc)


class CorruptLogError(KafkaError):
    """Bytes in a segment that are not a valid batch (a damaged disk, an edited file): Kafka's
    CORRUPT_MESSAGE, which a consumer raises instead of retrying ("Encountered corrupt message
    when fetching offset ..."). The message names the partition, the offset and the file."""

    def __init__(self, message: str, *, path: str | os.PathLike[str]) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)
        self.path = os.fspath(path)


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is not the log end offset (Kafka's
    UnexpectedAppendOffsetException): the replica must truncate or re-fetch first."""

    def __init__(self, message: str, *, first_offset: int, log_end_offset: int) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class InconsistentTopicIdError(KafkaError):
    """partition.metadata holds another topic id than the one the log was opened with."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INCONSISTENT_TOPIC_ID, message)


class MetaPropertiesError(TriokaError):
    """meta.properties is missing a field, unreadable, or disagrees with the configuration."""


class CheckpointError(TriokaError):
    """A checkpoint file that is not in Kafka's format; the message names the file and line."""


class LogClosedError(KafkaError):
    """The log was closed or deleted (for instance by DeleteTopics) while in use."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)
