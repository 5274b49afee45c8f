"""The `trioka` data source's options and offset-range planning (pure: no I/O, no Spark).

Options follow Spark's Kafka source (structured-streaming-kafka-integration):

- `bootstrap.servers` (or Spark's `kafka.bootstrap.servers`): host:port[,host:port...];
- `topic` (or Spark's `subscribe`): one topic or a comma-separated list;
- `startingOffsets`: "earliest", "latest" or JSON `{"topic": {"0": 23, "1": -2}}` where -2
  means earliest and -1 latest; default "earliest" for batch and "latest" for streaming, as
  Spark's. With JSON every partition of every topic must be named (Spark's rule too).
- `endingOffsets` (batch only): "latest" (default) or JSON (-1 latest; -2 is refused);
- `maxOffsetsPerTrigger` (streaming): records per micro-batch over all partitions, split in
  proportion to each partition's backlog as Spark does;
- `failOnDataLoss` (default true): a range whose start was already deleted (retention) is an
  error; false starts at the log start instead;
- `kafkaConsumer.pollTimeoutMs` (default 120000, Spark's spark.network.timeout): a read that
  makes no progress for this long fails, naming its partition and offsets;
- `kafka.<name>`: any other consumer config, passed through (e.g. `kafka.request.timeout.ms`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.names import TopicPartition, validate_topic_name

EARLIEST = -2
LATEST = -1
"""Spark's sentinels in offset JSON."""

DEFAULT_POLL_TIMEOUT_MS = 120_000

# The consumer configs the reader sets itself (a user's kafka.* may not change them).
_FIXED_CONSUMER_CONFIGS = frozenset(
    {"group.id", "enable.auto.commit", "auto.offset.reset", "allow.auto.create.topics"}
)


class SourceOptionError(ValueError):
    """A bad option of the trioka data source; the message names the option."""


OffsetSpec = str | Mapping[str, Mapping[str, int]]
""""earliest", "latest" or {topic: {partition (a string, as in JSON): offset or sentinel}}."""


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    consumer_overrides: Mapping[str, str] = field(default_factory=dict)

    def consumer_config(self) -> dict[str, Any]:
        """Configs of the consumers that plan and read (by assignment, no group)."""
        return {
            **self.consumer_overrides,
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": "",
            "enable.auto.commit": False,
            "auto.offset.reset": "none",
            "allow.auto.create.topics": False,
        }


def parse_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """SourceOptions from Spark's option map (keys are case-insensitive in Spark)."""
    opts = {k.lower(): v for k, v in options.items()}
    servers = opts.get("bootstrap.servers") or opts.get("kafka.bootstrap.servers")
    if not servers or not servers.strip():
        raise SourceOptionError("option bootstrap.servers is required (host:port[,host:port])")
    topics = _topics(opts.get("topic") or opts.get("subscribe") or "")
    starting = parse_offset_spec(
        opts.get("startingoffsets", "latest" if streaming else "earliest"), "startingOffsets"
    )
    if streaming and "endingoffsets" in opts:
        raise SourceOptionError("option endingOffsets is for batch reads only (as Spark's Kafka)")
    ending = parse_offset_spec(opts.get("endingoffsets", "latest"), "endingOffsets")
    if not streaming:
        _check_batch_bounds(starting, ending)
    return SourceOptions(
        bootstrap_servers=servers.strip(),
        topics=topics,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms",
                                      "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
        consumer_overrides=_consumer_overrides(opts),
    )  # fmt: skip


def _topics(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not names:
        raise SourceOptionError("option topic is required (one name or a comma-separated list)")
    for name in names:
        try:
            validate_topic_name(name)
        except Exception as exc:
            raise SourceOptionError(f"option topic: {exc}") from None
    return names


def parse_offset_spec(text: str, option: str) -> OffsetSpec:
    """ "earliest" | "latest" | JSON {"topic": {"0": 23}} with -2/-1 for earliest/latest."""
    word = text.strip()
    if word.lower() in ("earliest", "latest"):
        return word.lower()
    try:
        parsed = json.loads(word)
    except json.JSONDecodeError:
        raise SourceOptionError(
            f'option {option}: {text!r} is not "earliest", "latest" or JSON like '
            '{"topic": {"0": 23}}'
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise SourceOptionError(
            f'option {option}: expected a JSON object like {{"topic": {{"0": 23}}}}'
        )
    spec: dict[str, dict[str, int]] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise SourceOptionError(
                f"option {option}: topic {topic!r} must map to an object of partition: offset"
            )
        spec[topic] = {}
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise SourceOptionError(
                    f"option {option}: partition {partition!r} of {topic!r} is not a number"
                )
            if type(offset) is not int or offset < EARLIEST:
                raise SourceOptionError(
                    f"option {option}: offset {offset!r} of {topic}-{partition} must be an "
                    "integer >= 0, or -2 (earliest) or -1 (latest)"
                )
            spec[topic][str(int(partition))] = offset
    return spec  # fmt: skip


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark's rules for batch queries: no "latest" start, no "earliest" end."""
    if starting == "latest" or _has(starting, LATEST):
        raise SourceOptionError(
            "option startingOffsets: latest (-1) is not allowed in a batch read"
        )
    if ending == "earliest" or _has(ending, EARLIEST):
        raise SourceOptionError("option endingOffsets: earliest (-2) is not allowed in a batch read")  # fmt: skip


def _has(spec: OffsetSpec, sentinel: int) -> bool:
    return isinstance(spec, Mapping) and any(
        offset == sentinel for parts in spec.values() for offset in parts.values()
    )


def _positive_int(opts: Mapping[str, str], key: str, option: str) -> int | None:
    if key not in opts:
        return None
    try:
        value = int(opts[key])
    except ValueError:
        raise SourceOptionError(f"option {option}: {opts[key]!r} is not an integer") from None
    if value <= 0:
        raise SourceOptionError(f"option {option}: must be > 0, got {value}")
    return value


def _bool(text: str, option: str) -> bool:
    word = str(text).strip().lower()
    if word not in ("true", "false"):
        raise SourceOptionError(f"option {option}: {text!r} is not true or false")
    return word == "true"


def _consumer_overrides(opts: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key.removeprefix("kafka.")
        if name in _FIXED_CONSUMER_CONFIGS:
            raise SourceOptionError(f"option {key}: the trioka source sets {name} itself")
        out[name] = value
    return out


# -- planning -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start, end) of one partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class PartitionBounds:
    """What the cluster has for one partition: [log start offset, high watermark)."""

    earliest: int
    latest: int


Offsets = dict[str, dict[str, int]]
"""Resolved offsets in Spark's Kafka offset JSON shape: {topic: {"0": 23}}."""


def resolve(
    spec: OffsetSpec, bounds: Mapping[TopicPartition, PartitionBounds], option: str
) -> Offsets:
    """Concrete offsets for every partition in `bounds` (sentinels replaced)."""
    out: Offsets = {}
    if isinstance(spec, str):
        for tp, b in bounds.items():
            out.setdefault(tp.topic, {})[str(tp.partition)] = (
                b.earliest if spec == "earliest" else b.latest
            )
        return out
    missing = [str(tp) for tp in bounds if str(tp.partition) not in spec.get(tp.topic, {})]
    unknown = [
        f"{t}-{p}" for t, parts in spec.items() for p in parts
        if TopicPartition(t, int(p)) not in bounds
    ]  # fmt: skip
    if missing or unknown:
        raise SourceOptionError(
            f"option {option}: JSON offsets must name every partition of the topics read"
            + (f"; missing {', '.join(sorted(missing))}" if missing else "")
            + (f"; not read or not existing: {', '.join(sorted(unknown))}" if unknown else "")
        )
    for tp, b in bounds.items():
        offset = spec[tp.topic][str(tp.partition)]
        if offset == EARLIEST:
            offset = b.earliest
        elif offset == LATEST:
            offset = b.latest
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return out


def plan_ranges(
    start: Offsets,
    end: Offsets,
    bounds: Mapping[TopicPartition, PartitionBounds] | None = None,
    *,
    fail_on_data_loss: bool = True,
) -> list[OffsetRange]:
    """One OffsetRange per partition with records between `start` and `end` (sorted).

    With `bounds`, a start below the log start offset is data loss (an error, or moved up to
    the log start when `fail_on_data_loss` is false) and an end above the high watermark is
    an error: those records do not exist (yet)."""
    ranges = []
    for topic, parts in sorted(end.items()):
        for key, until in sorted(parts.items(), key=lambda kv: int(kv[0])):
            tp = TopicPartition(topic, int(key))
            # a partition that appeared after `start` was taken starts at its beginning
            begin = start.get(topic, {}).get(key)
            b = None if bounds is None else bounds.get(tp)
            if begin is None:
                begin = 0 if b is None else b.earliest
            if b is not None:
                begin, until = _check_bounds(tp, begin, until, b, fail_on_data_loss)
            if begin > until:
                raise SourceOptionError(
                    f"{tp}: starting offset {begin} is after ending offset {until}"
                )
            if until > begin:
                ranges.append(OffsetRange(topic, tp.partition, begin, until))
    return ranges


def _check_bounds(
    tp: TopicPartition, begin: int, until: int, b: PartitionBounds, fail_on_data_loss: bool
) -> tuple[int, int]:
    if until > b.latest:
        raise SourceOptionError(
            f"{tp}: ending offset {until} is past the partition's high watermark {b.latest}"
        )
    if begin < b.earliest:
        if fail_on_data_loss:
            raise SourceOptionError(
                f"{tp}: offsets {begin}..{b.earliest - 1} were deleted (log start offset "
                f"{b.earliest}); set failOnDataLoss=false to start at the log start instead"
            )
        begin = min(b.earliest, until)
    return begin, until


def rate_limit(start: Offsets, latest: Offsets, max_records: int) -> Offsets:
    """Spark's maxOffsetsPerTrigger: at most `max_records` over all partitions, each
    partition's share in proportion to its backlog (at least one record if it has any)."""
    backlog = {
        (t, p): until - start.get(t, {}).get(p, 0)
        for t, parts in latest.items()
        for p, until in parts.items()
    }
    total = sum(n for n in backlog.values() if n > 0)
    if total <= max_records:
        return {t: dict(parts) for t, parts in latest.items()}
    out: Offsets = {}
    for (t, p), n in sorted(backlog.items()):
        begin = latest[t][p] - n
        take = 0 if n <= 0 else max(1, int(n * max_records / total))
        out.setdefault(t, {})[p] = begin + min(n, take) if n > 0 else latest[t][p]
    return out


def offsets_of(ranges: Sequence[OffsetRange]) -> Offsets:
    out: Offsets = {}
    for r in ranges:
        out.setdefault(r.topic, {})[str(r.partition)] = r.end
    return out
