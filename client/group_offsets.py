"""A group's committed offsets on the wire: OffsetCommit and OffsetFetch requests built from
and read into `OffsetAndMetadata` (pure; shared by the consumer and the Admin client)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.group_offsets import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
)
from protocol.names import TopicPartition

__all__ = [
    "OffsetAndMetadata",
    "commit_errors",
    "commit_request",
    "fetch_request",
    "parse_fetch",
]


class OffsetAndMetadata(NamedTuple):
    """Kafka's OffsetAndMetadata: the next offset to consume, the leader epoch of the record
    before it (None: unknown) and free text."""

    offset: int
    leader_epoch: int | None = None
    metadata: str | None = None


def commit_request(
    group_id: str,
    generation_id: int,
    member_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for tp, om in sorted(offsets.items()):
        topics.setdefault(tp.topic, []).append(
            OffsetCommitPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        topics=tuple(OffsetCommitTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
    )


def commit_errors(
    response: OffsetCommitResponse, asked: Iterable[TopicPartition]
) -> dict[TopicPartition, KafkaError]:
    """The partitions the commit failed for, each with the broker's error. A request-level
    error applies to every partition asked; a partition missing from the answer failed."""
    asked = set(asked)
    if response.error_code:
        code = ErrorCode.from_wire(response.error_code)
        error = KafkaError(code, response.error_message or code.name)
        return dict.fromkeys(asked, error)
    failed: dict[TopicPartition, KafkaError] = {}
    answered: set[TopicPartition] = set()
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            answered.add(tp)
            if p.error_code:
                code = ErrorCode.from_wire(p.error_code)
                failed[tp] = KafkaError(code, p.error_message or code.name)
    for tp in asked - answered:
        failed[tp] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for this partition")
    return failed


def fetch_request(group_id: str, partitions: Iterable[TopicPartition] | None) -> OffsetFetchRequest:
    if partitions is None:
        return OffsetFetchRequest(group_id=group_id, topics=None)
    topics: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return OffsetFetchRequest(
        group_id=group_id,
        topics=tuple(
            OffsetFetchTopic(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items()
        ),
    )


def parse_fetch(
    response: OffsetFetchResponse,
) -> tuple[dict[TopicPartition, OffsetAndMetadata | None], dict[TopicPartition, KafkaError]]:
    """(committed offsets, None where the group committed none; per-partition errors). The
    caller handles the group-level error_code first."""
    found: dict[TopicPartition, OffsetAndMetadata | None] = {}
    errors: dict[TopicPartition, KafkaError] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                code = ErrorCode.from_wire(p.error_code)
                errors[tp] = KafkaError(code, p.error_message or code.name)
            elif p.committed_offset < 0:
                found[tp] = None
            else:
                epoch = p.committed_leader_epoch
                found[tp] = OffsetAndMetadata(
                    p.committed_offset, None if epoch < 0 else epoch, p.metadata
                )
    return found, errors
