"""Config definitions in the manner of Kafka's ConfigDef: name, type, default, doc, validator.

Values arrive as strings (TOML, `--override k=v`, CreateTopics configs, IncrementalAlterConfigs)
or as native values (TOML); `ConfigDefs.parse` turns a mapping into typed values, refusing
unknown keys and bad values with an error that names the key. Topic-level configs are defined
here because the controller validates them, storage applies them and the broker describes them.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(KafkaError):
    """An unknown key or a bad value; the message names the key (Kafka's INVALID_CONFIG)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, message)


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _to_integer(key: str, value: Any, bits: int) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        # Only plain decimal digits, as Java's Integer/Long.parseLong (no "1_000", "1e3").
        text = value.strip()
        if len(text) > 40:  # far beyond 64 bits; int() would also refuse > 4300 digits
            raise ConfigError(f"{key}: {text[:20]}... does not fit in a {bits}-bit integer")
        number = int(text)
    else:
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not low <= number <= high:
        kind = "int" if bits == 32 else "long"
        raise ConfigError(f"{key}: {number} does not fit in a {bits}-bit {kind}")
    return number


def _to_int(key: str, value: Any) -> int:
    return _to_integer(key, value, 32)


def _to_long(key: str, value: Any) -> int:
    return _to_integer(key, value, 64)


def _to_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def _to_str(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(f"{key}: expected a string, got {value!r}")


def _to_list(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(_to_str(key, v).strip() for v in value)
    return tuple(v.strip() for v in _to_str(key, value).split(",") if v.strip())


def _to_float(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")
    return number


_PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "int": _to_int,
    "long": _to_long,
    "boolean": _to_bool,
    "string": _to_str,
    "password": _to_str,
    "list": _to_list,
    "double": _to_float,
}


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    """Kafka's name, e.g. `retention.ms`."""
    type: str
    """int, long, boolean, string, password (a string never shown: DescribeConfigs answers
    it as sensitive, with no value, as Kafka does), list or double."""
    default: Any
    """Typed default (Kafka's unless noted in doc)."""
    doc: str
    """One line for DescribeConfigs and --help."""
    min: float | None = None
    """Inclusive lower bound for numbers."""
    max: float | None = None
    """Inclusive upper bound for numbers."""
    choices: tuple[str, ...] | None = None
    """Allowed values for strings (and for each item of a list)."""
    read_only: bool = False
    """Cannot be altered while running."""
    per_listener: bool = False
    """Also taken as `listener.name.<listener>.<name>` (and, for sasl.jaas.config, with the
    lower-case SASL mechanism after the listener name): Kafka's listener overrides."""

    def parse(self, value: Any) -> Any:
        typed = _PARSERS[self.type](self.name, value)
        if self.min is not None and typed < self.min:
            raise ConfigError(f"{self.name}: {typed} is below the minimum {_num(self.min)}")
        if self.max is not None and typed > self.max:
            raise ConfigError(f"{self.name}: {typed} is above the maximum {_num(self.max)}")
        if self.choices is not None:
            items = typed if isinstance(typed, tuple) else (typed,)
            for item in items:
                if item not in self.choices:
                    raise ConfigError(
                        f"{self.name}: {item!r} is not one of {', '.join(self.choices)}"
                    )
        return typed

    def to_string(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_LISTENER_OVERRIDE = re.compile(
    r"listener\.name\.(?P<listener>[a-z0-9_]+)\.(?:(?P<mechanism>plain|scram-sha-256|scram-sha-512)\.)?"
    r"(?P<key>.+)"
)


class ConfigDefs:
    """A named set of ConfigDefs."""

    def __init__(self, what: str, defs: Iterable[ConfigDef]) -> None:
        self.what = what
        self.defs: dict[str, ConfigDef] = {}
        for d in defs:
            if d.name in self.defs:
                raise ValueError(f"{what} config {d.name!r} is defined twice")
            self.defs[d.name] = d

    def __contains__(self, name: str) -> bool:
        """A key of these configs, `listener.name.<l>.` overrides of per-listener keys too."""
        return name in self.defs or self._listener_override(name) is not None

    def __getitem__(self, name: str) -> ConfigDef:
        found = self.defs.get(name)
        if found is None:
            found = self._listener_override(name)
        if found is None:
            raise ConfigError(f"unknown {self.what} config {name!r}")
        return found

    def _listener_override(self, name: str) -> ConfigDef | None:
        """`listener.name.<listener>.[<mechanism>.]<key>` of a per-listener key, as its own
        ConfigDef (same type and rules, no default)."""
        match = _LISTENER_OVERRIDE.fullmatch(name)
        if match is None:
            return None
        base = self.defs.get(match["key"])
        if base is None or not base.per_listener:
            return None
        if match["mechanism"] and match["key"] != "sasl.jaas.config":
            return None
        return dataclasses.replace(base, name=name)

    def defaults(self) -> dict[str, Any]:
        return {name: d.default for name, d in self.defs.items()}

    def parse(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values for the given keys only; unknown keys and bad values raise ConfigError."""
        return {name: self[name].parse(value) for name, value in values.items()}

    def resolve(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with the parsed `values`."""
        return {**self.defaults(), **self.parse(values)}


TOPIC_CONFIGS = ConfigDefs(
    "topic",
    [
        ConfigDef("cleanup.policy", "list", ("delete",), "what to do with old segments: "
                  "delete them, compact them (latest value per key), or both",
                  choices=("delete", "compact")),
        ConfigDef("retention.ms", "long", 604800000, "keep segments this long (-1: forever)",
                  min=-1),
        ConfigDef("retention.bytes", "long", -1, "keep at most this many bytes per partition "
                  "(-1: no limit)", min=-1),
        ConfigDef("segment.bytes", "int", 1073741824, "roll a segment at this size", min=14,
                  max=INT_MAX),
        ConfigDef("segment.ms", "long", 604800000, "roll a segment after this long", min=1),
        ConfigDef("segment.index.bytes", "int", 10485760, "maximum size of an offset index",
                  min=4),
        ConfigDef("index.interval.bytes", "int", 4096, "bytes between offset index entries",
                  min=0),
        ConfigDef("max.message.bytes", "int", 1048588, "largest record batch accepted", min=0),
        ConfigDef("min.insync.replicas", "int", 1, "replicas that must have a write for acks=all",
                  min=1),
        ConfigDef("unclean.leader.election.enable", "boolean", False,
                  "elect an out-of-sync replica when no in-sync one is alive"),
        ConfigDef("flush.messages", "long", LONG_MAX, "fsync after this many records", min=1),
        ConfigDef("flush.ms", "long", LONG_MAX, "fsync after this long", min=0),
        ConfigDef("file.delete.delay.ms", "long", 60000, "wait before deleting a segment file",
                  min=0),
        ConfigDef("delete.retention.ms", "long", 86400000, "keep tombstones this long when "
                  "compacting", min=0),
        ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, "compact a log once this share "
                  "of it is dirty (written since its last cleaning)", min=0, max=1),
        ConfigDef("min.compaction.lag.ms", "long", 0, "records stay uncompacted at least this "
                  "long", min=0),
        ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, "compact a log whose oldest dirty "
                  "record is this old, whatever its dirty ratio", min=1),
        ConfigDef("compression.type", "string", "producer", "compression the broker keeps",
                  choices=("producer", "uncompressed", "lz4", "zstd")),
        ConfigDef("message.timestamp.type", "string", "CreateTime", "timestamp kept",
                  choices=("CreateTime",)),
    ],
)  # fmt: skip
