"""3 brokers behind a ProxySet (deploy/cluster/proxy.py), both modes: every broker advertises its proxy,
so clients and followers (which dial the registered addresses) go through the proxies.

(a) produce responses dropped (probability 0.3, then the connection is closed) with
idempotence off: the producer retries writes that happened, and the checker reports
duplicates; (b) the same with idempotence on: no duplicate, nothing lost; (c) 200 ms of
delay on requests is a lower bound on an acks=all produce round trip, and replication (the
followers' Fetch requests, counted by the leader's proxy) still works.
"""

from __future__ import annotations

import random

import pytest
import trio

from client import Consumer, Producer, TopicPartition
from client.admin import NewTopic
from deploy.chaos.check.checker import check
from deploy.chaos.check.history import History, OpKind, OpType, PolledRecord, SendValue
from deploy.cluster.proxy import ProxySet
from deploy.cluster.proxy_policy import Delay, ProxyPolicy
from deploy.cluster.zookeeper import free_port
from protocol.errors import KafkaError
from protocol.messages import ApiKey
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster

TOPIC = "proxied"
HOST = "127.0.0.1"


async def proxied_cluster(
    cluster_factory: ClusterFactory, nursery: trio.Nursery, seed: int
) -> tuple[Cluster, ProxySet]:
    ports = {node_id: free_port(HOST) for node_id in (1, 2, 3)}
    proxies = ProxySet({n: (HOST, p) for n, p in ports.items()}, host=HOST,
                       rng=random.Random(seed))  # fmt: skip
    await proxies.start(nursery)
    per_broker = {
        n: {"listeners": f"PLAINTEXT://{HOST}:{ports[n]}", **adv}
        for n, adv in proxies.advertised_overrides().items()
    }
    cluster = cluster_factory(3, {"min.insync.replicas": 2}, start=False,
                              broker_overrides=per_broker)  # fmt: skip
    await cluster.astart()
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic(TOPIC, 1, 3, {}, {0: (1, 2, 3)})])
    await cluster.wait_partition(TOPIC, 0, lambda p: p.leader == 1 and len(p.isr) == 3)
    return cluster, proxies


async def produce(cluster: Cluster, history: History, count: int, *, idempotent: bool) -> None:
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(),
        acks="all",
        enable_idempotence=idempotent,
        linger_ms=0,
        request_timeout_ms=2500,
        retry_backoff_ms=50,
        delivery_timeout_ms=60000,
    ) as producer:
        for i in range(count):  # one batch per record: each response is a drop candidate
            op = history.invoke("producer", OpKind.SEND, SendValue(TOPIC, b"v-%04d" % i))
            try:
                md = await (await producer.send(TOPIC, op.value.value, partition=0))
            except KafkaError as exc:
                history.complete(op, OpType.INFO, error=str(exc))
                continue
            history.complete(op, OpType.OK, SendValue(TOPIC, op.value.value,
                                                      partition=md.partition, offset=md.offset))  # fmt: skip


async def read_back(cluster: Cluster, history: History) -> None:
    tp = TopicPartition(TOPIC, 0)
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        position = 0
        with trio.fail_after(30):
            while position < end:
                op = history.invoke("consumer", OpKind.POLL, ())
                records = await consumer.poll(1000)
                history.complete(op, OpType.OK, tuple(
                    PolledRecord(r.topic, r.partition, r.offset, r.value) for r in records))  # fmt: skip
                if records:
                    position = records[-1].offset + 1


@pytest.mark.parametrize("idempotent", [False, True], ids=["not-idempotent", "idempotent"])
async def test_dropped_produce_responses(
    cluster_factory: ClusterFactory, nursery: trio.Nursery, idempotent: bool
) -> None:
    cluster, proxies = await proxied_cluster(cluster_factory, nursery, seed=6)
    proxies.set_policy(ProxyPolicy(drop_responses=frozenset({int(ApiKey.PRODUCE)}),
                                   drop_probability=0.3))  # fmt: skip
    history = History()
    await produce(cluster, history, 60, idempotent=idempotent)
    dropped = sum(p.counters.responses_dropped for p in proxies.proxies.values())
    assert dropped > 0, proxies.totals()
    proxies.set_policy(ProxyPolicy())
    await read_back(cluster, history)
    result = check(history)
    assert not result.lost and not result.unexpected, result.summary()
    if idempotent:
        assert result.valid and result.read == 60, result.summary()
        assert result.acknowledged == 60, result.summary()
    else:
        assert result.duplicates, result.summary()


async def test_latency_is_a_lower_bound_and_replication_goes_through(
    cluster_factory: ClusterFactory, nursery: trio.Nursery
) -> None:
    cluster, proxies = await proxied_cluster(cluster_factory, nursery, seed=7)
    leader = proxies[1]
    fetches_before = leader.counters.requests_by_api[int(ApiKey.FETCH)]
    proxies.set_policy(ProxyPolicy(requests=Delay(delay_ms=200)))
    async with Producer(bootstrap_servers=cluster.live_bootstrap(), acks="all",
                        request_timeout_ms=10000) as producer:  # fmt: skip
        await (await producer.send(TOPIC, b"warm-up", partition=0))
        start = trio.current_time()
        md = await (await producer.send(TOPIC, b"timed", partition=0))
        elapsed = trio.current_time() - start
    assert elapsed >= 0.2, elapsed
    assert md.offset == 1
    assert leader.counters.frames_delayed > 0
    # Followers replicate from the leader's advertised address: the proxy.
    assert leader.counters.requests_by_api[int(ApiKey.FETCH)] > fetches_before, proxies.totals()
    info = await cluster.wait_partition(TOPIC, 0, lambda p: len(p.isr) == 3)
    assert info.leader == 1
