"""The default broker: KRaft combined mode on one node (metadata.mode=raft, process.roles =
[broker, controller]; deploy.node.combined). Real processes; every test can fail.

- admin writes (CreateTopics, configs, DeleteTopics) go through the local QuorumController and
  the broker serves them as soon as it started (clients wait for the initial unfence);
- a restart comes back from the controller's metadata snapshot + the log tail after it;
- a SIGKILLed node re-registers at once (its previous incarnation has no live session);
- with controller.quorum.voters naming the node, `trioka quorum describe` asks its CONTROLLER
  listener;
- metadata.mode=standalone (the legacy LocalMetadataLog broker) still works when asked for.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from client import Admin, AlterConfigOp
from client.admin import ConfigResource
from deploy.cluster.zookeeper import free_port
from tests.integration.broker.broker_wire import create_topic, fetch, produce
from tests.integration.cli.test_cli_commands import trioka
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient, batch, records_of


async def _topics(proc: BrokerProcess) -> list[str]:
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        return sorted(await admin.list_topics())


async def test_admin_writes_work_as_soon_as_the_broker_started(broker: BrokerProcess) -> None:
    # No wait: start() returned once ApiVersions answered, which is after the unfence.
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("orders", 3, 1)
        resource = ConfigResource.topic("orders")
        await admin.incremental_alter_configs(
            {resource: [("retention.ms", AlterConfigOp.SET, "3600000")]}
        )
        entries = (await admin.describe_configs([resource]))[resource]
        assert {e.name: e.value for e in entries}["retention.ms"] == "3600000"
        assert sorted(await admin.list_topics()) == ["orders"]
        await admin.delete_topics(["orders"])
        assert await admin.list_topics() == []
    ready = broker.wait_for_event("combined broker ready")
    assert ready["broker_epoch"] >= 0
    assert broker.wait_for_event("controller active")["epoch"] >= 1


async def test_restart_comes_back_from_snapshot_and_tail(broker_factory: Any) -> None:
    # A snapshot after every few hundred bytes of records: the restart loads one, then replays
    # the records written after it.
    proc = broker_factory({"metadata.log.max.record.bytes.between.snapshots": 300})
    async with await WireClient.connect(proc.host, proc.port) as c:
        for i in range(6):
            await create_topic(c, f"t{i}", partitions=2)
        for p in (0, 1):
            assert (await produce(c, "t0", p, batch([b"v%d" % p]))).error_code == 0
    written = proc.wait_for_event("metadata snapshot written")
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        await admin.delete_topics(["t5"])
        await admin.create_topic("tail", 1, 1)  # after the last snapshot, most likely
    expected = sorted([f"t{i}" for i in range(5)] + ["tail"])
    assert await _topics(proc) == expected

    await proc.arestart()
    loaded = proc.wait_for_event("metadata snapshot loaded")
    assert loaded["end_offset"] >= written["end_offset"]
    assert await _topics(proc) == expected
    async with await WireClient.connect(proc.host, proc.port) as c:
        for p in (0, 1):
            f = await fetch(c, "t0", p, 0)
            assert f.error_code == 0, f
            assert [r.value for r in records_of(f.records)] == [b"v%d" % p]
        # Leaders are back: the restarted node takes writes again.
        assert (await produce(c, "tail", 0, batch([b"after"]))).error_code == 0
    # The quorum state says this node leads a newer epoch (it stood again on restart).
    state = json.loads((proc.log_dir / "__cluster_metadata-0" / "quorum-state").read_text())
    assert state["leaderId"] == 1 and state["leaderEpoch"] >= 2


async def test_sigkilled_node_registers_again_without_waiting_out_its_session(
    broker_factory: Any,
) -> None:
    # A session far longer than the start deadline: if the old incarnation's session were
    # still live, the registration would be refused (DUPLICATE_BROKER_REGISTRATION) until
    # it ended and the start below would time out.
    proc = broker_factory({"broker.session.timeout.ms": 120_000})
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "k", partitions=1)
        assert (await produce(c, "k", 0, batch([b"x"]), acks=-1)).error_code == 0
    await proc.akill()
    await proc.astart(within=20)
    async with await WireClient.connect(proc.host, proc.port) as c:
        assert (await produce(c, "k", 0, batch([b"y"]), acks=-1)).error_code == 0
        f = await fetch(c, "k", 0, 0)
        assert [r.value for r in records_of(f.records)] == [b"x", b"y"]


async def test_quorum_describe_against_the_controller_listener(broker_factory: Any) -> None:
    port = free_port("127.0.0.1")
    proc = broker_factory(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
        }
    )
    result = await trio.to_thread.run_sync(
        lambda: trioka(
            "quorum", "describe", "--bootstrap-controller", f"127.0.0.1:{port}", "--json"
        )
    )
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    assert report["leader_id"] == 1 and report["current_voters"] == [1]
    # Clients never learn the controller listener; the client listener is the PLAINTEXT one.
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        cluster = await admin.describe_cluster()
        assert [(n.host, n.port) for n in cluster.brokers] == [("127.0.0.1", proc.port)]


async def test_standalone_fallback_still_serves(broker_factory: Any) -> None:
    proc = broker_factory({"metadata.mode": "standalone"})
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "s", partitions=1)
        assert (await produce(c, "s", 0, batch([b"z"]))).error_code == 0
    await proc.arestart()
    assert await _topics(proc) == ["s"]
    events = [e["event"] for e in proc.events()]
    assert "combined broker ready" not in events and "controller active" not in events
