"""Loading a broker's config: a TOML file plus `--override key=value`, validated and typed (a
controller process's is read the same way: deploy.node.controller_config).

The TOML file holds Kafka's dotted key names, either flat (quoted keys, `"log.dirs" = [...]`) or
as nested tables (`[log] retention.ms = 1000` is `log.retention.ms`); both flatten to the same
dotted names. Overrides are strings, parsed by the key's type, and win over the file. Unknown
keys and bad values raise ConfigError naming the key (and the file, for file keys).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from broker.config import BROKER_CONFIGS, BrokerConfig
from protocol.config_defs import ConfigDefs, ConfigError

__all__ = ["BrokerConfig", "ConfigError", "flatten", "load_broker_config", "parse_overrides"]


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"log": {"retention.ms": 1}}` -> `{"log.retention.ms": 1}`."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """`["a.b=1", "c=x=y"]` -> `{"a.b": "1", "c": "x=y"}`; refuses entries without `=`."""
    out: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not key=value")
        out[key] = value.strip()
    return out


def read_config_file(path: str | Path, defs: ConfigDefs = BROKER_CONFIGS) -> dict[str, Any]:
    """The flattened keys of a TOML config file, each one of `defs` (a broker's keys, or a
    controller process's); errors name the file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
    values = flatten(table)
    for key in values:
        if key not in defs:
            raise ConfigError(f"unknown {defs.what} config {key!r} in {str(path)!r}")
    return values


def load_broker_config(
    path: str | Path | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
) -> BrokerConfig:
    """File (optional) + overrides -> BrokerConfig. Raises ConfigError naming the key."""
    values: dict[str, Any] = read_config_file(path) if path is not None else {}
    if isinstance(overrides, Mapping):
        values.update(overrides)
    else:
        values.update(parse_overrides(overrides))
    return BrokerConfig.from_values(values)
