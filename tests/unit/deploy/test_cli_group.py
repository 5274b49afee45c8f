"""`trioka group reset-offsets`: its parsers and plan (Kafka's clamping to [log start, end])."""

from __future__ import annotations

from typing import Any

import click
import pytest

from client import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from deploy.cli.common import CliError
from deploy.cli.group import PartitionRow, _parse_datetime, _parse_topic, _plan

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Offsets:
    """The three Consumer lookups _plan uses: logs [10, 50) and [0, 5)."""

    async def beginning_offsets(self, tps: Any) -> dict[TopicPartition, int]:
        return {A: 10, B: 0}

    async def end_offsets(self, tps: Any) -> dict[TopicPartition, int]:
        return {A: 50, B: 5}

    async def offsets_for_times(self, ts: Any) -> dict[TopicPartition, Any]:
        return {A: OffsetAndTimestamp(20, 1), B: None}


async def plan(how: str, amount: int | None = None, **kw: Any) -> dict[TopicPartition, int]:
    committed = kw.get("committed", {A: OffsetAndMetadata(30), B: OffsetAndMetadata(4)})
    return await _plan(Offsets(), [A, B], committed, how, amount, kw.get("ts"))  # type: ignore[arg-type]


async def test_every_strategy_stays_within_the_log() -> None:
    assert await plan("earliest") == {A: 10, B: 0}
    assert await plan("latest") == {A: 50, B: 5}
    assert await plan("offset", 7) == {A: 10, B: 5}  # below start -> start, above end -> end
    assert await plan("shift", 3) == {A: 33, B: 5}
    assert await plan("shift", -100) == {A: 10, B: 0}
    assert await plan("datetime", ts=0) == {A: 20, B: 5}  # no record that late: the end


async def test_shift_without_a_commit_is_refused_by_name() -> None:
    with pytest.raises(CliError, match="no committed offset"):
        await plan("shift", 1, committed={A: OffsetAndMetadata(30)})


def test_topic_and_datetime_parsing() -> None:
    assert _parse_topic("t") == ("t", None)
    assert _parse_topic("t:2,0,2") == ("t", [0, 2])
    with pytest.raises(click.UsageError, match="partitions must be numbers"):
        _parse_topic("t:x")
    assert _parse_datetime("1970-01-01T00:00:01Z") == 1000
    assert _parse_datetime("1970-01-01T00:00:01") == 1000  # no zone: UTC
    with pytest.raises(click.UsageError, match="not an ISO 8601"):
        _parse_datetime("yesterday")


def test_lag_is_end_minus_committed_and_unknown_without_either() -> None:
    assert PartitionRow("t", 0, 3, 10).lag == 7
    assert PartitionRow("t", 0, None, 10).lag is None
    assert PartitionRow("t", 0, 12, 10).lag == 0
