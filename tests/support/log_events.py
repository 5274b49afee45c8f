"""Checking captured or logged events against the catalogue (protocol.telemetry.LOG_EVENTS)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocol.telemetry import LOG_EVENTS_BY_NAME, check_log_event


def catalogued(events: Iterable[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    """The events called `name` (a catalogued name), each checked against its spec."""
    assert name in LOG_EVENTS_BY_NAME, f"{name!r} is not catalogued"
    found = [e for e in events if e.get("event") == name]
    assert_schema(found)
    return found


def assert_schema(events: Sequence[Mapping[str, Any]]) -> None:
    """Every catalogued event among `events` has its fields with their types and values."""
    problems = [p for e in events for p in check_log_event(e)]
    assert not problems, "\n".join(problems)
