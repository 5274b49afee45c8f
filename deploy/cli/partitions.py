"""`trioka leader-election` and `trioka reassign`: Kafka's kafka-leader-election.sh and
kafka-reassign-partitions.sh, one partition (or all, for elections) from flags.

Results go to stdout; a failure prints one `error: ...` line on stderr and exits 1 (a
partition whose election failed also makes the exit code 1, after every result is printed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click
import trio

from client import Admin, ElectionType, PartitionReassignment, TopicPartition
from deploy.cli.common import admin_props, emit_json
from deploy.cli.options import bootstrap_option, property_option
from protocol.errors import ErrorCode, KafkaError, TriokaError

__all__ = ["leader_election", "reassign"]


def _run(fn: Callable[[], Any]) -> Any:
    try:
        return trio.run(fn)
    except KafkaError as exc:
        raise click.ClickException(exc.message) from None
    except (TriokaError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


def _admin(bootstrap_server: str, properties: Sequence[str]) -> Admin:
    return Admin(admin_props(bootstrap_server, properties))


def _partition_options(fn: Any) -> Any:
    fn = click.option("--partition", type=click.IntRange(min=0), help="Partition number.")(fn)
    return click.option("--topic", help="Topic name.")(fn)


def _one_partition(topic: str | None, partition: int | None) -> TopicPartition | None:
    if topic is None and partition is None:
        return None
    if topic is None or partition is None:
        raise click.UsageError("--topic and --partition go together")
    return TopicPartition(topic, partition)


def _names(tps: Sequence[TopicPartition]) -> str:
    return ",".join(str(tp) for tp in sorted(tps))


# -- leader-election ---------------------------------------------------------------------------


@click.command("leader-election")
@click.option(
    "--election-type",
    "--type",
    "election_type",
    type=click.Choice(["preferred", "unclean"], case_sensitive=False),
    required=True,
    help="preferred: back to the first replica; unclean: any live replica, out of the ISR too.",
)
@_partition_options
@click.option("--all-topic-partitions", is_flag=True, help="Elect for every partition.")
@bootstrap_option
@property_option
def leader_election(election_type: str, topic: str | None, partition: int | None,
                    all_topic_partitions: bool, bootstrap_server: str,
                    properties: tuple[str, ...]) -> None:  # fmt: skip
    """Run preferred or unclean leader elections (kafka-leader-election)."""
    one = _one_partition(topic, partition)
    if (one is None) == (not all_topic_partitions):
        raise click.UsageError("give either --topic T --partition P or --all-topic-partitions")
    kind = ElectionType[election_type.upper()]

    async def go() -> dict[TopicPartition, KafkaError | None]:
        async with _admin(bootstrap_server, properties) as admin:
            return await admin.elect_leaders(kind, None if one is None else [one])

    results = _run(go)
    elected = [tp for tp, e in results.items() if e is None]
    not_needed = [
        tp for tp, e in results.items() if e is not None and e.code is ErrorCode.ELECTION_NOT_NEEDED
    ]
    failed = {
        tp: e
        for tp, e in results.items()
        if e is not None and e.code is not ErrorCode.ELECTION_NOT_NEEDED
    }
    if elected:
        click.echo(
            f"Successfully completed leader election ({kind.name}) for partitions {_names(elected)}"
        )
    if not_needed:
        click.echo(f"Valid replica already elected for partitions {_names(not_needed)}")
    if not elected and not not_needed and not failed:
        click.echo("No partition needed an election.")
    for tp in sorted(failed):
        click.echo(
            f"Error completing leader election ({kind.name}) for partition {tp}: "
            f"{failed[tp].code.name}: {failed[tp].message}"
        )
    if failed:
        raise click.ClickException(f"{len(failed)} replica(s) could not be elected")


# -- reassign ----------------------------------------------------------------------------------


def _parse_replicas(value: str) -> tuple[int, ...]:
    try:
        replicas = tuple(int(x) for x in value.split(","))
    except ValueError:
        raise click.UsageError(
            f"--replicas {value!r} is not a list of broker ids like 1,2,3"
        ) from None
    if len(set(replicas)) != len(replicas):
        raise click.UsageError(f"--replicas {value!r} names a broker twice")
    return replicas


def _ids(xs: Sequence[int]) -> str:
    return ",".join(map(str, xs))


@click.command("reassign")
@click.option("--execute", "action", flag_value="execute", help="Start moving the partition.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel its ongoing move.")
@click.option("--list", "action", flag_value="list", help="Print ongoing reassignments.")
@click.option("--verify", "action", flag_value="verify",
              help="Is the move done? (with --replicas: are these the replicas now?)")  # fmt: skip
@_partition_options
@click.option("--replicas", metavar="ID,ID,...", help="Target replicas, preferred leader first.")
@click.option("--json", "as_json", is_flag=True,
              help="With --list: one JSON array on stdout, an object per partition: topic, "
              "partition, replicas, adding_replicas, removing_replicas.")  # fmt: skip
@bootstrap_option
@property_option
def reassign(action: str | None, topic: str | None, partition: int | None, replicas: str | None,
             as_json: bool, bootstrap_server: str, properties: tuple[str, ...]) -> None:  # fmt: skip
    """Move a partition to other brokers (kafka-reassign-partitions)."""
    if action is None:
        raise click.UsageError("give one of --execute, --cancel, --list, --verify")
    if as_json and action != "list":
        raise click.UsageError("--json goes with --list")
    one = _one_partition(topic, partition)
    target = None if replicas is None else _parse_replicas(replicas)
    if action in ("execute", "cancel", "verify") and one is None:
        raise click.UsageError(f"--{action} needs --topic and --partition")
    if action == "execute" and target is None:
        raise click.UsageError("--execute needs --replicas")

    if action in ("execute", "cancel"):
        assert one is not None

        async def alter() -> None:
            async with _admin(bootstrap_server, properties) as admin:
                await admin.alter_partition_reassignments(
                    {one: target if action == "execute" else None}
                )

        _run(alter)
        if action == "execute":
            click.echo(
                f"Successfully started partition reassignment of {one} to {_ids(target or ())}"
            )
        else:
            click.echo(f"Successfully cancelled partition reassignment of {one}")
        return

    async def look() -> tuple[dict[TopicPartition, PartitionReassignment], tuple[int, ...] | None]:
        async with _admin(bootstrap_server, properties) as admin:
            ongoing = await admin.list_partition_reassignments(None if one is None else [one])
            current = None
            if one is not None and one not in ongoing:
                (description,) = await admin.describe_topics([one.topic])
                found = [p for p in description.partitions if p.partition == one.partition]
                if not found:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {one} does not exist"
                    )
                current = tuple(found[0].replicas)
            return ongoing, current

    ongoing, current = _run(look)
    if action == "list":
        if as_json:
            emit_json([
                {"topic": tp.topic, "partition": tp.partition,
                 "replicas": list(ongoing[tp].replicas),
                 "adding_replicas": list(ongoing[tp].adding_replicas),
                 "removing_replicas": list(ongoing[tp].removing_replicas)}
                for tp in sorted(ongoing)
            ])  # fmt: skip
            return
        if not ongoing:
            click.echo("No partition reassignment is in progress.")
        for tp in sorted(ongoing):
            r = ongoing[tp]
            click.echo(
                f"{tp}\treplicas: {_ids(r.replicas)}\tadding: {_ids(r.adding_replicas)}\t"
                f"removing: {_ids(r.removing_replicas)}"
            )
        return
    assert one is not None
    if one in ongoing:
        click.echo(f"Reassignment of partition {one} is still in progress.")
    elif target is not None and current != target:
        raise click.ClickException(
            f"reassignment of partition {one} is not in progress and its replicas are "
            f"{_ids(current or ())}, not {_ids(target)}"
        )
    else:
        click.echo(f"Reassignment of partition {one} is complete (replicas {_ids(current or ())}).")
