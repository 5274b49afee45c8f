"""The ZooKeeper test harness itself: a real server answers, chroots isolate, restarts keep data."""

from __future__ import annotations

from kazoo.client import KazooClient

from tests.support.zookeeper import ZooKeeperChroot, ZooKeeperServer, ruok


def _client(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=2.0)
    client.start(timeout=10)
    return client


def test_chroots_isolate_tests(zookeeper: ZooKeeperChroot) -> None:
    assert ruok(zookeeper.server.host, zookeeper.server.port)
    client = _client(zookeeper.hosts)
    try:
        client.create("/mine", b"x")
        assert client.get_children("/") == ["mine"]
    finally:
        client.stop()
        client.close()
    whole = _client(zookeeper.server_hosts)
    try:
        assert whole.get(zookeeper.chroot + "/mine")[0] == b"x"
    finally:
        whole.stop()
        whole.close()


def test_factory_server_restarts_with_its_data(zookeeper_factory) -> None:
    server: ZooKeeperServer = zookeeper_factory()
    client = _client(server.hosts)
    try:
        client.create("/kept", b"1")
    finally:
        client.stop()
        client.close()
    port = server.port
    server.restart()
    assert server.port == port
    client = _client(server.hosts)
    try:
        assert client.get("/kept")[0] == b"1"
    finally:
        client.stop()
        client.close()
    assert server.kill() == -9
    assert not ruok(server.host, server.port)
