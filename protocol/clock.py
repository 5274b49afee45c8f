"""The clock port every package takes its time from, and the system clock processes inject.

A process builds one clock at start (deploy.node.runtime.NodeRuntime) and hands it to every
component that stamps or measures time; a component constructed without one uses
`SYSTEM_CLOCK`, the same object. Tests inject a clock they move by hand. Deadlines and timeouts
inside trio drivers (cancel scopes, `trio.sleep`) follow trio's own clock, which the run
injects (`trio.run(clock=...)`, trio.testing.MockClock)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch: record timestamps, retention, expiry of stored state."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary origin that never goes back: lags, backoffs, sessions."""
        ...


class SystemClock:
    """The operating system's clocks."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


SYSTEM_CLOCK: Clock = SystemClock()

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]
