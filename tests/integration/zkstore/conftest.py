"""The real-ZooKeeper fixtures for the zkstore tests (see tests/support/zookeeper.py)."""

from tests.support.zookeeper import zookeeper, zookeeper_factory, zookeeper_server

__all__ = ["zookeeper", "zookeeper_factory", "zookeeper_server"]
