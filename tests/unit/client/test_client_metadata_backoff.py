"""A client backs off between metadata refreshes that did not give what it waits for (KIP-580,
Kafka's Metadata.timeToAllowUpdate): all its brokers down, a partition without a leader, or a
broker that keeps answering NOT_LEADER_OR_FOLLOWER while every Metadata answer names it.

The tests on simulated time run with `virtual_ms`: the client's milliseconds follow trio's
clock, which the autojump MockClock moves as soon as every task waits, so two minutes of a
producer waiting for a leader take a fraction of a second, and requests are counted exactly
(the fake broker runs in the same trio loop, over loopback sockets)."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable
from typing import Any

import pytest
import structlog
import trio
import trio.testing

import client.cluster as client_cluster
from client import Consumer, Producer, TopicPartition
from client.cluster import ClusterClient
from client.config import admin_config
from client.errors import KafkaTimeoutError
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.fetch import FetchRequest
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


async def test_a_producer_waiting_on_a_leaderless_partition(
    autojump_clock: trio.testing.MockClock, virtual_ms: Callable[[], float]
) -> None:
    """A record for a partition without a leader waits for one up to delivery.timeout.ms
    (Kafka's default, 120 s of simulated time) and then fails with Kafka's TimeoutException
    text. Meanwhile the producer refreshes metadata 100, 200, 400, 800 ms apart, then every
    retry.backoff.max.ms (1 s), 20% jitter: ~120 Metadata requests in the two minutes, where
    the issue saw ~1,350 a second, and says at WARN once which partition waits and why."""
    broker = FakeBroker()
    broker.create("t", partitions=2)
    broker.leaderless.add(("t", 1))
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        producer = Producer(bootstrap_servers=f"127.0.0.1:{broker.port}")  # Kafka's defaults
        with structlog.testing.capture_logs() as logs:
            async with producer:
                await producer.send_and_wait("t", b"led", partition=0)
                before, start = _metadata_requests(broker), virtual_ms()
                waiting = await producer.send("t", b"waits", partition=1)
                with pytest.raises(KafkaTimeoutError) as info:
                    await waiting
                waited_ms = virtual_ms() - start
                during = _metadata_requests(broker) - before
                assert 120_000 <= waited_ms <= 120_050, waited_ms
                assert 100 <= during <= 155, during
                assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
                assert str(info.value).startswith(
                    "REQUEST_TIMED_OUT: Expiring 1 record(s) for t-1:"
                ), info.value
                assert "ms has passed since batch creation" in str(info.value)
                assert "never sent: t-1 has no leader (LEADER_NOT_AVAILABLE" in str(info.value)
                # Another record waits again; the leader comes back; the warning is not repeated.
                again = await producer.send("t", b"waits again", partition=1)
                await wait_until(lambda: _metadata_requests(broker) > before + during + 2)
                broker.leaderless.clear()
                assert (await again).offset == 0
        warnings = [e for e in logs if e["event"].startswith("partition has no leader")]
        assert [(w["log_level"], w["tp"]) for w in warnings] == [("warning", "t-1")]
        assert warnings[0]["reason"].startswith("LEADER_NOT_AVAILABLE: no leader elected")
        nursery.cancel_scope.cancel()


async def test_refreshes_that_succeed_but_change_nothing_back_off(
    autojump_clock: trio.testing.MockClock, virtual_ms: Callable[[], float]
) -> None:
    """A broker that answers every Fetch NOT_LEADER_OR_FOLLOWER (no new leader named) while
    every Metadata answer still names it as the leader: each refresh succeeds, shows every
    leader, and changes nothing. Kafka counts such equivalent answers into the refresh backoff;
    without that the consumer fetched and refreshed in a loop, ~870 Metadata requests a
    second. Now 100, 100, 200, 400, 800 ms apart, then every second: about 13 in 10 s."""
    broker = FakeBroker()
    broker.create("t", partitions=1)
    broker.fail_next[ApiKey.FETCH] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 1_000_000
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        consumer = Consumer(
            bootstrap_servers=f"127.0.0.1:{broker.port}", auto_offset_reset="earliest"
        )
        async with consumer:
            consumer.assign([TopicPartition("t", 0)])
            start, before = virtual_ms(), _metadata_requests(broker)
            with trio.move_on_after(10):
                while _metadata_requests(broker) - before <= 100:  # stops a spinning client
                    await consumer.poll(timeout_ms=1000)
            during = _metadata_requests(broker) - before
            assert virtual_ms() - start >= 10_000, (virtual_ms() - start, during)
            assert 9 <= during <= 18, during
            fetches = sum(isinstance(r, FetchRequest) for r in broker.requests)
            assert fetches <= during + 1  # a fetch waits for the next refresh
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
            wait = cluster.refresh_delay_ms()
            clock[0] += wait * 1.5  # the jitter (+-20%) is drawn again at each look
            refreshes = _metadata_requests(broker)
            await cluster.maybe_refresh()
            assert _metadata_requests(broker) == refreshes + 1
            return wait

        assert await refresh_when_allowed() == 0  # a topic never asked for: at once
        same = [await refresh_when_allowed() for _ in range(4)]  # nothing changed
        # ~100 (after the first answer), 100, 200, 400 ms: Kafka's backoff(attempts - 1)
        assert max(same[:2]) <= 120 and same[1] < same[2] < same[3], same
        broker.leaderless.discard(("t", 0))  # a step of the failover lands
        await refresh_when_allowed()
        assert await refresh_when_allowed() <= 120  # back to retry.backoff.ms (+20% jitter)
        broker.leaderless.clear()
        await refresh_when_allowed()  # every leader known: no refresh is fruitless ...
        assert 80 <= await refresh_when_allowed() <= 120  # ... but the next waits all the same
        cluster.topics.add("u")
        assert cluster.needs_update() and cluster.refresh_delay_ms() == 0  # a new topic
        await cluster.aclose()
        nursery.cancel_scope.cancel()
