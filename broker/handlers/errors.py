"""The error code and message of an exception raised while serving one partition: the data-path
APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch) answer it in that partition's entry
instead of failing the whole request."""

from __future__ import annotations

from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError


def partition_error(exc: BaseException) -> tuple[int, str]:
    """(error code, message) for an exception raised while serving one partition."""
    if isinstance(exc, KafkaError):
        return int(exc.code), exc.message
    if isinstance(exc, CorruptRecordBatchError):
        return int(ErrorCode.CORRUPT_MESSAGE), str(exc)
    if isinstance(exc, OSError):
        return int(ErrorCode.KAFKA_STORAGE_ERROR), f"disk error: {exc}"
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}"
