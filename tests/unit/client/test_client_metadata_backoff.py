"""A client backs off between metadata refreshes that did not give what it waits for (KIP-580):
all its brokers down, or a partition without a leader."""

from __future__ import annotations

import itertools
import socket
from typing import Any

import pytest
import structlog
import trio

import client.cluster as client_cluster
from client import Producer
from client.cluster import ClusterClient
from client.config import admin_config
from protocol.messages.metadata import MetadataRequest
from tests.support.waiting import wait_until
from tests.unit.client.fake_broker import FakeBroker


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


async def test_a_partition_without_leader_backs_off_refreshes_and_warns_once() -> None:
    """Refreshes that succeed but still show no leader back off like failed ones (KIP-580):
    before, the producer sent ~1,350 Metadata requests a second and said nothing."""
    broker = FakeBroker()
    broker.create("t", partitions=2)
    broker.leaderless.add(("t", 1))
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        producer = Producer(
            bootstrap_servers=f"127.0.0.1:{broker.port}",
            retry_backoff_ms=100,
            retry_backoff_max_ms=1000,
            delivery_timeout_ms=60_000,
        )
        with structlog.testing.capture_logs() as logs:
            async with producer:
                await producer.send_and_wait("t", b"led", partition=0)
                before = _metadata_requests(broker)
                waiting = await producer.send("t", b"waits", partition=1)
                with trio.move_on_after(3):
                    await waiting
                during = _metadata_requests(broker) - before
                # 100, 200, 400, 800, 1000 ms apart: about 6 in 3 s (with 20% jitter).
                assert 2 <= during <= 10, during
                broker.leaderless.clear()
                assert (await waiting).partition == 1
        warnings = [e for e in logs if e["event"].startswith("partitions have no leader")]
        assert [(w["topic"], w["partitions"]) for w in warnings] == [("t", [1])]
        nursery.cancel_scope.cancel()


def _metadata_requests(broker: FakeBroker) -> int:
    return sum(isinstance(r, MetadataRequest) for r in broker.requests)


async def test_connects_to_a_refusing_broker_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """A producer with records for a broker that refuses connections (dead, its partitions not
    yet moved) connects again after reconnect.backoff.ms, doubling up to
    reconnect.backoff.max.ms, one connect at a time, as Kafka's ClusterConnectionStates: a
    failover benchmark's producer made ~1,400 connects a second to the dead leader."""
    dead_port = _closed_port()
    attempts: list[float] = []
    real_open_stream = client_cluster.open_stream

    async def counting(host: str, port: int, timeout_ms: float, tls: Any = None) -> Any:
        if port == dead_port:
            attempts.append(trio.current_time())
        return await real_open_stream(host, port, timeout_ms, tls)

    monkeypatch.setattr(client_cluster, "open_stream", counting)
    broker = FakeBroker()
    broker.create("t", partitions=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        broker.moved[("t", 0)] = (2, 1, dead_port)  # KIP-951: "the leader is node 2, there"
        producer = Producer(
            bootstrap_servers=f"127.0.0.1:{broker.port}",
            reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=400,
            delivery_timeout_ms=60_000,
        )
        async with producer:
            await producer.send("t", b"waits", partition=0)
            with trio.move_on_after(2):
                await trio.sleep_forever()
            await producer.close(timeout_ms=0)
        assert 4 <= len(attempts) <= 12, len(attempts)  # 50, 100, 200, then every 400 ms
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        assert min(gaps) >= 0.035, gaps  # never two at once (50 ms less 20% jitter)
        nursery.cancel_scope.cancel()


async def test_refreshes_that_show_progress_go_back_to_the_base_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a failover's changes land on the brokers step by step, each refresh shows some new
    leaders: Kafka's Metadata then resets its backoff (equivalent responses only grow it).
    Before, any refresh still missing a leader doubled it, up to retry.backoff.max.ms, so a
    client learned a leader that had moved up to a second after it had."""
    clock = [1_000_000.0]
    monkeypatch.setattr(client_cluster, "now_ms", lambda: clock[0])
    broker = FakeBroker()
    broker.create("t", partitions=3)
    broker.leaderless.update({("t", 0), ("t", 1), ("t", 2)})
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        config = admin_config(
            bootstrap_servers=f"127.0.0.1:{broker.port}",
            retry_backoff_ms=100,
            retry_backoff_max_ms=10_000,
        )
        cluster = ClusterClient(config, nursery)
        cluster.topics.add("t")

        async def refresh_when_allowed() -> float:
            cluster.request_update()
            wait = max(cluster._next_refresh_allowed_ms() - clock[0], 0.0)
            clock[0] += wait * 1.5  # the jitter (+-20%) is drawn again at each look
            refreshes = _metadata_requests(broker)
            await cluster.maybe_refresh()
            assert _metadata_requests(broker) == refreshes + 1
            return wait

        await refresh_when_allowed()  # learns the topic
        same = [await refresh_when_allowed() for _ in range(3)]  # nothing changed
        assert same[0] < same[1] < same[2], same  # ~100, 200, 400 ms: growing
        broker.leaderless.discard(("t", 0))  # a step of the failover lands
        await refresh_when_allowed()
        assert await refresh_when_allowed() <= 120  # back to retry.backoff.ms (+20% jitter)
        await cluster.aclose()
        nursery.cancel_scope.cancel()
