"""The `trioka` command line: broker, topics, produce, consume, perf (Kafka's tools + kcat).

Data goes to stdout and nothing else does; diagnostics go to stderr. A user error (bad flag,
unreachable broker, unknown topic, invalid name, bad config) prints one `error: ...` line on
stderr and exits non-zero: 1 for errors from the cluster or the client, 2 for bad usage.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from deploy.cli.acl import acl
from deploy.cli.broker import broker
from deploy.cli.chaos import chaos
from deploy.cli.cluster import cluster
from deploy.cli.common import EXIT_ERROR, EXIT_USAGE
from deploy.cli.group import group
from deploy.cli.partitions import leader_election, reassign
from deploy.cli.perf import perf
from deploy.cli.produce_consume import consume, produce
from deploy.cli.profiles import profile
from deploy.cli.quorum import quorum
from deploy.cli.report import report
from deploy.cli.topic import topic
from deploy.cli.user import user
from deploy.telemetry.logs import configure_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trioka", prog_name="trioka")
def cli() -> None:
    """trioka: a Kafka-like replicated log. Brokers, topics, producing, consuming, perf."""


for command in (
    broker,
    topic,
    produce,
    consume,
    group,
    perf,
    leader_election,
    reassign,
    quorum,
    cluster,
    chaos,
    report,
    user,
    acl,
    profile,
):
    cli.add_command(command)


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
