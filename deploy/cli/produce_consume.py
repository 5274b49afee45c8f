"""`trioka produce` and `trioka consume`: stdin lines to records and records to stdout lines,
in the manner of kafka-console-producer/consumer and kcat."""

from __future__ import annotations

import base64
import json
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

import click
import trio

from client import Admin, Consumer, Producer, TopicPartition
from client.admin import TopicDescription
from client.config import (
    ADMIN_CONFIGS,
    CONSUMER_CONFIGS,
    PRODUCER_CONFIGS,
    consumer_config,
    producer_config,
)
from client.fetched_records import ConsumerRecord
from deploy.cli.client_config import ACKS, BOOTSTRAP, OptionKey, client_config
from deploy.cli.options import bootstrap_option, parse_key_values, property_option
from protocol.errors import ErrorCode, KafkaError

_READ_CHUNK = 1 << 16


# A topic just created reaches each broker's metadata cache asynchronously (ZK mode's
# UpdateMetadata, Raft brokers' metadata-log fetch), so the broker asked may not know it yet.
# Kafka's producer waits max.block.ms (60 s) for it; a few seconds covers propagation and
# still fails a typo quickly.
_UNKNOWN_TOPIC_GRACE_S = 5.0


class _TopicDescriber(Protocol):
    async def describe_topics(self, names: list[str]) -> list[TopicDescription]: ...


async def describe_topic_with_grace(
    admin: _TopicDescriber, topic: str, *, grace_s: float, backoff_s: float
) -> TopicDescription:
    """`topic`'s description, asking again while it is unknown, for up to `grace_s`."""
    deadline = trio.current_time() + grace_s
    while True:
        try:
            (description,) = await admin.describe_topics([topic])
            return description
        except KafkaError as error:
            unknown = error.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if not unknown or trio.current_time() + backoff_s > deadline:
                raise
        await trio.sleep(backoff_s)


async def topic_partitions(bootstrap: str, topic: str, props: dict[str, Any]) -> int:
    """Partition count of `topic`; a clear error within a few seconds when it does not exist
    (rather than the clients' wait for metadata up to max.block.ms)."""
    admin_props = {k: v for k, v in props.items() if k in _ADMIN_KEYS}
    backoff_s = int(props.get("retry.backoff.ms", 100)) / 1000
    async with Admin(admin_props, bootstrap_servers=bootstrap) as admin:
        description = await describe_topic_with_grace(
            admin, topic, grace_s=_UNKNOWN_TOPIC_GRACE_S, backoff_s=backoff_s
        )
    return len(description.partitions)


COMPRESSION = OptionKey("compression", "compression.type", "--compression")
GROUP = OptionKey("group_id", "group.id", "--group")
FROM_BEGINNING = OptionKey("from_beginning", "auto.offset.reset", "--from-beginning", is_flag=True)

_ADMIN_KEYS = frozenset(ADMIN_CONFIGS.defs) - {"bootstrap.servers"}
"""The -X keys the topic lookup's Admin takes too: every setting the clients share (timeouts,
backoffs, security.protocol and the ssl.* ones)."""


def _fail(message: str) -> None:
    from deploy.cli.common import CliError

    raise CliError(message)


# -- produce -----------------------------------------------------------------------------------


@click.command()
@click.argument("topic")
@bootstrap_option
@click.option(
    "--file",
    "-f",
    "source",
    type=click.File("rb"),
    default="-",
    help="Read records from this file instead of stdin, one per line.",
)
@click.option(
    "--key-separator",
    "-K",
    default=None,
    metavar="SEP",
    help="Split each line at the first SEP into key and value.",
)
@click.option(
    "--acks",
    type=click.Choice(["all", "-1", "0", "1"]),
    default="all",
    show_default=True,
    help="Acknowledgements the producer waits for (acks; -X acks=... wins over the default).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["raw", "json"]),
    default="raw",
    show_default=True,
    help="json: each value must be a JSON document (sent compact).",
)
@click.option(
    "--partition",
    "-p",
    type=int,
    default=None,
    help="Send every record to this partition (default: by key, or sticky).",
)
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="Header added to every record (repeatable).",
)
@click.option(
    "--compression",
    type=click.Choice(["none", "lz4", "zstd"]),
    default="none",
    show_default=True,
    help="compression.type (-X compression.type=... wins over the default).",
)
@property_option
def produce(topic: str, bootstrap_server: str, source: IO[bytes], key_separator: str | None,
            acks: str, fmt: str, partition: int | None, headers: tuple[str, ...],
            compression: str, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Produce lines of stdin (or --file) to TOPIC, one record per line."""
    from deploy.cli.common import run

    config = client_config(
        properties,
        PRODUCER_CONFIGS,
        {BOOTSTRAP: bootstrap_server, ACKS: acks, COMPRESSION: compression},
        check=_producer_check,
    )
    record_headers = tuple(
        (k, v.encode()) for k, v in parse_key_values(headers, "--header").items()
    )
    sep = key_separator.encode() if key_separator else None
    if key_separator == "":
        raise click.UsageError("--key-separator must not be empty")
    stats = run(_produce, topic, source, sep, fmt, partition, record_headers, config)
    sent, failed, first_error = stats
    click.echo(f"Produced {sent} record{'s' if sent != 1 else ''} to {topic}.", err=True)
    if failed:
        _fail(f"{failed} record(s) failed; first error: {first_error}")


def _producer_check(config: dict[str, str]) -> None:
    """client.config's checks across keys (acks and enable.idempotence, ...), before any
    connection; a client.id so that the producer made later keeps Kafka's producer-1."""
    producer_config({**config, "client.id": config.get("client.id") or "check"})


def _consumer_check(config: dict[str, str]) -> None:
    consumer_config({**config, "client.id": config.get("client.id") or "check"})


async def _produce(
    topic: str,
    source: IO[bytes],
    sep: bytes | None,
    fmt: str,
    partition: int | None,
    headers: tuple[tuple[str, bytes], ...],
    config: dict[str, Any],
) -> tuple[int, int, str]:
    count = await topic_partitions(config["bootstrap.servers"], topic, config)
    if partition is not None and not 0 <= partition < count:
        _fail(f"partition {partition} does not exist: topic {topic!r} has {count} partition(s)")
    sent = failed = 0
    first_error = ""

    def done(future: Any) -> None:
        nonlocal failed, first_error
        error = future.exception()
        if error is not None:
            failed += 1
            first_error = first_error or str(error)

    async with Producer(config) as producer:
        line_no = 0
        async for line in _lines(source):
            line_no += 1
            key: bytes | None = None
            value = line
            if sep is not None:
                key_part, found, rest = line.partition(sep)
                if not found:
                    _fail(f"line {line_no} has no key separator {sep.decode()!r}")
                key, value = key_part, rest
            if fmt == "json":
                if not value.strip():
                    continue
                try:
                    value = json.dumps(json.loads(value), separators=(",", ":")).encode()
                except ValueError as exc:
                    _fail(f"line {line_no} is not valid JSON: {exc}")
            future = await producer.send(topic, value, key, partition=partition, headers=headers)
            future.add_done_callback(done)
            sent += 1
        await producer.flush()
    return sent - failed, failed, first_error


async def _lines(source: IO[bytes]) -> Any:
    """Lines without their newline; reads in a worker thread so trio keeps sending meanwhile."""
    pending = b""
    read = getattr(source, "read1", source.read)
    while True:
        chunk = await trio.to_thread.run_sync(read, _READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending:
        yield pending


# -- consume -----------------------------------------------------------------------------------


@click.command()
@click.argument("topic")
@bootstrap_option
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start at the earliest offset (with --group: where the group has no commit); "
    "auto.offset.reset=earliest. Without it, -X auto.offset.reset=... picks the start.",
)
@click.option(
    "--group",
    "group_id",
    default=None,
    help="Consume as a member of this consumer group: share the partitions with its other "
    "members, start at its committed offsets (else latest, or the beginning with "
    "--from-beginning) and commit as it goes. -X group.id=... does the same.",
)
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=1),
    default=None,
    help="Exit when no record arrived for this long.",
)
@click.option(
    "--offset",
    "-o",
    default=None,
    metavar="OFFSET",
    help="Start at: earliest, latest, an offset, or -N (N records before the end).",
)
@click.option(
    "--partition",
    "-p",
    "partitions",
    type=int,
    multiple=True,
    help="Read only this partition (repeatable; default: all).",
)
@click.option(
    "--max-messages",
    "-c",
    type=click.IntRange(min=1),
    default=None,
    help="Exit after this many records.",
)
@click.option(
    "--follow",
    "-F",
    is_flag=True,
    help="Keep waiting for new records instead of exiting when caught up.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["raw", "json"]),
    default="raw",
    show_default=True,
    help="raw: values, one a line; json: one object a line with topic, partition, "
    "offset, timestamp, key, value, headers.",
)
@click.option("--print-key", is_flag=True, help="raw format: print KEY<separator>VALUE.")
@click.option(
    "--key-separator", default="\t", show_default="tab", help="Separator for --print-key."
)
@property_option
def consume(topic: str, bootstrap_server: str, from_beginning: bool, group_id: str | None,
            timeout_ms: int | None, offset: str | None, partitions: tuple[int, ...],
            max_messages: int | None, follow: bool, fmt: str, print_key: bool,
            key_separator: str, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Print records of TOPIC to stdout; exits once caught up with the end (unless --follow)."""
    from deploy.cli.common import run

    if from_beginning and offset is not None:
        raise click.UsageError("use either --from-beginning or --offset, not both")
    props = client_config(
        properties,
        CONSUMER_CONFIGS,
        {
            BOOTSTRAP: bootstrap_server,
            GROUP: group_id,
            FROM_BEGINNING: "earliest" if from_beginning else None,
        },
        check=_consumer_check,
    )
    bootstrap_server = props["bootstrap.servers"]
    group_id = props.get("group.id") or None
    if group_id is not None and (offset is not None or partitions):
        # as kafka-console-consumer: a group member's partitions come from the group
        raise click.UsageError(
            "--group (or -X group.id) cannot be used with --offset or --partition"
        )
    writer = RecordWriter(sys.stdout.buffer, fmt, print_key, key_separator.encode())
    if group_id is not None:
        group_run = GroupRun(group_id, max_messages, follow, timeout_ms)
        total = run(_consume_group, bootstrap_server, topic, group_run, writer, props)
        click.echo(f"Processed a total of {total} message{'s' if total != 1 else ''}.", err=True)
        return
    start = offset or props.get("auto.offset.reset") or "latest"
    if start == "none":
        raise click.UsageError(
            "auto.offset.reset=none: give --offset or --from-beginning (without --group "
            "there is no committed offset to start at)"
        )
    if start not in ("earliest", "latest"):
        try:
            int(start)
        except ValueError:
            raise click.UsageError(
                f"--offset {start!r} is not earliest, latest, an offset or -N"
            ) from None
    total = run(_consume, bootstrap_server, topic, start, partitions, max_messages, follow,
                writer, props, timeout_ms)  # fmt: skip
    click.echo(f"Processed a total of {total} message{'s' if total != 1 else ''}.", err=True)


class RecordWriter:
    def __init__(self, out: IO[bytes], fmt: str, print_key: bool, key_separator: bytes) -> None:
        self.out = out
        self.fmt = fmt
        self.print_key = print_key
        self.key_separator = key_separator

    def write(self, records: Sequence[ConsumerRecord]) -> None:
        out = self.out
        if self.fmt == "json":
            out.write(b"".join(json.dumps(_as_json(r)).encode() + b"\n" for r in records))
        elif self.print_key:
            sep = self.key_separator
            out.write(b"".join((r.key or b"") + sep + (r.value or b"") + b"\n" for r in records))
        else:
            out.write(b"".join((r.value or b"") + b"\n" for r in records))
        out.flush()


def _text(data: bytes | None) -> tuple[str | None, bool]:
    if data is None:
        return None, True
    try:
        return data.decode(), True
    except UnicodeDecodeError:
        return base64.b64encode(data).decode(), False


def _as_json(r: ConsumerRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
    }
    for name, data in (("key", r.key), ("value", r.value)):
        text, plain = _text(data)
        out[name if plain else f"{name}_base64"] = text
    if r.headers:
        out["headers"] = {k: _text(v)[0] for k, v in r.headers}
    return out


async def _consume(
    bootstrap: str,
    topic: str,
    start: str,
    partitions: tuple[int, ...],
    max_messages: int | None,
    follow: bool,
    writer: RecordWriter,
    props: dict[str, Any],
    timeout_ms: int | None = None,
) -> int:
    count = await topic_partitions(bootstrap, topic, props)
    for p in partitions:
        if not 0 <= p < count:
            _fail(f"partition {p} does not exist: topic {topic!r} has {count} partition(s)")
    tps = [TopicPartition(topic, p) for p in (sorted(set(partitions)) or range(count))]
    config = {"auto.offset.reset": "earliest", **props, "bootstrap.servers": bootstrap}
    total = 0
    async with Consumer(config) as consumer:
        consumer.assign(tps)
        if start == "earliest":
            consumer.seek_to_beginning()
        elif start == "latest":
            consumer.seek_to_end()
        else:
            n = int(start)
            if n >= 0:
                for tp in tps:
                    consumer.seek(tp, n)
            else:
                begin = await consumer.beginning_offsets(tps)
                end = await consumer.end_offsets(tps)
                for tp in tps:
                    consumer.seek(tp, max(begin[tp], end[tp] + n))
        end_offsets = {} if follow else await consumer.end_offsets(tps)

        async def caught_up() -> bool:
            for tp in tps:
                if await consumer.position(tp) < end_offsets[tp]:
                    return False
            return True

        idle = _IdleTimer(timeout_ms)
        while True:
            if not follow and await caught_up():
                break
            limit = None if max_messages is None else max_messages - total
            records = await consumer.poll(1000, max_records=limit)
            if records:
                writer.write(records)
                total += len(records)
            if max_messages is not None and total >= max_messages:
                break
            if idle.expired(bool(records)):
                break
    return total


class _IdleTimer:
    """--timeout-ms: exit when no record arrived for that long."""

    def __init__(self, timeout_ms: int | None) -> None:
        self.timeout_s = None if timeout_ms is None else timeout_ms / 1000
        self.last = trio.current_time()

    def expired(self, got_records: bool) -> bool:
        now = trio.current_time()
        if got_records:
            self.last = now
        return self.timeout_s is not None and now - self.last >= self.timeout_s


@dataclass(frozen=True, slots=True)
class GroupRun:
    group_id: str
    max_messages: int | None
    follow: bool
    timeout_ms: int | None


async def _consume_group(
    bootstrap: str, topic: str, spec: GroupRun, writer: RecordWriter, props: dict[str, Any]
) -> int:
    """kafka-console-consumer --group: subscribe, print, commit (auto-commit, and on close).
    Without --follow it exits once its partitions are caught up with their ends as of when
    they were assigned."""
    await topic_partitions(bootstrap, topic, props)
    config = {  # props holds --from-beginning's auto.offset.reset, else -X's
        "auto.offset.reset": "latest",
        **props,
        "bootstrap.servers": bootstrap,
        "group.id": spec.group_id,
    }
    total = 0
    ends: dict[TopicPartition, int] = {}
    # As kafka-console-consumer's shutdown hook: SIGINT/SIGTERM end the loop, then close()
    # commits and leaves the group (a KeyboardInterrupt could land in any task instead).
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with Consumer(config) as consumer, trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_signal, signals, nursery.cancel_scope)
            consumer.subscribe([topic])
            idle = _IdleTimer(spec.timeout_ms)
            while True:
                limit = None if spec.max_messages is None else spec.max_messages - total
                records = await consumer.poll(1000, max_records=limit)
                if records:
                    writer.write(records)
                    total += len(records)
                if spec.max_messages is not None and total >= spec.max_messages:
                    break
                if idle.expired(bool(records)):
                    break
                if not spec.follow and await _caught_up(consumer, ends):
                    break
            nursery.cancel_scope.cancel()
    return total


async def _cancel_on_signal(signals: Any, scope: trio.CancelScope) -> None:
    async for _ in signals:
        scope.cancel()
        return


async def _caught_up(consumer: Consumer, ends: dict[TopicPartition, int]) -> bool:
    assigned = consumer.assignment()
    if not assigned:
        return False
    new = [tp for tp in assigned if tp not in ends]
    if new:
        ends.update(await consumer.end_offsets(new))
    for tp in assigned:
        if await consumer.position(tp) < ends[tp]:
            return False
    return True
