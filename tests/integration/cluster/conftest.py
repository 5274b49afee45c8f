"""Cluster fixtures (tests/support/cluster.py), every process killed by pid at teardown:

- `zk_cluster_factory`: ZK-mode clusters of real broker processes on the test's ZooKeeper chroot;
- `raft_cluster_factory`: Raft-mode clusters (3 controller processes + the brokers; no ZooKeeper);
- `cluster_factory`: parametrized over both modes (test ids `[zk]` and `[raft]`), for the
  tests whose behaviour is the same in both; only the `zk` instance starts a ZooKeeper.

Each factory takes `(brokers=3, overrides=None, *, start=True, env=None, **kwargs)`; `kwargs`
are the harness's own (`broker_overrides`, `broker_env`, `session_timeout_ms`, and for Raft
mode `controllers`, `controller_overrides`, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, RaftCluster, ZkCluster
from tests.support.zookeeper import ZooKeeperChroot

ZkClusterFactory = Callable[..., ZkCluster]
RaftClusterFactory = Callable[..., RaftCluster]
ClusterFactory = Callable[..., Cluster]


def _factory(tmp_path: Path, build: Callable[..., Cluster], made: list[Cluster]) -> Any:
    def make(
        brokers: int = 3,
        overrides: dict[str, Any] | None = None,
        *,
        start: bool = True,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Cluster:
        cluster = build(
            tmp_path / f"cluster-{len(made)}", brokers=brokers, overrides=overrides, env=env,
            **kwargs,
        )  # fmt: skip
        made.append(cluster)
        if start:
            cluster.start()
        return cluster

    return make


def _zk_build(zookeeper: ZooKeeperChroot) -> Callable[..., Cluster]:
    def build(tmp_dir: Path, **kwargs: Any) -> Cluster:
        return ZkCluster(tmp_dir, zookeeper.hosts, **kwargs)

    return build


@pytest.fixture
def zk_cluster_factory(tmp_path: Path, zookeeper: ZooKeeperChroot) -> Iterator[ZkClusterFactory]:
    made: list[Cluster] = []
    try:
        yield _factory(tmp_path, _zk_build(zookeeper), made)
    finally:
        for cluster in made:
            cluster.cleanup()


@pytest.fixture
def raft_cluster_factory(tmp_path: Path) -> Iterator[RaftClusterFactory]:
    made: list[Cluster] = []
    try:
        yield _factory(tmp_path, RaftCluster, made)
    finally:
        for cluster in made:
            cluster.cleanup()


@pytest.fixture(params=["zk", "raft"])
def cluster_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClusterFactory]:
    """A ZK-mode or a Raft-mode cluster factory (the test runs once with each)."""
    if request.param == "zk":
        build = _zk_build(request.getfixturevalue("zookeeper"))
    else:
        build = RaftCluster
    made: list[Cluster] = []
    try:
        yield _factory(tmp_path, build, made)
    finally:
        for cluster in made:
            cluster.cleanup()
