"""Named listeners on a cluster of 3 real broker processes, with "published ports", in both
modes (`cluster_factory`).

Every broker listens on INTERNAL://127.0.0.1:0 and EXTERNAL://127.0.0.2:0 (127.0.0.0/8 is all
loopback on Linux: two "networks"), inter.broker.listener.name=INTERNAL, and advertises EXTERNAL
at 127.0.0.3:<proxy port>: a TCP forwarder the test runs in front of each broker's EXTERNAL
listener, as Docker's published ports are. The proxies start first, since each broker must be
told its advertised (proxy) port before it starts.

- A client bootstrapping through the proxies learns only proxy addresses (Metadata answers
  with the endpoints of the listener the request arrived on) and produces/consumes acks=all
  through them; the `trioka` CLI does the same from a subprocess.
- A client on INTERNAL learns INTERNAL addresses. ZK mode: /brokers/ids/<id> carries both
  endpoints; Raft mode: the BrokerRegistration does (the brokers' Metadata answers on each
  listener come from the registrations in their metadata image, the only place a Raft-mode
  broker learns another's endpoints).
- Inter-broker traffic uses INTERNAL: with every proxy broken (open connections cut, new ones
  refused and counted), a leader is SIGKILLed, the controller elects a new one and tells the
  brokers (LeaderAndIsr, or the metadata log), followers replicate acks=all writes with min.insync.replicas=3,
  and no broker ever dials an EXTERNAL address.

"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from client import Admin, Consumer, Producer
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest
from protocol.names import TopicPartition
from tests.integration.cli.test_cli_commands import trioka
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster, ZkCluster
from tests.support.wire import WireClient
from tests.support.zookeeper import ZooKeeperChroot
from zkstore import ZkClient
from zkstore.znodes import BrokerIdZNode

INTERNAL_HOST = "127.0.0.1"
EXTERNAL_HOST = "127.0.0.2"
PUBLISHED_HOST = "127.0.0.3"


class PublishedPort:
    """A TCP forwarder on PUBLISHED_HOST:<free port> to a target set once the broker is up.
    `cut()` closes every forwarded connection and refuses (and counts) new ones."""

    def __init__(self) -> None:
        self.port = 0
        self.target: tuple[str, int] | None = None
        self.forwarded = 0
        self.refused = 0
        self.broken = False
        self._scopes: set[trio.CancelScope] = set()

    async def start(self, nursery: trio.Nursery) -> None:
        listeners = await trio.open_tcp_listeners(0, host=PUBLISHED_HOST)
        self.port = listeners[0].socket.getsockname()[1]
        await nursery.start(trio.serve_listeners, self._handle, listeners)

    def cut(self) -> None:
        self.broken = True
        for scope in list(self._scopes):
            scope.cancel()

    async def _handle(self, client: trio.SocketStream) -> None:
        async with client:
            if self.broken or self.target is None:
                self.refused += 1
                return
            try:
                upstream = await trio.open_tcp_stream(*self.target)
            except OSError:
                self.refused += 1
                return
            self.forwarded += 1
            async with upstream:
                with trio.CancelScope() as scope:
                    self._scopes.add(scope)
                    try:
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(self._pipe, client, upstream, nursery.cancel_scope)
                            nursery.start_soon(self._pipe, upstream, client, nursery.cancel_scope)
                    finally:
                        self._scopes.discard(scope)

    @staticmethod
    async def _pipe(
        source: trio.SocketStream, sink: trio.SocketStream, both: trio.CancelScope
    ) -> None:
        try:
            while data := await source.receive_some(65536):
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        both.cancel()  # one side ended: end the other (a TCP proxy without half-close)


def admin_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "default.api.timeout.ms": 15_000,
        "request.timeout.ms": 5000,
        "socket.connection.setup.timeout.ms": 1000,
    }


async def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 3) -> None:
    async with Producer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=1,
        request_timeout_ms=5000,
        delivery_timeout_ms=60_000,
        metadata_max_age_ms=1000,
    ) as producer:
        futures = [
            await producer.send(topic, v, partition=i % partitions) for i, v in enumerate(values)
        ]
        for f in futures:
            await f


async def consume_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    out: list[bytes] = []
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        positions = dict.fromkeys(tps, 0)
        with trio.fail_after(60):
            while any(positions[tp] < ends[tp] for tp in tps):
                for record in await consumer.poll(1000):
                    positions[TopicPartition(record.topic, record.partition)] = record.offset + 1
                    out.append(record.value)
    return out


async def registered_endpoints(zookeeper: ZooKeeperChroot, broker_id: int) -> list[str]:
    async with ZkClient(zookeeper.hosts, session_timeout_s=4) as zk:
        data, _ = await zk.get(BrokerIdZNode.path(broker_id))
    return [
        f"{e.name}://{e.host}:{e.port}" for e in BrokerIdZNode.decode(broker_id, data).endpoints
    ]


async def start_cluster(
    cluster_factory: ClusterFactory, nursery: trio.Nursery
) -> tuple[Cluster, dict[int, PublishedPort], dict[int, int]]:
    proxies = {i: PublishedPort() for i in (1, 2, 3)}
    for proxy in proxies.values():
        await proxy.start(nursery)
    cluster = cluster_factory(
        3,
        {
            # CONTROLLER: Raft mode's controller listener (the brokers do not listen on it).
            "listener.security.protocol.map": (
                "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "inter.broker.listener.name": "INTERNAL",
        },
        start=False,
        broker_overrides={
            i: {
                # INTERNAL first: the harness reads the first "broker listening" event.
                "listeners": f"INTERNAL://{INTERNAL_HOST}:0,EXTERNAL://{EXTERNAL_HOST}:0",
                "advertised.listeners": f"INTERNAL://{INTERNAL_HOST}:0,"
                f"EXTERNAL://{PUBLISHED_HOST}:{proxies[i].port}",
            }
            for i in proxies
        },
    )
    await cluster.astart()
    external_ports = {}
    for i, proc in cluster.brokers.items():
        event = await trio.to_thread.run_sync(
            lambda p=proc: p.wait_for_event("broker listening", listener="EXTERNAL")
        )
        assert event["host"] == EXTERNAL_HOST
        external_ports[i] = int(event["port"])
        proxies[i].target = (EXTERNAL_HOST, external_ports[i])
    await cluster.wait_ready()
    return cluster, proxies, external_ports


async def test_external_clients_see_published_ports_and_brokers_talk_on_internal(
    cluster_factory: ClusterFactory, request: pytest.FixtureRequest
) -> None:
    async with trio.open_nursery() as nursery:
        cluster, proxies, _ = await start_cluster(cluster_factory, nursery)
        published = {i: (PUBLISHED_HOST, p.port) for i, p in proxies.items()}
        internal = {i: (INTERNAL_HOST, b.port) for i, b in cluster.brokers.items()}
        external_bootstrap = ",".join(f"{h}:{p}" for h, p in published.values())

        # ZooKeeper: every advertised endpoint (INTERNAL at its bound port, EXTERNAL published).
        # (Raft mode: the registrations are checked below, through each listener's Metadata.)
        if isinstance(cluster, ZkCluster):
            zookeeper: ZooKeeperChroot = request.getfixturevalue("zookeeper")
            for i in cluster.brokers:
                assert await registered_endpoints(zookeeper, i) == [
                    f"INTERNAL://{INTERNAL_HOST}:{internal[i][1]}",
                    f"EXTERNAL://{PUBLISHED_HOST}:{published[i][1]}",
                ]

        # Through the published ports: only published addresses, acks=all both ways.
        async with Admin(admin_config(external_bootstrap)) as admin:
            seen = await admin.describe_cluster()
            assert {b.node_id: (b.host, b.port) for b in seen.brokers} == published
            await admin.create_topic("orders", 3, 3, {"min.insync.replicas": "2"})
            await admin.create_topic("replicated", 1, 3, {"min.insync.replicas": "3"})
        for topic, n in (("orders", 3), ("replicated", 1)):
            for p in range(n):
                await cluster.wait_partition(topic, p, lambda i: len(i.isr) == 3)
        sent = [b"external-%03d" % i for i in range(30)]
        await produce(external_bootstrap, "orders", sent)
        assert sorted(await consume_all(external_bootstrap, "orders", 3)) == sent
        # Leaders are striped over the 3 brokers: every proxy carried client traffic.
        assert all(p.forwarded > 0 for p in proxies.values()), {
            i: p.forwarded for i, p in proxies.items()
        }

        # On INTERNAL: INTERNAL addresses.
        async with Admin(admin_config(cluster.live_bootstrap())) as admin:
            seen = await admin.describe_cluster()
            assert {b.node_id: (b.host, b.port) for b in seen.brokers} == internal

        # The CLI on the "host side" reaches the cluster through the published ports only.
        described = await trio.to_thread.run_sync(
            lambda: trioka("cluster", "describe", "-b", f"{PUBLISHED_HOST}:{published[1][1]}")
        )
        assert described.returncode == 0, described.stderr.decode()
        text = described.stdout.decode()
        for i in cluster.brokers:
            assert str(published[i][1]) in text and str(internal[i][1]) not in text, text
        produced = await trio.to_thread.run_sync(
            lambda: trioka(
                "produce",
                "orders",
                "-b",
                external_bootstrap,
                "--acks",
                "all",
                stdin="cli-1\ncli-2\n",
            )
        )
        assert produced.returncode == 0, produced.stderr.decode()
        consumed = await trio.to_thread.run_sync(
            lambda: trioka(
                "consume",
                "orders",
                "-b",
                external_bootstrap,
                "--from-beginning",
                "--format",
                "json",
            )
        )
        assert consumed.returncode == 0, consumed.stderr.decode()
        values = sorted(json.loads(line)["value"] for line in consumed.stdout.decode().splitlines())
        assert values == sorted([v.decode() for v in sent] + ["cli-1", "cli-2"])

        # Inter-broker traffic: cut every published port, then make the followers and the
        # controller work: acks=all with min.insync.replicas=3 needs both followers fetching,
        # and a leader's death needs the controller's elections and LeaderAndIsr.
        refused_before = sum(p.refused for p in proxies.values())
        for proxy in proxies.values():
            proxy.cut()
        await produce(cluster.live_bootstrap(), "replicated", [b"r-%d" % i for i in range(9)], 1)
        assert len(await consume_all(cluster.live_bootstrap(), "replicated", 1)) == 9
        controller = await cluster.controller_id()
        leaders = {p: (await cluster.partition("orders", p)).leader for p in range(3)}
        victim = next(b for b in leaders.values() if b != controller)
        await cluster.brokers[victim].akill()
        for p, leader in leaders.items():
            if leader == victim:
                await cluster.wait_partition(
                    "orders", p, lambda i: i.leader not in (-1, victim), within=30
                )
        survivors = ",".join(f"{h}:{p}" for i, (h, p) in internal.items() if i != victim)
        after = [b"internal-%03d" % i for i in range(30)]
        await produce(survivors, "orders", after)
        assert sorted(await consume_all(survivors, "orders", 3)) == sorted(
            sent + after + [b"cli-1", b"cli-2"]
        )
        # Nothing dialed an EXTERNAL (published) address meanwhile.
        assert sum(p.refused for p in proxies.values()) == refused_before
        nursery.cancel_scope.cancel()


async def test_a_listener_left_out_of_advertised_listeners_is_not_advertised(
    broker_factory: Any,
) -> None:
    # Kafka: with advertised.listeners set, a listener missing from it has no advertised
    # endpoint, so a Metadata request arriving on it lists no broker for it, and a partition
    # whose (live) leader has no endpoint there answers LISTENER_NOT_FOUND.
    proc = broker_factory(
        {
            "listeners": f"PLAINTEXT://{INTERNAL_HOST}:0,HIDDEN://{EXTERNAL_HOST}:0",
            "advertised.listeners": f"PLAINTEXT://{INTERNAL_HOST}:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,HIDDEN:PLAINTEXT",
            "num.partitions": 1,
        }
    )
    event = await trio.to_thread.run_sync(
        lambda: proc.wait_for_event("broker listening", listener="HIDDEN")
    )
    async with await WireClient.connect(INTERNAL_HOST, proc.port) as c:
        seen = await c.request(MetadataRequest(topics=("t",), allow_auto_topic_creation=True))
        assert [(b.host, b.port) for b in seen.brokers] == [(INTERNAL_HOST, proc.port)]
        assert seen.topics[0].partitions[0].error_code == 0
    async with await WireClient.connect(EXTERNAL_HOST, int(event["port"])) as c:
        seen = await c.request(MetadataRequest(topics=("t",)))
        assert seen.brokers == ()
        partition = seen.topics[0].partitions[0]
        assert (partition.error_code, partition.leader_id) == (ErrorCode.LISTENER_NOT_FOUND, 1)
