"""The trioka data source's option parsing and offset-range planning (pure)."""

from __future__ import annotations

import pytest

from analytics.source_options import (
    DEFAULT_POLL_TIMEOUT_MS,
    OffsetRange,
    PartitionBounds,
    SourceOptionError,
    parse_offset_spec,
    parse_options,
    plan_ranges,
    rate_limit,
    resolve,
)
from protocol.names import TopicPartition

BOUNDS = {
    TopicPartition("a", 0): PartitionBounds(0, 100),
    TopicPartition("a", 1): PartitionBounds(40, 50),
    TopicPartition("b", 0): PartitionBounds(0, 0),
}


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = parse_options({"bootstrap.servers": "h:1", "topic": "a"}, streaming=False)
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.fail_on_data_loss and batch.poll_timeout_ms == DEFAULT_POLL_TIMEOUT_MS
    streaming = parse_options({"bootstrap.servers": "h:1", "topic": "a"}, streaming=True)
    assert streaming.starting == "latest" and streaming.max_offsets_per_trigger is None


def test_option_names_are_case_insensitive_and_sparks_aliases_work() -> None:
    o = parse_options(
        {"kafka.bootstrap.servers": "h:1,h:2", "subscribe": "a, b,a", "STARTINGOFFSETS": "Latest",
         "maxOffsetsPerTrigger": "10", "failOnDataLoss": "False",
         "kafka.request.timeout.ms": "5000"},
        streaming=True,
    )  # fmt: skip
    assert o.bootstrap_servers == "h:1,h:2" and o.topics == ("a", "b")
    assert o.starting == "latest" and o.max_offsets_per_trigger == 10
    assert not o.fail_on_data_loss
    config = o.consumer_config()
    assert config["request.timeout.ms"] == "5000" and config["group.id"] == ""
    assert config["auto.offset.reset"] == "none" and config["allow.auto.create.topics"] is False


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"topic": "a"}, False, "bootstrap.servers is required"),
        ({"bootstrap.servers": "h:1"}, False, "option topic is required"),
        ({"bootstrap.servers": "h:1", "topic": "bad/name"}, False, "option topic: .*illegal"),
        ({"bootstrap.servers": "h:1", "topic": "a", "startingOffsets": "latest"}, False,
         "latest .* not allowed in a batch read"),
        ({"bootstrap.servers": "h:1", "topic": "a", "endingOffsets": '{"a": {"0": -2}}'}, False,
         "earliest .* not allowed in a batch read"),
        ({"bootstrap.servers": "h:1", "topic": "a", "endingOffsets": "latest"}, True,
         "endingOffsets is for batch reads only"),
        ({"bootstrap.servers": "h:1", "topic": "a", "maxOffsetsPerTrigger": "0"}, True,
         "maxOffsetsPerTrigger: must be > 0"),
        ({"bootstrap.servers": "h:1", "topic": "a", "maxOffsetsPerTrigger": "x"}, True,
         "maxOffsetsPerTrigger: 'x' is not an integer"),
        ({"bootstrap.servers": "h:1", "topic": "a", "failOnDataLoss": "yes"}, False,
         "failOnDataLoss: 'yes' is not true or false"),
        ({"bootstrap.servers": "h:1", "topic": "a", "kafka.group.id": "g"}, False,
         "sets group.id itself"),
    ],
)  # fmt: skip
def test_bad_options_name_the_problem(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(SourceOptionError, match=message):
        parse_options(options, streaming=streaming)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("soon", "is not \"earliest\", \"latest\" or JSON"),
        ("[1]", "expected a JSON object"),
        ('{"a": 3}', "topic 'a' must map to an object"),
        ('{"a": {"x": 3}}', "partition 'x' of 'a' is not a number"),
        ('{"a": {"0": -3}}', "offset -3 of a-0 must be an integer >= 0"),
        ('{"a": {"0": 1.5}}', "offset 1.5 of a-0"),
    ],
)  # fmt: skip
def test_bad_offset_json_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(SourceOptionError, match=message):
        parse_offset_spec(text, "startingOffsets")


def test_resolve_replaces_words_and_sentinels() -> None:
    assert resolve("earliest", BOUNDS, "s") == {"a": {"0": 0, "1": 40}, "b": {"0": 0}}
    assert resolve("latest", BOUNDS, "s") == {"a": {"0": 100, "1": 50}, "b": {"0": 0}}
    spec = parse_offset_spec('{"a": {"0": 7, "1": -1}, "b": {"0": -2}}', "s")
    assert resolve(spec, BOUNDS, "s") == {"a": {"0": 7, "1": 50}, "b": {"0": 0}}


def test_json_offsets_must_name_every_partition_and_no_other() -> None:
    with pytest.raises(SourceOptionError, match="missing a-1, b-0; not read or not existing: c-0"):
        resolve(parse_offset_spec('{"a": {"0": 1}, "c": {"0": 1}}', "s"), BOUNDS, "startingOffsets")


def test_plan_makes_one_range_per_partition_with_records() -> None:
    start = {"a": {"0": 10, "1": 40}, "b": {"0": 0}}
    end = {"a": {"0": 100, "1": 45}, "b": {"0": 0}}
    assert plan_ranges(start, end, BOUNDS) == [
        OffsetRange("a", 0, 10, 100),
        OffsetRange("a", 1, 40, 45),
    ]


def test_plan_refuses_deleted_starts_unless_told_and_ends_past_the_high_watermark() -> None:
    start, end = {"a": {"1": 30}}, {"a": {"1": 50}}
    with pytest.raises(SourceOptionError, match=r"offsets 30..39 were deleted .*failOnDataLoss"):
        plan_ranges(start, end, BOUNDS)
    assert plan_ranges(start, end, BOUNDS, fail_on_data_loss=False) == [OffsetRange("a", 1, 40, 50)]
    with pytest.raises(SourceOptionError, match=r"ending offset 51 is past .* high watermark 50"):
        plan_ranges({"a": {"1": 40}}, {"a": {"1": 51}}, BOUNDS)
    with pytest.raises(SourceOptionError, match="starting offset 45 is after ending offset 42"):
        plan_ranges({"a": {"1": 45}}, {"a": {"1": 42}}, BOUNDS)


def test_plan_starts_new_partitions_at_their_beginning() -> None:
    # streaming: a partition added after the start offsets were taken
    assert plan_ranges({"a": {"0": 5}}, {"a": {"0": 6, "1": 3}}) == [
        OffsetRange("a", 0, 5, 6), OffsetRange("a", 1, 0, 3)
    ]  # fmt: skip


def test_rate_limit_splits_in_proportion_to_backlog() -> None:
    start = {"a": {"0": 0, "1": 100}, "b": {"0": 10}}
    latest = {"a": {"0": 300, "1": 200}, "b": {"0": 10}}
    assert rate_limit(start, latest, 1000) == latest  # everything fits
    limited = rate_limit(start, latest, 40)
    assert limited == {"a": {"0": 30, "1": 110}, "b": {"0": 10}}
    # a small backlog still moves by one record
    assert rate_limit({"a": {"0": 0, "1": 0}}, {"a": {"0": 1000, "1": 1}}, 10) == {
        "a": {"0": 9, "1": 1}
    }
