"""`trioka group list|describe|reset-offsets`, like kafka-consumer-groups.sh."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

import click
from rich.table import Table

from client import Admin, Consumer, GroupDescription, OffsetAndMetadata, TopicPartition
from deploy.cli.options import bootstrap_option, property_option

_INACTIVE = ("Empty", "Dead")


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One line of `group describe`: a partition the group committed or is assigned."""

    topic: str
    partition: int
    current: int | None
    log_end: int | None
    consumer_id: str = "-"
    host: str = "-"
    client_id: str = "-"

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.current)


def _props(properties: tuple[str, ...], bootstrap: str) -> dict[str, Any]:
    """The Admin's configs (-X checked with Kafka's texts), which its Consumer takes too."""
    from deploy.cli.common import admin_props

    return admin_props(bootstrap, properties)


def _does_not_exist(group_id: str) -> NoReturn:
    """kafka-consumer-groups.sh's answer for a group in state Dead (unknown to its
    coordinator), whatever was asked of it."""
    from deploy.cli.common import fail

    fail(f"Consumer group '{group_id}' does not exist.")


@click.group("group")
def group() -> None:
    """List, describe and reset consumer groups (kafka-consumer-groups.sh)."""


# -- list ---------------------------------------------------------------------------------------


@group.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True, help="Only groups in this state (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array on stdout, an object per group: group, state, "
              "protocol_type, coordinator.")  # fmt: skip
@property_option
def list_groups(
    bootstrap_server: str, states: tuple[str, ...], as_json: bool, properties: tuple[str, ...]
) -> None:
    """The groups of the cluster, one a line (with --state: a table with their state)."""
    from deploy.cli.common import emit_json, run, stdout_console

    props = _props(properties, bootstrap_server)

    async def go() -> list[Any]:
        async with Admin(props) as admin:
            return await admin.list_groups(states)

    listings = run(go)
    if as_json:
        emit_json([
            {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type,
             "coordinator": g.coordinator}
            for g in listings
        ])  # fmt: skip
        return
    if not states:
        for g in listings:
            click.echo(g.group_id)
        return
    table = Table("GROUP", "STATE", box=None, pad_edge=False)
    for g in listings:
        table.add_row(g.group_id, g.state)
    stdout_console().print(table)


# -- describe -----------------------------------------------------------------------------------


@group.command("describe")
@click.argument("group_id", metavar="GROUP")
@bootstrap_option
@click.option("--members", is_flag=True, help="The members and how many partitions each has.")
@click.option("--verbose", is_flag=True, help="With --members: each member's partitions.")
@click.option("--state", "show_state", is_flag=True, help="The group's state and coordinator.")
@click.option("--json", "as_json", is_flag=True,
              help="All of it (whatever --members, --state) as one JSON object on stdout: "
              "group, state, coordinator, assignment_strategy, protocol_type, members "
              "(consumer_id, host, client_id, assignment: topic, partition), offsets (topic, "
              "partition, current_offset, log_end_offset, lag, consumer_id, host, client_id; "
              "null: none).")  # fmt: skip
@property_option
def describe(group_id: str, bootstrap_server: str, members: bool, verbose: bool,
             show_state: bool, as_json: bool, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Offsets and lag per partition of GROUP (or --members, --state). A group unknown to its
    coordinator (state Dead) is an error: "Consumer group 'G' does not exist."."""
    from deploy.cli.common import emit_json, run, stdout_console

    props = _props(properties, bootstrap_server)
    with_offsets = as_json or not (members or show_state)
    description, rows = run(_describe, props, group_id, with_offsets)
    if as_json:
        emit_json(_describe_json(description, rows))
        return
    console = stdout_console()
    if show_state:
        table = Table("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS",
                      box=None, pad_edge=False)  # fmt: skip
        table.add_row(group_id, str(description.coordinator), description.assignor or "-",
                      description.state, str(len(description.members)))  # fmt: skip
        console.print(table)
        return
    if not description.members:
        click.echo(f"Consumer group '{group_id}' has no active members.", err=True)
    if members:
        columns = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        table = Table(*columns, *(["ASSIGNMENT"] if verbose else []), box=None, pad_edge=False)
        for m in description.members:
            cells = [group_id, m.member_id, m.host, m.client_id, str(len(m.assignment))]
            if verbose:
                cells.append(", ".join(str(tp) for tp in sorted(m.assignment)) or "-")
            table.add_row(*cells)
        console.print(table)
        return
    table = Table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID", box=None, pad_edge=False)  # fmt: skip
    for r in rows:
        table.add_row(group_id, r.topic, str(r.partition), _num(r.current), _num(r.log_end),
                      _num(r.lag), r.consumer_id, r.host, r.client_id)  # fmt: skip
    console.print(table)


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _describe_json(description: GroupDescription, rows: list[PartitionRow]) -> dict[str, Any]:
    def dash(text: str) -> str | None:
        return None if text == "-" else text

    return {
        "group": description.group_id,
        "state": description.state,
        "coordinator": description.coordinator,
        "assignment_strategy": description.assignor or None,
        "protocol_type": description.protocol_type or None,
        "members": [
            {"consumer_id": m.member_id, "host": m.host, "client_id": m.client_id,
             "assignment": [{"topic": tp.topic, "partition": tp.partition}
                            for tp in sorted(m.assignment)]}
            for m in description.members
        ],
        "offsets": [
            {"topic": r.topic, "partition": r.partition, "current_offset": r.current,
             "log_end_offset": r.log_end, "lag": r.lag, "consumer_id": dash(r.consumer_id),
             "host": dash(r.host), "client_id": dash(r.client_id)}
            for r in rows
        ],
    }  # fmt: skip


async def _describe(
    props: dict[str, Any], group_id: str, with_offsets: bool
) -> tuple[GroupDescription, list[PartitionRow]]:
    async with Admin(props) as admin:
        description = (await admin.describe_groups([group_id]))[group_id]
        if description.state == "Dead":
            _does_not_exist(group_id)
        if not with_offsets:
            return description, []
        committed = await admin.list_group_offsets(group_id)
    return description, await partition_rows(props, description, committed)


async def partition_rows(
    props: dict[str, Any],
    description: GroupDescription,
    committed: dict[TopicPartition, OffsetAndMetadata],
) -> list[PartitionRow]:
    """Kafka's describe: every partition assigned to a member or committed by the group, with
    its log end offset (the high watermark) and the lag between them."""
    owners = {tp: m for m in description.members for tp in m.assignment}
    partitions = sorted(set(owners) | set(committed))
    ends = await _end_offsets(props, partitions)
    rows = []
    for tp in partitions:
        owner = owners.get(tp)
        om = committed.get(tp)
        rows.append(
            PartitionRow(
                tp.topic,
                tp.partition,
                None if om is None else om.offset,
                ends.get(tp),
                owner.member_id if owner else "-",
                owner.host if owner else "-",
                owner.client_id if owner else "-",
            )
        )
    return rows


async def _end_offsets(
    props: dict[str, Any], partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    partitions = list(partitions)
    if not partitions:
        return {}
    async with Consumer(props) as consumer:
        return await consumer.end_offsets(partitions)


# -- reset-offsets ------------------------------------------------------------------------------


@group.command("reset-offsets")
@click.option("--group", "group_id", required=True, help="The group whose offsets to reset.")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    required=True,
    metavar="TOPIC[:P,P...]",
    help="A topic, or some of its partitions (repeatable).",
)
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-offset", type=int, default=None, help="To this offset (kept in the log).")
@click.option("--shift-by", type=int, default=None, help="Move the committed offset by N (+/-).")
@click.option(
    "--to-datetime",
    default=None,
    metavar="ISO",
    help="To the first offset at or after this time, e.g. 2026-01-31T12:00:00Z.",
)
@click.option("--dry-run", is_flag=True, help="Only print the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@bootstrap_option
@property_option
def reset_offsets(group_id: str, topics: tuple[str, ...], to_earliest: bool, to_latest: bool,
                  to_offset: int | None, shift_by: int | None, to_datetime: str | None,
                  dry_run: bool, execute: bool, bootstrap_server: str,
                  properties: tuple[str, ...]) -> None:  # fmt: skip
    """Reset GROUP's committed offsets; the group must have no active members. Prints the plan;
    commits it only with --execute."""
    from deploy.cli.common import run, stdout_console

    specs = [
        ("earliest", to_earliest),
        ("latest", to_latest),
        ("offset", to_offset is not None),
        ("shift", shift_by is not None),
        ("datetime", to_datetime is not None),
    ]
    chosen = [name for name, given in specs if given]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime"
        )
    if dry_run and execute:
        raise click.UsageError("use either --dry-run or --execute, not both")
    if not execute and not dry_run:
        click.echo("WARN: No action will be performed as the --execute option is missing.",
                   err=True)  # fmt: skip
    timestamp = _parse_datetime(to_datetime) if to_datetime is not None else None
    amount = to_offset if to_offset is not None else shift_by
    wanted = [_parse_topic(t) for t in topics]
    props = _props(properties, bootstrap_server)
    plan = run(_reset, props, group_id, wanted, chosen[0], amount, timestamp, execute)
    table = Table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", box=None, pad_edge=False)
    for tp, offset in sorted(plan.items()):
        table.add_row(group_id, tp.topic, str(tp.partition), str(offset))
    stdout_console().print(table)


def _parse_topic(text: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = text.partition(":")
    if not topic:
        raise click.UsageError(f"--topic {text!r} names no topic")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",")})
    except ValueError:
        raise click.UsageError(
            f"--topic {text!r}: partitions must be numbers joined by ','"
        ) from None


def _parse_datetime(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.UsageError(f"--to-datetime {text!r} is not an ISO 8601 date-time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)  # Kafka's tool takes local time; UTC is clearer
    return int(when.timestamp() * 1000)


async def _reset(
    props: dict[str, Any],
    group_id: str,
    wanted: list[tuple[str, list[int] | None]],
    how: str,
    amount: int | None,
    timestamp: int | None,
    execute: bool,
) -> dict[TopicPartition, int]:
    from deploy.cli.common import fail

    async with Admin(props) as admin:
        state = (await admin.describe_groups([group_id]))[group_id].state
        if state not in _INACTIVE:
            fail(f"Assignments can only be reset if the group '{group_id}' is inactive, but "
                 f"the current state is {state}.")  # fmt: skip
        partitions = await _partitions(admin, wanted)
        committed = await admin.list_group_offsets(group_id, partitions)
        async with Consumer(props) as consumer:
            plan = await _plan(consumer, partitions, committed, how, amount, timestamp)
        if execute:
            await admin.alter_group_offsets(group_id, plan)
    return plan


async def _partitions(
    admin: Admin, wanted: list[tuple[str, list[int] | None]]
) -> list[TopicPartition]:
    from deploy.cli.common import fail

    described = {d.name: d for d in await admin.describe_topics([t for t, _ in wanted])}
    out: list[TopicPartition] = []
    for topic, parts in wanted:
        count = len(described[topic].partitions)
        for p in parts if parts is not None else range(count):
            if not 0 <= p < count:
                fail(f"partition {p} does not exist: topic {topic!r} has {count} partition(s)")
            out.append(TopicPartition(topic, p))
    return out


async def _plan(
    consumer: Consumer,
    partitions: list[TopicPartition],
    committed: dict[TopicPartition, OffsetAndMetadata],
    how: str,
    amount: int | None,
    timestamp: int | None,
) -> dict[TopicPartition, int]:
    """The new offsets, kept within [log start, log end] as Kafka's tool does."""
    from deploy.cli.common import fail

    start = await consumer.beginning_offsets(partitions)
    end = await consumer.end_offsets(partitions)
    if how == "earliest":
        target = dict(start)
    elif how == "latest":
        target = dict(end)
    elif how == "offset":
        assert amount is not None
        target = dict.fromkeys(partitions, amount)
    elif how == "shift":
        assert amount is not None
        missing = [str(tp) for tp in partitions if tp not in committed]
        if missing:
            fail(f"cannot shift the offset of {', '.join(missing)}: no committed offset")
        target = {tp: committed[tp].offset + amount for tp in partitions}
    else:
        assert timestamp is not None
        found = await consumer.offsets_for_times(dict.fromkeys(partitions, timestamp))
        target = {tp: end[tp] if f is None else f.offset for tp, f in found.items()}
    return {tp: min(max(offset, start[tp]), end[tp]) for tp, offset in target.items()}
