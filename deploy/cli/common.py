"""What every `trioka` command shares: one-line errors, exit codes, running a coroutine under\ntrio, the console, client properties.\n"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import click
import trio
from rich.console import Console

from deploy.cli.client_config import admin_config
from protocol.errors import KafkaError, TriokaError

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


def admin_props(bootstrap_server: str | None, properties: Sequence[str]) -> dict[str, Any]:
    """An Admin's configs: -X checked with Kafka's texts, --bootstrap-server merged with -X
    bootstrap.servers (deploy.cli.client_config)."""
    return admin_config(bootstrap_server, properties)


def emit_json(document: Any) -> None:
    """`--json`: the whole answer as one JSON document on one line of stdout."""
    click.echo(json.dumps(document))


# -- the rest lives in its own modules ---------------------------------------------------------
