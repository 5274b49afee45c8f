"""The structlog processor that copies every log event into the shipper's buffer.

deploy.telemetry.logs puts `LOG_TEE` in every process's chain, just before the renderer (the
event dict then has its level, ISO timestamp, bound context and, in JSON mode, its traceback as
a dict). Until a shipper attaches a sink the tee only returns the event; attached, it hands the
sink the event and the time on the shipper's clock (the process's), and the sink
(TelemetryBuffer via the shipper) copies it into a bounded deque: no I/O, no await, no lock of
its own.

Recursion: events logged by the shipper's own tasks (its producer and admin clients, its own
warnings) are not shipped. They run in a context where `MUTED` is set, which every task they
start inherits; without that, a failing produce would log a retry per batch, which would be
shipped, fail, and log again.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, MutableMapping
from typing import Any

from protocol.clock import SYSTEM_CLOCK, Clock

MUTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "trioka_telemetry_muted", default=False
)

Sink = Callable[[MutableMapping[str, Any], int], None]
"""`sink(event_dict, ts_ms)`: must copy what it keeps, and must not block."""


class LogTee:
    def __init__(self) -> None:
        self._attached: tuple[Sink, Clock] | None = None

    def attach(self, sink: Sink, clock: Clock = SYSTEM_CLOCK) -> None:
        """Hand every event to `sink`, stamped with `clock`'s wall time (the attacher's: the
        process's clock, protocol.clock)."""
        self._attached = (sink, clock)

    def detach(self, sink: Sink) -> None:
        attached = self._attached
        if attached is not None and attached[0] is sink:
            self._attached = None

    @property
    def attached(self) -> bool:
        return self._attached is not None

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        attached = self._attached
        if attached is not None and not MUTED.get():
            sink, clock = attached
            sink(event_dict, clock.wall_ms())
        return event_dict


LOG_TEE = LogTee()
"""The process's one tee (structlog is configured once per process)."""
