"""structlog, configured once per process: JSON lines with UTC timestamps, pretty on a TTY.

Every process calls `configure_logging(role=..., node_id=..., **context)` first thing; the role,
node id and the rest of the process context (a broker's metadata_mode, a combined process's
process_roles) are bound as context variables so every event carries them, as do the
per-request variables (correlation_id, client_id, api) that broker.server binds for one request
with `structlog.contextvars` (protocol.telemetry.CONTEXT_FIELDS lists them all). An event with a
`topic_partition` ("orders-3") also gets `topic` and `partition`, the catalogue's names.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

import structlog

from deploy.telemetry import json_text
from deploy.telemetry.tee import LOG_TEE

_configured = False


def configure_logging(
    *,
    role: str,
    node_id: int | str | None = None,
    level: str | None = None,
    stream: TextIO | None = None,
    json: bool | None = None,
    cache_loggers: bool = True,
    **context: str | int,
) -> None:
    """Configure structlog and stdlib logging for this process (idempotent per process).

    `json=None` picks JSON unless `stream` is a TTY. TRIOKA_LOG_LEVEL overrides the level and
    TRIOKA_LOG_FORMAT=json|console the format.
    """
    global _configured
    stream = stream or sys.stderr
    level_name = (level or os.environ.get("TRIOKA_LOG_LEVEL") or "INFO").upper()
    fmt = os.environ.get("TRIOKA_LOG_FORMAT")
    if json is None:
        json = fmt == "json" if fmt else not _isatty(stream)
    numeric = logging.getLevelNamesMapping().get(level_name, logging.INFO)

    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        split_topic_partition,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if json:
        shared += [structlog.processors.dict_tracebacks]
        renderer = structlog.processors.JSONRenderer(serializer=json_text.dumps)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=_isatty(stream))
    structlog.configure(
        # LOG_TEE copies each event for the telemetry shipper (a no-op until one attaches).
        processors=[*shared, LOG_TEE, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        # Tests pass False: a logger cached under one test's configuration would keep it, and
        # structlog.testing.capture_logs in later tests would see nothing from it.
        cache_logger_on_first_use=cache_loggers,
    )
    # Libraries that use stdlib logging (kazoo, py4j) go to the same stream.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=stream, force=True)
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(
        role=role, **({} if node_id is None else {"node_id": node_id}), **context
    )
    _configured = True


def split_topic_partition(_logger: Any, _method: str, event_dict: Any) -> Any:
    """`topic_partition="orders-3"` -> also `topic="orders"`, `partition=3` (unless set)."""
    tp = event_dict.get("topic_partition")
    if isinstance(tp, str) and "partition" not in event_dict:
        topic, _, partition = tp.rpartition("-")
        if topic and partition.isdigit():
            event_dict.setdefault("topic", topic)
            event_dict["partition"] = int(partition)
    return event_dict


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
