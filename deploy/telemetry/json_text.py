"""JSON text of log events and telemetry records, through orjson: rendering every log line
with the stdlib encoder was a tenth of a broker's CPU while it applied a 25,000-partition
failover (one "partition leadership applied" per partition, bench/run_failover.py
--profile-dir). Compact separators, as before; what orjson refuses (an int past 64 bits, a
non-str key) falls back to the stdlib encoder, so nothing is lost."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson


def dumps(obj: Any, default: Callable[[Any], Any] | None = repr, **_ignored: Any) -> str:
    """`obj` as compact JSON text; values JSON has no type for go through `default`.
    (structlog's JSONRenderer passes its own `default`; other keywords are not used.)"""
    try:
        return orjson.dumps(obj, default=default).decode()
    except TypeError:  # orjson.JSONEncodeError: too large an int, a non-str key
        return json.dumps(obj, separators=(",", ":"), default=default)
