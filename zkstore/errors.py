"""Errors zkstore raises on purpose (the callers never see kazoo's exception types for these)."""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError, TriokaError


class ControllerMovedError(KafkaError):
    """A controller write was fenced: /controller_epoch is no longer at the version this
    controller created it with (another broker was elected since), or the election lost a race.
    Nothing of the fenced multi-op was applied. Kafka's ControllerMovedException."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, message)


class ZkMetadataWriteError(KafkaError):
    """A controller write failed for a reason other than fencing (a znode not as expected, the
    connection lost mid-write). `partial` is True when some multi-ops of the change were
    applied: the metadata log then refuses further appends until a new controller reloads."""

    def __init__(self, message: str, *, partial: bool) -> None:
        super().__init__(
            ErrorCode.NOT_CONTROLLER if partial else ErrorCode.UNKNOWN_SERVER_ERROR, message
        )
        self.partial = partial


class ZNodeTooLargeError(KafkaError):
    """One znode write alone exceeds the request size limit (jute.maxbuffer)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.RECORD_LIST_TOO_LARGE, message)


class BrokerIdInUseError(TriokaError):
    """Another live session holds /brokers/ids/<id>: a second broker with the same node.id."""


__all__ = [
    "BrokerIdInUseError",
    "ControllerMovedError",
    "ZNodeTooLargeError",
    "ZkMetadataWriteError",
]
