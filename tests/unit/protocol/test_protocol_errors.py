"""Kafka's error codes, names and retriable flags; the exception hierarchy."""

from __future__ import annotations

import pytest

from protocol.errors import (
    CorruptRecordBatchError,
    ErrorCode,
    FrameTooLargeError,
    KafkaError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TriokaError,
    UnsupportedVersionError,
)


@pytest.mark.parametrize(
    ("name", "number", "retriable"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("NONE", 0, False),
        ("OFFSET_OUT_OF_RANGE", 1, False),
        ("CORRUPT_MESSAGE", 2, True),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ("LEADER_NOT_AVAILABLE", 5, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True),
        ("REQUEST_TIMED_OUT", 7, True),
        ("MESSAGE_TOO_LARGE", 10, False),
        ("NETWORK_EXCEPTION", 13, True),
        ("COORDINATOR_NOT_AVAILABLE", 15, True),
        ("NOT_COORDINATOR", 16, True),
        ("INVALID_TOPIC_EXCEPTION", 17, False),
        ("RECORD_LIST_TOO_LARGE", 18, False),
        ("NOT_ENOUGH_REPLICAS", 19, True),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, True),
        ("INVALID_REQUIRED_ACKS", 21, False),
        ("ILLEGAL_GENERATION", 22, False),
        ("REBALANCE_IN_PROGRESS", 27, False),
        ("UNSUPPORTED_VERSION", 35, False),
        ("TOPIC_ALREADY_EXISTS", 36, False),
        ("INVALID_PARTITIONS", 37, False),
        ("INVALID_REPLICATION_FACTOR", 38, False),
        ("INVALID_CONFIG", 40, False),
        ("NOT_CONTROLLER", 41, True),
        ("INVALID_REQUEST", 42, False),
        ("POLICY_VIOLATION", 44, False),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False),
        ("DUPLICATE_SEQUENCE_NUMBER", 46, False),
        ("INVALID_PRODUCER_EPOCH", 47, False),
        ("KAFKA_STORAGE_ERROR", 56, True),
        ("UNKNOWN_PRODUCER_ID", 59, False),
        ("REASSIGNMENT_IN_PROGRESS", 60, False),
        ("TOPIC_DELETION_DISABLED", 73, False),
        ("FENCED_LEADER_EPOCH", 74, True),
        ("UNKNOWN_LEADER_EPOCH", 75, True),
        ("UNSUPPORTED_COMPRESSION_TYPE", 76, False),
        ("STALE_BROKER_EPOCH", 77, False),
        ("OFFSET_NOT_AVAILABLE", 78, True),
        ("PREFERRED_LEADER_NOT_AVAILABLE", 80, True),
        ("ELIGIBLE_LEADERS_NOT_AVAILABLE", 83, True),
        ("ELECTION_NOT_NEEDED", 84, False),
        ("NO_REASSIGNMENT_IN_PROGRESS", 85, False),
        ("INVALID_RECORD", 87, False),
        ("THROTTLING_QUOTA_EXCEEDED", 89, True),
        ("PRODUCER_FENCED", 90, False),
        ("INCONSISTENT_VOTER_SET", 94, False),
        ("SNAPSHOT_NOT_FOUND", 98, False),
        ("POSITION_OUT_OF_RANGE", 99, False),
        ("UNKNOWN_TOPIC_ID", 100, True),
        ("DUPLICATE_BROKER_REGISTRATION", 101, False),
        ("BROKER_ID_NOT_REGISTERED", 102, False),
        ("INCONSISTENT_TOPIC_ID", 103, True),
        ("INCONSISTENT_CLUSTER_ID", 104, False),
        ("NEW_LEADER_ELECTED", 108, False),
        ("UNKNOWN_CONTROLLER_ID", 116, False),
    ],
)
def test_kafka_numbers_names_and_retriable_flags(name: str, number: int, retriable: bool) -> None:
    code = ErrorCode[name]
    assert int(code) == number
    assert ErrorCode(number) is code
    assert code.retriable is retriable


def test_codes_are_contiguous_from_minus_one() -> None:
    numbers = sorted(int(c) for c in ErrorCode)
    assert numbers == list(range(-1, numbers[-1] + 1))
    assert len({c.name for c in ErrorCode}) == len(numbers)


@pytest.mark.parametrize(
    ("wire", "code"), [(6, ErrorCode.NOT_LEADER_OR_FOLLOWER), (0, ErrorCode.NONE)]
)
def test_from_wire_known(wire: int, code: ErrorCode) -> None:
    assert ErrorCode.from_wire(wire) is code


@pytest.mark.parametrize("wire", [9999, -2, 2**40])
def test_from_wire_unknown_is_unknown_server_error(wire: int) -> None:
    assert ErrorCode.from_wire(wire) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_kafka_error_message_and_retriable() -> None:
    err = KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leader is broker 2")
    assert str(err) == "NOT_LEADER_OR_FOLLOWER: leader is broker 2"
    assert err.message == "leader is broker 2"
    assert err.retriable
    bare = KafkaError(ErrorCode.INVALID_CONFIG)
    assert str(bare) == "INVALID_CONFIG" and bare.message == "INVALID_CONFIG"
    assert not bare.retriable


def test_hierarchy_and_codes() -> None:
    assert issubclass(KafkaError, TriokaError)
    assert issubclass(RemoteProtocolError, ProtocolError)
    assert issubclass(LocalProtocolError, ProtocolError)
    assert issubclass(FrameTooLargeError, RemoteProtocolError)
    assert issubclass(UnsupportedVersionError, RemoteProtocolError)
    assert ProtocolError.code is ErrorCode.INVALID_REQUEST
    assert UnsupportedVersionError.code is ErrorCode.UNSUPPORTED_VERSION
    assert CorruptRecordBatchError.code is ErrorCode.CORRUPT_MESSAGE
    assert not issubclass(CorruptRecordBatchError, ProtocolError)


def test_frame_too_large_names_sizes_and_config() -> None:
    err = FrameTooLargeError(200, 100)
    assert (err.size, err.limit) == (200, 100)
    assert str(err) == (
        "frame of 200 bytes exceeds the limit of 100 bytes (socket.request.max.bytes)"
    )


def test_corrupt_record_batch_error_position() -> None:
    assert str(CorruptRecordBatchError("bad magic")) == "bad magic"
    err = CorruptRecordBatchError("bad magic", position=61)
    assert str(err) == "bad magic (at byte 61)" and err.position == 61


@pytest.mark.parametrize(
    ("name", "retriable"),
    [
        ("NEW_LEADER_ELECTED", False),  # NewLeaderElectedException extends ApiException
        ("CONCURRENT_TRANSACTIONS", True),  # extends RetriableException
        ("BROKER_NOT_AVAILABLE", False),
        ("REPLICA_NOT_AVAILABLE", True),
        ("LISTENER_NOT_FOUND", True),
        ("FETCH_SESSION_TOPIC_ID_ERROR", True),
        ("UNSTABLE_OFFSET_COMMIT", True),
        ("INELIGIBLE_REPLICA", False),
    ],
)
def test_retriable_follows_kafkas_exception_hierarchy(name: str, retriable: bool) -> None:
    assert ErrorCode[name].retriable is retriable
