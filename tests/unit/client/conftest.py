from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
import trio.testing

import client.cluster as client_cluster
import client.producer as client_producer
from tests.unit.client.fake_broker import FakeBroker


@pytest.fixture
async def fake_broker(nursery: trio.Nursery) -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    await nursery.start(broker.serve)
    yield broker


@pytest.fixture
def virtual_ms(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> Callable[[], float]:
    """The client's milliseconds (client.cluster.now_ms, which the producer reads too) follow
    trio's autojump clock: simulated time runs as fast as the tasks let it, and the fake broker
    answers within the same trio loop, so requests are counted exactly. A test takes
    `autojump_clock` as well (pytest-trio runs a test on the clock among its own arguments)."""

    def now() -> float:
        return trio.current_time() * 1000

    monkeypatch.setattr(client_cluster, "now_ms", now)
    monkeypatch.setattr(client_producer, "now_ms", now)
    return now
