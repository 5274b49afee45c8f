"""`zk_cluster_factory`: ZK-mode clusters of real broker processes on the test's ZooKeeper chroot
(tests/support/cluster.py); every broker process is killed by pid at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import ZkCluster
from tests.support.zookeeper import ZooKeeperChroot

ZkClusterFactory = Callable[..., ZkCluster]


@pytest.fixture
def zk_cluster_factory(tmp_path: Path, zookeeper: ZooKeeperChroot) -> Iterator[ZkClusterFactory]:
    made: list[ZkCluster] = []

    def make(
        brokers: int = 3,
        overrides: dict[str, Any] | None = None,
        *,
        start: bool = True,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> ZkCluster:
        cluster = ZkCluster(
            tmp_path / f"cluster-{len(made)}",
            zookeeper.hosts,
            brokers=brokers,
            overrides=overrides,
            env=env,
            **kwargs,
        )
        made.append(cluster)
        if start:
            cluster.start()
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.cleanup()
