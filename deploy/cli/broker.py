"""`trioka broker start`: a broker in the foreground (deploy.node.broker).\n"""

from __future__ import annotations

import click

from deploy.cli.common import fail
from protocol.config_defs import ConfigError


@click.group()
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
    # Imported here: the whole server side is not needed by the other commands.
    from deploy.node.broker import start
    from deploy.node.startup import StartupError

    try:
        start(config_file, overrides)
    except ConfigError as exc:
        fail(exc.message)
    except StartupError as exc:
        fail(str(exc))
