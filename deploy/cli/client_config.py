"""Client configs on the command line: `-X KEY=VALUE` and `--command-config FILE`, checked
before any connection and refused with Kafka's ConfigException texts, then merged with the
options that set the same keys as Kafka's console tools merge them.

Precedence, for a key that an option sets too (`--bootstrap-server` and bootstrap.servers,
`produce --acks` and acks, `--compression` and compression.type, `consume --group` and
group.id, `--from-beginning` and auto.offset.reset, `perf produce --acks`):

1. the option, when it is typed on the command line (Kafka's console producer:
   CommandLineUtils.maybeMergeOptions);
2. else `-X KEY=VALUE`, then the `--command-config` file (a -X wins over the file);
3. else the option's default (TRIOKA_BOOTSTRAP_SERVER is --bootstrap-server's default).

An option and a -X both typed on the command line that disagree are refused, with the text of
Kafka's console consumer for --from-beginning and auto.offset.reset: "Can't simultaneously
specify --acks 1 and 'acks=all', please remove one option". Equal values are fine (`--acks
all -X acks=-1` too: the same setting).

Every key is checked against the client's configs (client.config): an unknown key and a bad
value are usage errors (exit 2) whose one line is Kafka's text, e.g. "Invalid value 7 for
configuration acks: String must be one of: all, -1, 0, 1" (Kafka's clients only warn about an
unknown key; trioka's refuse it, so the CLI does too, in the words of Kafka's warning).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

from client.config import ADMIN_CONFIGS, resolve
from deploy.cli.options import TYPED_PROPERTIES, parse_key_values
from protocol.config_defs import ConfigDef, ConfigDefs, ConfigError

_NOT_A_NUMBER = {"int": "INT", "long": "LONG", "double": "DOUBLE"}
"""Kafka's ConfigDef.Type names, as its "Not a number of type ..." says them."""


class ConfigUsageError(click.UsageError):
    """A bad client config on the command line: one `error:` line, exit 2, and no "(see
    --help)" hint after Kafka's text (main adds it to usage errors that have a context: this
    one never keeps the context click attaches)."""

    @property  # type: ignore[override]
    def ctx(self) -> click.Context | None:
        return None

    @ctx.setter
    def ctx(self, value: click.Context | None) -> None:
        pass


@dataclass(frozen=True, slots=True)
class OptionKey:
    """An option of a command that sets a client config too."""

    param: str
    """click's name of the parameter."""
    key: str
    """The client config it sets."""
    flag: str
    """How it is typed, for messages."""
    is_flag: bool = False
    """A flag (--from-beginning): typed alone, its config value implied."""

    def typed(self, value: str) -> str:
        return self.flag if self.is_flag else f"{self.flag} {value}"


BOOTSTRAP = OptionKey("bootstrap_server", "bootstrap.servers", "--bootstrap-server")
ACKS = OptionKey("acks", "acks", "--acks")


def client_config(
    properties: Sequence[str],
    defs: ConfigDefs,
    options: Mapping[OptionKey, str | None] | None = None,
    *,
    typed: Sequence[str] | None = None,
    check: Callable[[dict[str, str]], Any] | None = None,
) -> dict[str, str]:
    """The configs of a client: `properties` (the --command-config file's then each -X, as
    property_option gives them) merged with `options` (each option's value, None when it sets
    nothing) by the precedence above, every key checked against `defs`, then `check` (a
    client.config builder: its ConfigError is a usage error too). `typed` is the -X typed on
    the command line (default: what property_option recorded, else all of `properties`)."""
    merged = parse_key_values(properties, "--property")
    if typed is None:
        ctx = click.get_current_context(silent=True)
        recorded = None if ctx is None else ctx.meta.get(TYPED_PROPERTIES)
        typed = properties if recorded is None else recorded
    on_command_line = parse_key_values(typed, "--property")
    for option, value in (options or {}).items():
        if value is None:
            continue
        if not _typed_on_command_line(option):
            merged.setdefault(option.key, value)
            continue
        other = on_command_line.get(option.key)
        if other is not None and not _same(defs, option.key, value, other):
            raise ConfigUsageError(
                f"Can't simultaneously specify {option.typed(value)} and "
                f"'{option.key}={other}', please remove one option"
            )
        merged[option.key] = value
    for key, value in merged.items():
        problem = config_problem(defs, key, value)
        if problem is not None:
            raise ConfigUsageError(problem)
    if check is not None:
        try:
            check(merged)
        except ConfigError as exc:
            raise ConfigUsageError(exc.message) from None
    return merged


def admin_config(bootstrap_server: str | None, properties: Sequence[str]) -> dict[str, str]:
    """An Admin's configs (bootstrap.servers included) from --bootstrap-server and -X."""
    return client_config(
        properties,
        ADMIN_CONFIGS,
        {BOOTSTRAP: bootstrap_server},
        check=lambda config: resolve(ADMIN_CONFIGS, config, {}),
    )


def _typed_on_command_line(option: OptionKey) -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(option.param) is ParameterSource.COMMANDLINE


def _same(defs: ConfigDefs, key: str, a: str, b: str) -> bool:
    if key == "acks":  # Kafka's producer: -1 is all
        return {a, b} <= {"all", "-1"} or a == b
    try:
        definition = defs[key]
        return bool(definition.parse(a) == definition.parse(b))
    except ConfigError:
        return a == b


def config_problem(defs: ConfigDefs, key: str, value: str) -> str | None:
    """Kafka's ConfigException text for `key=value` as a config of `defs` (None: fine)."""
    try:
        definition = defs[key]
    except ConfigError:
        close = difflib.get_close_matches(key, list(defs.defs), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"The configuration '{key}' was supplied but isn't a known {defs.what} config{hint}"
    try:
        definition.parse(value)
    except ConfigError as exc:
        reason = _kafka_reason(definition, value) or exc.message
        shown = "[hidden]" if definition.type == "password" else value
        return f"Invalid value {shown} for configuration {key}: {reason}"
    return None


def _kafka_reason(definition: ConfigDef, value: str) -> str | None:
    """The validator's message Kafka's ConfigDef gives (parseType, ValidString, Range)."""
    bare = dataclasses.replace(definition, min=None, max=None, choices=None)
    try:
        typed = bare.parse(value)
    except ConfigError:
        if definition.type == "boolean":
            return "Expected value to be either true or false"
        kind = _NOT_A_NUMBER.get(definition.type)
        return None if kind is None else f"Not a number of type {kind}"
    if definition.choices is not None:
        return f"String must be one of: {', '.join(definition.choices)}"
    if definition.min is not None and typed < definition.min:
        return f"Value must be at least {_number(definition.min)}"
    if definition.max is not None and typed > definition.max:
        return f"Value must be no more than {_number(definition.max)}"
    return None


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
