"""The default combined broker (metadata.mode=raft) answers every forwarded admin API that
has nothing to wait for promptly (tests/integration/forwarded_answers.py). Real process."""

from __future__ import annotations

from tests.integration.forwarded_answers import check_forwarded_answers
from tests.support.broker_process import BrokerProcess


async def test_forwarded_apis_with_nothing_to_wait_for_answer_at_once(
    broker: BrokerProcess,
) -> None:
    await check_forwarded_answers(broker.bootstrap, replication_factor=1)
