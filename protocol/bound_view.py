"""What a process-wide metrics object reads at scrape time: the view its owner bound.

    class ReplicaManagerMetrics(BoundView[BrokerView]): ...
    metrics.bind(broker, view); metrics.view(); metrics.unbind(broker)

The last owner bound wins, and an older owner's `unbind` leaves the newer binding alone (a
broker restarted in one process, tests running several). Thread-safe: scrapes run in the
metrics server's thread while the owner binds and unbinds in the trio thread.

`ScrapeCollector` is the prometheus_client collector such an object registers: its families are
built afresh at each scrape and filled from what is read then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

V = TypeVar("V")
F = TypeVar("F", bound=Sequence[Metric])


class ScrapeCollector(Collector, Generic[F]):
    """`families()` makes the empty families (what `describe` shows the registry); at each
    scrape, `fill(families)` adds the samples read then."""

    def __init__(self, families: Callable[[], F], fill: Callable[[F], None]) -> None:
        self._families = families
        self._fill = fill

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        self._fill(families)
        return iter(families)


class BoundView(Generic[V]):
    def __init__(self) -> None:
        self._bound_lock = threading.Lock()
        self._owner: object | None = None
        self._view: V | None = None

    def bind(self, owner: object, view: V) -> None:
        """Read `view` until `unbind(owner)`."""
        with self._bound_lock:
            self._owner, self._view = owner, view

    def unbind(self, owner: object) -> None:
        with self._bound_lock:
            if self._owner is owner:
                self._owner = self._view = None

    def view(self) -> V | None:
        with self._bound_lock:
            return self._view
