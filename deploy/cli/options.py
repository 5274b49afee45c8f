"""Options and small parsers shared by the `trioka` commands."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
import javaproperties

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BOOTSTRAP = "localhost:9092"
_COMMAND_CONFIG = "trioka.command_config"


def bootstrap_option(fn: F) -> F:
    return click.option(
        "--bootstrap-server",
        "-b",
        default=lambda: os.environ.get("TRIOKA_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP),
        show_default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,...]",
        help="Broker(s) to connect to first (env TRIOKA_BOOTSTRAP_SERVER).",
    )(fn)


def property_option(fn: F) -> F:
    """`-X KEY=VALUE` (kcat's, repeatable) and `--command-config FILE` (Kafka tools'): a
    client.properties file read first, so that each -X wins over it."""
    fn = click.option(
        "--property",
        "-X",
        "properties",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_after_command_config,
        help="Client config with Kafka's name, e.g. request.timeout.ms=5000 (repeatable).",
    )(fn)
    return click.option(
        "--command-config",
        type=click.Path(dir_okay=False),
        is_eager=True,
        expose_value=False,
        callback=_read_command_config,
        help="A client.properties file (Java properties: key=value lines) read before -X, e.g. "
        "the client.properties of `trioka cluster up --secure`.",
    )(fn)


def _read_command_config(ctx: click.Context, param: click.Parameter, path: str | None) -> None:
    if path is None:
        return
    try:
        with open(path, encoding="utf-8") as f:
            loaded = javaproperties.load(f)
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param=param) from None
    except ValueError as exc:
        raise click.BadParameter(f"{path}: not a properties file: {exc}", param=param) from None
    ctx.meta[_COMMAND_CONFIG] = tuple(f"{k}={v}" for k, v in loaded.items())


def _after_command_config(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    return (*ctx.meta.get(_COMMAND_CONFIG, ()), *value)


def parse_key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """`["a=1", "b=x=y"]` -> {"a": "1", "b": "x=y"}; a usage error names the bad item."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{flag} {item!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def parse_replica_assignment(text: str, flag: str) -> list[list[int]]:
    """kafka-topics.sh's --replica-assignment: partitions separated by `,`, the broker ids of
    one partition by `:`, preferred leader first: `"1:2,2:3"` -> [[1, 2], [2, 3]]; a usage
    error names the bad part."""
    out: list[list[int]] = []
    for index, part in enumerate(text.split(",")):
        ids = [i.strip() for i in part.split(":")]
        if not all(i.lstrip("-").isdigit() for i in ids):
            raise click.UsageError(
                f"{flag} {text!r}: partition {index} ({part!r}) is not broker ids joined by ':'"
            )
        brokers = [int(i) for i in ids]
        if len(set(brokers)) != len(brokers):
            raise click.UsageError(f"{flag} {text!r}: partition {index} names a broker twice")
        out.append(brokers)
    return out
