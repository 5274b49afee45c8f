"""Raft-mode brokers, real processes: the default combined broker answers every forwarded
admin API that has nothing to wait for promptly (tests/integration/forwarded_answers.py); a
broker-only node that is not registered and unfenced leaves itself out of Metadata."""

from __future__ import annotations

from typing import Any

import trio

from deploy.cluster.zookeeper import free_port
from protocol.messages.metadata import MetadataRequest
from tests.integration.forwarded_answers import check_forwarded_answers
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient


async def test_forwarded_apis_with_nothing_to_wait_for_answer_at_once(
    broker: BrokerProcess,
) -> None:
    await check_forwarded_answers(broker.bootstrap, replication_factor=1)


async def test_a_raft_broker_not_yet_unfenced_does_not_list_itself(broker_factory: Any) -> None:
    # A broker-only node whose controller quorum is not there: it serves, but it is not
    # registered, so the controller would not place a replica on it. Metadata (what cluster
    # readiness counts) must not list it, as KRaft's getAliveBrokerNodes; it listed itself.
    dead_voter = free_port("127.0.0.1")
    proc = broker_factory(
        {
            "process.roles": "broker",
            "controller.quorum.voters": f"3001@127.0.0.1:{dead_voter}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }
    )
    async with await WireClient.connect(proc.host, proc.port) as c:
        with trio.fail_after(10):
            meta = await c.request(MetadataRequest(topics=None))
    assert [b.node_id for b in meta.brokers] == []
