"""`trioka topic` (kafka-topics.sh): create, list, describe, delete, alter-config, alter.\n"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from rich.table import Table

from client import Admin, AlterConfigOp, ConfigResource, NewPartitions
from client.admin import TopicDescription
from client.metadata import PartitionInfo
from deploy.cli.common import admin_props, emit_json, fail, run, stdout_console
from deploy.cli.options import (
    bootstrap_option,
    parse_key_values,
    parse_replica_assignment,
    property_option,
)
from protocol.errors import KafkaError


@click.group()
def topic() -> None:
    """Create, list, describe, delete topics, add partitions and alter their configs."""


@topic.command("create")
@click.argument("name")
@bootstrap_option
@click.option(
    "--partitions",
    "-p",
    type=int,
    default=-1,
    show_default="broker's num.partitions",
    help="Number of partitions.",
)
@click.option(
    "--replication-factor",
    "-r",
    type=int,
    default=-1,
    show_default="broker's default.replication.factor",
    help="Replicas per partition.",
)
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Topic config override, e.g. retention.ms=60000 (repeatable).",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
@property_option
def topic_create(name: str, bootstrap_server: str, partitions: int, replication_factor: int,
                 configs: tuple[str, ...], if_not_exists: bool, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Create topic NAME."""
    topic_configs = parse_key_values(configs, "--config")

    async def go() -> None:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            try:
                created = await admin.create_topic(
                    name, partitions, replication_factor, topic_configs
                )
            except KafkaError as exc:
                if if_not_exists and exc.code.name == "TOPIC_ALREADY_EXISTS":
                    return
                raise
            click.echo(
                f"Created topic {created.name} ({created.num_partitions} partitions, "
                f"replication factor {created.replication_factor}).",
                err=True,
            )
            await _wait_until_known(admin, name, created.num_partitions)

    run(go)


@topic.command("list")
@bootstrap_option
@click.option("--include-internal", is_flag=True, help="Also list internal topics.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array on stdout, an object per topic: name, topic_id, internal, "
              "partitions (the count), replication_factor.")  # fmt: skip
@property_option
def topic_list(
    bootstrap_server: str, include_internal: bool, as_json: bool, properties: tuple[str, ...]
) -> None:
    """List topic names, one a line."""
    props = admin_props(bootstrap_server, properties)

    async def go() -> list[TopicDescription]:
        async with Admin(props) as admin:
            return [
                t for t in await admin.describe_topics() if include_internal or not t.is_internal
            ]

    topics = run(go)
    if as_json:
        emit_json([
            {"name": t.name, "topic_id": t.topic_id, "internal": t.is_internal,
             "partitions": len(t.partitions), "replication_factor": _replication_factor(t)}
            for t in sorted(topics, key=lambda t: t.name)
        ])  # fmt: skip
        return
    for name in sorted(t.name for t in topics):
        click.echo(name)


def _replication_factor(description: TopicDescription) -> int:
    return len(description.partitions[0].replicas) if description.partitions else 0


@topic.command("describe")
@click.argument("names", nargs=-1)
@bootstrap_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array on stdout, an object per topic: name, topic_id, internal, "
              "partition_count, replication_factor, configs (the non-default ones, name to "
              "value), partitions (partition, leader (null: none), leader_epoch, replicas, "
              "isr, offline_replicas).")  # fmt: skip
@property_option
def topic_describe(
    names: tuple[str, ...], bootstrap_server: str, as_json: bool, properties: tuple[str, ...]
) -> None:
    """Partitions, leaders, replicas, ISR and non-default configs (all topics without NAMES)."""
    props = admin_props(bootstrap_server, properties)

    async def go() -> list[tuple[Any, list[Any]]]:
        async with Admin(props) as admin:
            topics = await admin.describe_topics(list(names) or None)
            configs = (
                await admin.describe_configs([ConfigResource.topic(t.name) for t in topics])
                if topics
                else {}
            )
            return [(t, configs.get(ConfigResource.topic(t.name), [])) for t in topics]

    described = run(go)
    if as_json:
        emit_json([_topic_json(t, entries) for t, entries in described])
        return
    console = stdout_console()
    for description, entries in described:
        overrides = ",".join(f"{e.name}={e.value}" for e in entries if not e.is_default)
        rf = _replication_factor(description)
        console.print(
            f"Topic: [bold]{description.name}[/bold]\tTopicId: {description.topic_id}\t"
            f"PartitionCount: {len(description.partitions)}\tReplicationFactor: {rf}\t"
            f"Configs: {overrides}"
        )
        table = Table("Partition", "Leader", "Replicas", "Isr", "Offline", box=None)
        for p in description.partitions:
            table.add_row(*partition_row(p))
        console.print(table)


def _topic_json(description: TopicDescription, entries: list[Any]) -> dict[str, Any]:
    return {
        "name": description.name,
        "topic_id": description.topic_id,
        "internal": description.is_internal,
        "partition_count": len(description.partitions),
        "replication_factor": _replication_factor(description),
        "configs": {e.name: e.value for e in entries if not e.is_default},
        "partitions": [
            {"partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
             "leader_epoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
             "offline_replicas": list(p.offline_replicas)}
            for p in description.partitions
        ],
    }  # fmt: skip


def partition_row(p: PartitionInfo) -> list[str]:
    def ids(xs: Sequence[int]) -> str:
        return ",".join(map(str, xs))

    leader = str(p.leader) if p.leader >= 0 else "none"
    return [str(p.partition), leader, ids(p.replicas), ids(p.isr), ids(p.offline_replicas)]


@topic.command("delete")
@click.argument("names", nargs=-1, required=True)
@bootstrap_option
@property_option
def topic_delete(
    names: tuple[str, ...], bootstrap_server: str, properties: tuple[str, ...]
) -> None:
    """Delete topics NAMES."""

    async def go() -> None:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            await admin.delete_topics(names)

    run(go)
    click.echo(f"Deleted topic{'s' if len(names) > 1 else ''} {', '.join(names)}.", err=True)


@topic.command("alter-config")
@click.argument("name")
@bootstrap_option
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a topic config (repeatable).",
)
@click.option(
    "--delete-config",
    "deletes",
    multiple=True,
    metavar="KEY",
    help="Remove an override, back to the default (repeatable).",
)
@click.option("--validate-only", is_flag=True, help="Check the change without applying it.")
@property_option
def topic_alter_config(name: str, bootstrap_server: str, configs: tuple[str, ...],
                       deletes: tuple[str, ...], validate_only: bool,
                       properties: tuple[str, ...]) -> None:  # fmt: skip
    """Set or remove config overrides of topic NAME (incremental, like kafka-configs)."""
    sets = parse_key_values(configs, "--config")
    if not sets and not deletes:
        fail("nothing to change: give --config KEY=VALUE and/or --delete-config KEY")
    ops: list[tuple[str, AlterConfigOp, str | None]] = [
        (k, AlterConfigOp.SET, v) for k, v in sets.items()
    ] + [(k, AlterConfigOp.DELETE, None) for k in deletes]

    async def go() -> None:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            await admin.incremental_alter_configs(
                {ConfigResource.topic(name): ops}, validate_only=validate_only
            )

    run(go)
    verb = "Validated" if validate_only else "Altered"
    click.echo(f"{verb} configs of topic {name}.", err=True)


@topic.command("alter")
@click.option("--topic", "-t", "name", required=True, help="The topic to alter.")
@bootstrap_option
@click.option(
    "--partitions",
    "-p",
    type=int,
    required=True,
    help="The new total number of partitions (partitions can only be added).",
)
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B",
    help="Replicas of each new partition, preferred leader first: partitions separated by ',', "
    "broker ids by ':' (default: the controller places them).",
)
@click.option("--validate-only", is_flag=True, help="Check the change without applying it.")
@property_option
def topic_alter(name: str, bootstrap_server: str, partitions: int,
                replica_assignment: str | None, validate_only: bool,
                properties: tuple[str, ...]) -> None:  # fmt: skip
    """Add partitions to a topic (kafka-topics.sh --alter --partitions N)."""
    assignment = (
        None
        if replica_assignment is None
        else parse_replica_assignment(replica_assignment, "--replica-assignment")
    )

    async def go() -> None:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            await admin.create_partitions(
                {name: NewPartitions(partitions, assignment)}, validate_only=validate_only
            )
            if not validate_only:
                await _wait_until_known(admin, name, partitions)

    run(go)
    verb = "Validated" if validate_only else "Altered"
    click.echo(f"{verb} topic {name}: {partitions} partitions.", err=True)


async def _wait_until_known(admin: Admin, name: str, partitions: int) -> None:
    """Return once every live broker shows the topic's partitions with leaders, so that the
    next command, whichever broker it asks, finds them; warn (not fail) when some do not
    within default.api.timeout.ms: the topic exists, they will learn it."""
    try:
        late = await admin.wait_for_topics([name], partitions={name: partitions})
    except KafkaError as exc:  # the change is made: never fail the command for the wait
        click.echo(f"warning: could not check that every broker shows {name}: {exc}", err=True)
        return
    if late:
        click.echo(
            f"warning: brokers {', '.join(map(str, late))} do not show {name}'s leaders yet",
            err=True,
        )
