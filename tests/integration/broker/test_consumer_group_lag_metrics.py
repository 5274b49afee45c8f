"""Consumer group lag on a real broker process's /metrics (scraped over HTTP): the broker that
coordinates the group exports the Kafka Exporter's `kafka_consumergroup_lag{consumergroup,
topic,partition}` (high watermark minus the committed offset), `..._current_offset`,
`..._lag_sum{consumergroup,topic}` and `..._lag_max{consumergroup}`, computed at scrape time:
new records move it with no commit, a commit moves it back."""

from __future__ import annotations

from typing import Any

import trio

from client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.metrics import Scrape, scrape
from tests.support.waiting import wait_until

GROUP_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
    "trioka.metrics.port": 0,
}
TOPIC = "orders"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


async def produce(bootstrap: str, partition: int, n: int) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=0, acks="all") as producer:
        for i in range(n):
            await producer.send(TOPIC, b"%d" % i, partition=partition)
        await producer.flush()


def lag_of(scraped: Scrape, group: str) -> dict[str, float | None]:
    labels = {"consumergroup": group, "topic": TOPIC}
    return {
        "p0": scraped.get("kafka_consumergroup_lag", **labels, partition="0"),
        "p1": scraped.get("kafka_consumergroup_lag", **labels, partition="1"),
        "offset0": scraped.get("kafka_consumergroup_current_offset", **labels, partition="0"),
        "sum": scraped.get("kafka_consumergroup_lag_sum", **labels),
        "max": scraped.get("kafka_consumergroup_lag_max", consumergroup=group),
    }


async def test_the_coordinator_exports_the_lag_of_its_groups(broker_factory: Any) -> None:
    proc = broker_factory(GROUP_OVERRIDES)
    port = int(proc.wait_for_event("metrics serving", timeout=10)["port"])
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, 2, 1)])
    await produce(proc.bootstrap, 0, 30)  # N = 30
    await produce(proc.bootstrap, 1, 5)
    before = await scrape(port)
    assert before.get("kafka_consumergroup_lag_max", consumergroup="billing") is None

    consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "billing"})
    async with consumer as c:
        c.assign([P0, P1])
        await c.commit({P0: 12, P1: 5})  # M = 12; partition 1 caught up

        async def wait_lag(expected: dict[str, float]) -> None:
            seen: list[dict[str, float | None]] = []

            async def reached() -> bool:
                seen.append(lag_of(await scrape(port), "billing"))
                return seen[-1] == expected

            try:
                await wait_until(reached, within=10, every=0.1)
            except trio.TooSlowError:
                assert seen[-1] == expected  # shows what the broker exported last

        # N - M, at once (the commit is answered once replicated, the acks=all records once
        # under the high watermark): a scrape reads both when it comes.
        await wait_lag({"p0": 18, "p1": 0, "offset0": 12, "sum": 18, "max": 18})
        # Records arrive and nobody commits: the lag grows at the next scrape.
        await produce(proc.bootstrap, 1, 4)
        await wait_lag({"p0": 18, "p1": 4, "offset0": 12, "sum": 22, "max": 18})
        # The consumer catches up on partition 0.
        await c.commit({P0: 30})
        await wait_lag({"p0": 0, "p1": 4, "offset0": 30, "sum": 4, "max": 4})
    scraped = await scrape(port)
    assert "_created" not in scraped.text
    assert "kafka_consumergroup_lag" in scraped.text
