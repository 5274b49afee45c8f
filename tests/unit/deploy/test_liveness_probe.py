"""deploy.node.liveness_probe: what a real connect and ApiVersions tell the fast fencing: a closed
port is refused, a broker's server names its node id and epoch, a listener that accepts but
never answers (a paused process: the kernel still accepts) is no answer."""

from __future__ import annotations

import socket

import trio

from broker.config import Listener
from broker.handlers.router import ApiRouter
from broker.server import BrokerServer
from controller.liveness import Probe, ProbeResult
from deploy.node.liveness_probe import TcpListenerProbe


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_closed_port_is_refused() -> None:
    assert await TcpListenerProbe().probe("127.0.0.1", _closed_port()) == ProbeResult(Probe.REFUSED)


async def test_a_broker_names_its_node_id_and_epoch() -> None:
    server = BrokerServer(
        ApiRouter(identity=lambda: (3, 41)), [Listener("PLAINTEXT", "127.0.0.1", 0)]
    )
    async with trio.open_nursery() as nursery:
        (bound,) = await nursery.start(server.serve)
        result = await TcpListenerProbe().probe("127.0.0.1", bound.port)
        nursery.cancel_scope.cancel()
    assert result == ProbeResult(Probe.ANSWERED, node_id=3, broker_epoch=41)


async def test_a_listener_that_never_answers_is_no_answer() -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    async with listener:  # accepted by the kernel's backlog, never read: a SIGSTOPped broker
        result = await TcpListenerProbe(timeout_s=0.3).probe("127.0.0.1", port)
    assert result.outcome is Probe.NO_ANSWER
