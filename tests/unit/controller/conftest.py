"""Helpers for controller tests: states with registered brokers, applying results."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.operations import run_operation
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)


class Harness:
    """A ControllerState driven by operations whose records are 'committed' at once."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.state = ControllerState()
        self.ctx = ctx

    def add_brokers(
        self, brokers: Mapping[int, str | None], fenced: frozenset[int] = frozenset()
    ) -> None:
        records: list[Any] = []
        for broker_id, rack in brokers.items():
            epoch = self.state.next_offset + len(records)
            records.append(
                RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
                    broker_epoch=epoch,
                    endpoints=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9000 + broker_id),),
                    rack=rack,
                )
            )
            cls = FenceBrokerRecord if broker_id in fenced else UnfenceBrokerRecord
            records.append(cls(id=broker_id, epoch=epoch))
        self.commit(records)

    def commit(self, records: Any) -> None:
        self.state.replay_appended(list(records), self.state.next_offset + len(records) - 1)

    def run(self, request: object) -> ControllerResult[Any]:
        return run_operation(self.state, request, self.ctx)

    def apply(self, request: object) -> Any:
        result = self.run(request)
        if result.records:
            self.commit(result.records)
        return result.response


@pytest.fixture
def make_harness() -> Callable[..., Harness]:
    def make(
        brokers: Mapping[int, str | None] | None = None,
        *,
        fenced: frozenset[int] = frozenset(),
        seed: int = 7,
        **config: Any,
    ) -> Harness:
        rng = random.Random(seed)
        ids = random.Random(seed + 1)
        ctx = ControllerContext(
            config=ControllerConfig(**config),
            rng=rng,
            new_topic_id=lambda: _uuid(ids),
        )
        harness = Harness(ctx)
        harness.add_brokers({1: None} if brokers is None else brokers, fenced)
        return harness

    return make


def _uuid(rng: random.Random) -> str:
    from protocol.metadata.topic_ids import random_uuid

    return random_uuid(rng.randbytes)
