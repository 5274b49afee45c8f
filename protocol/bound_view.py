"""What a process-wide metrics object reads at scrape time: the view its owner bound.

    class ReplicaManagerMetrics(BoundView[BrokerView]): ...
    metrics.bind(broker, view); metrics.view(); metrics.unbind(broker)

The last owner bound wins, and an older owner's `unbind` leaves the newer binding alone (a
broker restarted in one process, tests running several). Thread-safe: scrapes run in the
metrics server's thread while the owner binds and unbinds in the trio thread.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

V = TypeVar("V")


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
