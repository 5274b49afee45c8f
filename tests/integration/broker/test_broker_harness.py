"""The process harness itself: start, answer, SIGTERM, restart on the same port, SIGKILL."""

from __future__ import annotations

from protocol.messages.api_versions import ApiVersionsRequest
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient


async def test_harness_start_stop_restart_kill(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        resp = await c.request(ApiVersionsRequest())
        assert resp.error_code == 0
        assert resp.api_keys
    port = broker.port
    assert broker.stop() == 0
    broker.start()
    assert broker.port == port
    assert broker.kill() < 0
    assert not broker.running


def test_harness_pause_resume_sync(broker: BrokerProcess) -> None:
    broker.pause()
    broker.resume()
    assert broker.wait_for_event("broker listening")["port"] == broker.port
