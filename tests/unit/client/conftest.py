from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from tests.unit.client.fake_broker import FakeBroker


@pytest.fixture
async def fake_broker(nursery: trio.Nursery) -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    await nursery.start(broker.serve)
    yield broker
