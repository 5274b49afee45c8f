"""Options and small parsers shared by the `trioka` commands."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BOOTSTRAP = "localhost:9092"


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
    return click.option(
        "--property",
        "-X",
        "properties",
        multiple=True,
        metavar="KEY=VALUE",
        help="Client config with Kafka's name, e.g. request.timeout.ms=5000 (repeatable).",
    )(fn)


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
