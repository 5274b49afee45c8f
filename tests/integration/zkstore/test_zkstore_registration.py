"""Broker registration against a real ZooKeeper: czxid epochs, duplicate ids, and
re-registration after a real session expiry (the registering process frozen with SIGSTOP)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from protocol.metadata.records import BrokerEndpoint
from tests.support.waiting import wait_until
from tests.support.zookeeper import ZooKeeperChroot
from zkstore.client import ZkClient
from zkstore.errors import BrokerIdInUseError
from zkstore.registration import (
    BrokerRegistrar,
    ensure_persistent_paths,
    get_or_create_cluster_id,
)
from zkstore.znodes import BrokerIdZNode, BrokerInfo

SESSION_S = 2.0
REPO_ROOT = Path(__file__).resolve().parents[3]
ENDPOINTS = (
    BrokerEndpoint(name="INTERNAL", host="10.0.0.1", port=9093),
    BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092),
)


async def test_registration_is_ephemeral_and_its_czxid_is_the_broker_epoch(
    zookeeper: ZooKeeperChroot,
) -> None:
    async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as observer:
        async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk:
            await ensure_persistent_paths(zk)
            assert await get_or_create_cluster_id(zk, "cluster-a") == "cluster-a"
            assert await get_or_create_cluster_id(zk, "cluster-b") == "cluster-a"
            registrar = BrokerRegistrar(zk, BrokerInfo(7, ENDPOINTS, rack="r1"))
            epoch = await registrar.register()
            data, stat = await observer.get(BrokerIdZNode.path(7))
            assert epoch == stat.czxid == registrar.broker_epoch
            assert stat.ephemeralOwner == zk.session_id
            decoded = BrokerIdZNode.decode(7, data)
            assert decoded.endpoints == ENDPOINTS and decoded.rack == "r1"
            assert json.loads(data)["endpoints"] == [
                "INTERNAL://10.0.0.1:9093",
                "PLAINTEXT://127.0.0.1:9092",
            ]
            # Registering again in the same session finds its own znode: same epoch.
            assert await registrar.register() == epoch

            # A second broker with the same id is refused while the first one lives.
            async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as other:
                with pytest.raises(BrokerIdInUseError, match="another broker"):
                    await BrokerRegistrar(other, BrokerInfo(7, ENDPOINTS)).register()
        # The first session closed: the ephemeral is gone, and a restart gets a larger epoch.
        assert await observer.exists(BrokerIdZNode.path(7)) is None
        async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk:
            assert await BrokerRegistrar(zk, BrokerInfo(7, ENDPOINTS)).register() > epoch


async def test_run_registers_and_reports_the_epoch(zookeeper: ZooKeeperChroot) -> None:
    async with (
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk,
        trio.open_nursery() as nursery,
    ):
        registrar = BrokerRegistrar(zk, BrokerInfo(3, ENDPOINTS))
        epoch = await nursery.start(registrar.run)
        assert epoch == registrar.broker_epoch
        await registrar.deregister()
        assert await zk.exists(BrokerIdZNode.path(3)) is None
        nursery.cancel_scope.cancel()


@pytest.fixture
def registrant_process(zookeeper: ZooKeeperChroot) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("zk_registrant.py")),
            zookeeper.hosts,
            "5",
            str(SESSION_S),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


async def test_reregisters_with_a_new_epoch_after_a_real_session_expiry(
    zookeeper: ZooKeeperChroot, registrant_process: subprocess.Popen[str]
) -> None:
    proc = registrant_process
    assert proc.stdout is not None
    stdout = proc.stdout

    async def next_registration() -> dict[str, int]:
        with trio.fail_after(30):
            line = await trio.to_thread.run_sync(stdout.readline, abandon_on_cancel=True)
        assert line, "the registrant process exited"
        return json.loads(line)

    first = await next_registration()
    async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as observer:
        _, stat = await observer.get(BrokerIdZNode.path(5))
        assert stat.czxid == first["broker_epoch"]
        assert stat.ephemeralOwner == first["session_id"]

        # Frozen past the session timeout: the server expires the session and drops the znode.
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            await wait_until(
                lambda: _absent(observer, BrokerIdZNode.path(5)), within=10 * SESSION_S, every=0.1
            )
        finally:
            os.kill(proc.pid, signal.SIGCONT)

        second = await next_registration()
        assert second["session_id"] != first["session_id"]
        assert second["broker_epoch"] > first["broker_epoch"]
        _, stat = await observer.get(BrokerIdZNode.path(5))
        assert stat.czxid == second["broker_epoch"]
        assert stat.ephemeralOwner == second["session_id"]


async def _absent(zk: ZkClient, path: str) -> bool:
    return await zk.exists(path) is None
