"""Admin requests for the controller when the controller named in the metadata is dead: the
client must ask for fresh metadata (as Kafka's AdminClient does) instead of retrying the dead
node until default.api.timeout.ms."""

from __future__ import annotations

import dataclasses
import socket
from typing import Any

import trio

from client import Admin, NewTopic
from protocol.messages import ApiKey
from protocol.messages.metadata import MetadataBroker
from tests.unit.client.test_client_admin_cluster_ops import ControllerBroker


def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FailedOverController(ControllerBroker):
    """Names a dead controller (node 9) in its first `stale` Metadata answers, then itself."""

    def __init__(self, stale: int) -> None:
        super().__init__()
        self.stale = stale
        self.dead_port = closed_port()
        self.metadata_answers = 0

    def _answer(self, key: ApiKey, req: Any) -> Any:
        response = super()._answer(key, req)
        if key is ApiKey.METADATA:
            self.metadata_answers += 1
            if self.metadata_answers <= self.stale:
                dead = MetadataBroker(node_id=9, host="127.0.0.1", port=self.dead_port)
                response = dataclasses.replace(
                    response, brokers=(*response.brokers, dead), controller_id=9
                )
        return response


async def test_create_topics_follows_a_new_controller(nursery: trio.Nursery) -> None:
    broker = FailedOverController(stale=2)
    await nursery.start(broker.serve)
    admin = Admin(
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        default_api_timeout_ms=20_000,
    )
    async with admin:
        # Without a metadata refresh after the refused connection every retry goes to node 9
        # until the 20 s api timeout.
        with trio.fail_after(5):
            created = await admin.create_topics([NewTopic("t", 1)])
    assert [c.name for c in created] == ["t"]
    assert broker.metadata_answers > broker.stale
