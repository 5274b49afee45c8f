"""When the shipper produces, when it spools, and how long it waits after a failure: pure.

    policy = ShipPolicy()
    policy.route(now, spool_pending=...)   # PRODUCE: to the cluster; SPOOL: to the local spool
    policy.may_drain(now)                  # time to try the spool's records again
    policy.failed(now) / policy.succeeded()

Records go straight to the cluster only while the last attempt succeeded and the spool is empty;
otherwise they join the end of the spool, which is drained first, so a process's records reach
the topics in the order they were made. After a failure the next attempt waits
`retry_backoff_s`, doubling up to `retry_backoff_max_s` (Kafka's reconnect backoff shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

DEFAULT_BATCH_MAX_RECORDS = 500
DEFAULT_LINGER_S = 0.2


class Route(Enum):
    PRODUCE = "produce"
    SPOOL = "spool"


@dataclass(slots=True)
class ShipPolicy:
    retry_backoff_s: float = 0.5
    retry_backoff_max_s: float = 10.0
    batch_max_records: int = DEFAULT_BATCH_MAX_RECORDS
    """Records per produce attempt (and per spool read)."""
    linger_s: float = DEFAULT_LINGER_S
    """How often the buffer is taken (log events wait at most this long in memory)."""
    failures: int = 0
    """Consecutive failed attempts."""
    retry_at: float = 0.0

    @property
    def healthy(self) -> bool:
        return self.failures == 0

    def route(self, now: float, *, spool_pending: bool) -> Route:
        if self.healthy and not spool_pending:
            return Route.PRODUCE
        return Route.SPOOL

    def may_drain(self, now: float) -> bool:
        return now >= self.retry_at

    def failed(self, now: float) -> float:
        """Record a failed attempt; returns the backoff before the next one."""
        self.failures += 1
        backoff = min(self.retry_backoff_max_s, self.retry_backoff_s * 2 ** (self.failures - 1))
        self.retry_at = now + backoff
        return backoff

    def succeeded(self) -> None:
        self.failures = 0
        self.retry_at = 0.0
