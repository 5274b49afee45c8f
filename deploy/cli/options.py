"""Options and small parsers shared by the `trioka` commands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from deploy.cli.profiles import current_profile
from deploy.cluster.client_properties import read_properties
from deploy.cluster.state import ClusterError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BOOTSTRAP = "localhost:9092"
_COMMAND_CONFIG = "trioka.command_config"
TYPED_PROPERTIES = "trioka.typed_properties"
"""ctx.meta key: the -X KEY=VALUE typed on the command line (deploy.cli.client_config)."""


def bootstrap_option(fn: F) -> F:
    # Eager: -X's callback must know whether the servers came from the profile.
    return click.option(
        "--bootstrap-server",
        "-b",
        envvar="TRIOKA_BOOTSTRAP_SERVER",
        default=_profile_bootstrap,
        show_default=f"the current profile's, else {DEFAULT_BOOTSTRAP}",
        is_eager=True,
        metavar="HOST:PORT[,...]",
        help="Broker(s) to connect to first (env TRIOKA_BOOTSTRAP_SERVER; default: the "
        "current profile's, which `trioka cluster up` saves: `trioka profile list`).",
    )(fn)


def _profile_bootstrap() -> str:
    found = current_profile()
    return found.bootstrap if found is not None else DEFAULT_BOOTSTRAP


def _profile_settings(ctx: click.Context) -> tuple[str, ...]:
    """The current profile's client.properties when -b came from it."""
    if ctx.get_parameter_source("bootstrap_server") is not ParameterSource.DEFAULT:
        return ()
    found = current_profile()
    if found is None or not found.command_config:
        return ()
    return _properties_file(found.command_config, None)


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
        help="Client config with Kafka's name, e.g. request.timeout.ms=5000 (repeatable). "
        "Checked before connecting; wins over an option's default, and must agree with an "
        "option typed for the same config (--acks and acks).",
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


def _properties_file(path: str, param: click.Parameter | None) -> tuple[str, ...]:
    try:
        loaded = read_properties(path)
    except ClusterError as exc:
        raise click.BadParameter(str(exc), param=param) from None
    return tuple(f"{k}={v}" for k, v in loaded.items())


def _read_command_config(ctx: click.Context, param: click.Parameter, path: str | None) -> None:
    if path is not None:
        ctx.meta[_COMMAND_CONFIG] = _properties_file(path, param)


def _after_command_config(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """The profile's settings, then --command-config's, then -X: the last one of a key wins."""
    ctx.meta[TYPED_PROPERTIES] = value
    profile = _profile_settings(ctx) if "bootstrap_server" in ctx.params else ()
    return (*profile, *ctx.meta.get(_COMMAND_CONFIG, ()), *value)


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
