"""The `trioka` command line: broker, topics, produce, consume, perf (Kafka's tools + kcat).

Data goes to stdout and nothing else does; diagnostics go to stderr. A user error (bad flag,
unreachable broker, unknown topic, invalid name, bad config) prints one `error: ...` line on
stderr and exits non-zero: 1 for errors from the cluster or the client, 2 for bad usage.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click
import trio
from rich.console import Console
from rich.table import Table

from client import Admin, AlterConfigOp, ConfigResource, NewPartitions
from client.metadata import PartitionInfo
from deploy.cli_options import (
    bootstrap_option,
    parse_key_values,
    parse_replica_assignment,
    property_option,
)
from deploy.logging_config import configure_logging
from protocol.config_defs import ConfigError
from protocol.errors import KafkaError, TriokaError

T = TypeVar("T")

EXIT_ERROR = 1
EXIT_USAGE = 2


class CliError(click.ClickException):
    """A user error found by the CLI itself (printed as one line)."""


def fail(message: str) -> NoReturn:
    raise CliError(message)


def run(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a coroutine function under trio, turning client errors into one-line errors."""
    try:
        return trio.run(fn, *args)
    except KafkaError as exc:
        fail(exc.message if exc.message != exc.code.name else exc.code.name)
    except TriokaError as exc:
        fail(str(exc))


def stdout_console() -> Console:
    # Wide when piped, so tables are not cut at 80 columns in a file or a pager.
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trioka", prog_name="trioka")
def cli() -> None:
    """trioka: a Kafka-like replicated log. Brokers, topics, producing, consuming, perf."""


# -- broker ------------------------------------------------------------------------------------


@cli.group()
def broker() -> None:
    """Run a broker."""


@broker.command("start")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="TOML file with Kafka broker config names.",
)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (repeatable).")  # fmt: skip
def broker_start(config_file: str | None, overrides: tuple[str, ...]) -> None:
    """Start a broker in the foreground (SIGTERM or Ctrl-C stops it gracefully); by default a
    single-node KRaft combined process (broker + its own Raft controller)."""
    from deploy.broker_app import run_broker
    from deploy.config import load_broker_config

    try:
        config = load_broker_config(config_file, list(overrides))
    except ConfigError as exc:
        fail(exc.message)
    configure_logging(
        role="broker",
        node_id=config.node_id,
        metadata_mode=config.metadata_mode,
        **({"process_roles": ",".join(config.process_roles)} if config.combined_mode else {}),
    )
    try:
        trio.run(run_broker, config)
    except KeyboardInterrupt:
        sys.exit(130)
    except BaseException as exc:
        # trio hands errors from child tasks over as ExceptionGroups: find the user error.
        cause = _startup_error(exc)
        if cause is None:
            raise
        fail(f"cannot start the broker: {cause}")


def _startup_error(exc: BaseException) -> BaseException | None:
    """The deliberate error (TriokaError) or OSError (bad log dir, port in use, ...) in `exc`."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _startup_error(inner)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, TriokaError | OSError) else None


# -- topics ------------------------------------------------------------------------------------


@cli.group()
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

    run(go)


@topic.command("list")
@bootstrap_option
@click.option("--include-internal", is_flag=True, help="Also list internal topics.")
@property_option
def topic_list(bootstrap_server: str, include_internal: bool, properties: tuple[str, ...]) -> None:
    """List topic names, one a line."""

    async def go() -> list[str]:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            return await admin.list_topics(include_internal=include_internal)

    for name in run(go):
        click.echo(name)


@topic.command("describe")
@click.argument("names", nargs=-1)
@bootstrap_option
@property_option
def topic_describe(
    names: tuple[str, ...], bootstrap_server: str, properties: tuple[str, ...]
) -> None:
    """Partitions, leaders, replicas, ISR and non-default configs (all topics without NAMES)."""

    async def go() -> list[tuple[Any, list[Any]]]:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            topics = await admin.describe_topics(list(names) or None)
            configs = (
                await admin.describe_configs([ConfigResource.topic(t.name) for t in topics])
                if topics
                else {}
            )
            return [(t, configs.get(ConfigResource.topic(t.name), [])) for t in topics]

    console = stdout_console()
    for description, entries in run(go):
        overrides = ",".join(f"{e.name}={e.value}" for e in entries if not e.is_default)
        rf = len(description.partitions[0].replicas) if description.partitions else 0
        console.print(
            f"Topic: [bold]{description.name}[/bold]\tTopicId: {description.topic_id}\t"
            f"PartitionCount: {len(description.partitions)}\tReplicationFactor: {rf}\t"
            f"Configs: {overrides}"
        )
        table = Table("Partition", "Leader", "Replicas", "Isr", "Offline", box=None)
        for p in description.partitions:
            table.add_row(*partition_row(p))
        console.print(table)


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

    run(go)
    verb = "Validated" if validate_only else "Altered"
    click.echo(f"{verb} topic {name}: {partitions} partitions.", err=True)


def admin_props(bootstrap_server: str, properties: Sequence[str]) -> dict[str, Any]:
    return {**parse_key_values(properties, "--property"), "bootstrap.servers": bootstrap_server}


# -- the rest lives in its own modules ---------------------------------------------------------


def _register() -> None:
    from deploy.cli_chaos import chaos
    from deploy.cli_cluster import cluster
    from deploy.cli_cluster_ops import leader_election, reassign
    from deploy.cli_group import group
    from deploy.cli_io import consume, produce
    from deploy.cli_perf import perf
    from deploy.cli_quorum import quorum
    from deploy.cli_report import report

    cli.add_command(produce)
    cli.add_command(consume)
    cli.add_command(group)
    cli.add_command(perf)
    cli.add_command(leader_election)
    cli.add_command(reassign)
    cli.add_command(quorum)
    cli.add_command(cluster)
    cli.add_command(chaos)
    cli.add_command(report)


_register()


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: one-line errors, no tracebacks for user errors."""
    configure_logging(
        role="cli", level=os.environ.get("TRIOKA_LOG_LEVEL", "WARNING"), stream=sys.stderr
    )
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="trioka",
                 standalone_mode=False)  # fmt: skip
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"error: {exc.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(EXIT_ERROR)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # The reader of our stdout went away (`| head`): stop quietly, as kcat does.
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
