"""A client whose brokers are all down backs off between metadata refreshes (KIP-580)."""

from __future__ import annotations

import socket

import trio

from client.cluster import ClusterClient
from client.config import admin_config
from tests.support.waiting import wait_until


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_failed_refreshes_back_off_then_retry() -> None:
    config = admin_config(
        bootstrap_servers=f"127.0.0.1:{_closed_port()}",
        retry_backoff_ms=200,
        retry_backoff_max_ms=200,
    )
    async with trio.open_nursery() as nursery:
        cluster = ClusterClient(config, nursery)
        cluster.request_update()
        assert cluster.needs_update()
        await cluster.maybe_refresh()  # fails: nothing listens there
        assert not cluster.needs_update(), "a failed refresh is retried only after a backoff"
        await wait_until(cluster.needs_update, within=5)
        await cluster.aclose()
