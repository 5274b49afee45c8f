"""Asking a local cluster how it is (deploy.cluster.supervisor, `trioka cluster up|status`): brokers,
controller and partition health from Metadata; readiness (a quorum leader in Raft mode, every
broker live).

    report = await describe_cluster("127.0.0.1:9092")
    await wait_until_ready(state.bootstrap, 3, within=60,
                           controller_bootstrap=state.controller_bootstrap)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from client import Admin
from deploy.cluster.raft import quorum_report
from deploy.cluster.state import ClusterError
from protocol.errors import KafkaError, TriokaError

__all__ = ["BrokerStatus", "ClusterReport", "describe_cluster", "wait_until_ready"]


@dataclass(frozen=True)
class BrokerStatus:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterReport:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerStatus, ...]
    topics: int
    partitions: int
    under_replicated: tuple[tuple[str, int], ...]
    """Partitions whose ISR is smaller than their replica set."""
    offline: tuple[tuple[str, int], ...]
    """Partitions without a leader."""


def _admin(bootstrap: str, timeout_ms: int, client: Mapping[str, Any] | None) -> Admin:
    return Admin(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "default.api.timeout.ms": timeout_ms,
            "request.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": min(timeout_ms, 2000),
        }
    )


async def describe_cluster(
    bootstrap: str, *, timeout_ms: int = 10_000, client: Mapping[str, Any] | None = None
) -> ClusterReport:
    """Controller, live brokers and partition health, from a Metadata request (`client`:
    Kafka's client settings, e.g. the security of a `--secure` cluster)."""
    async with _admin(bootstrap, timeout_ms, client) as admin:
        cluster = await admin.describe_cluster()
        topics = await admin.describe_topics()
    parts = [p for t in topics for p in t.partitions]
    return ClusterReport(
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=tuple(BrokerStatus(b.node_id, b.host, b.port, b.rack) for b in cluster.brokers),
        topics=len(topics),
        partitions=len(parts),
        under_replicated=tuple(
            (p.topic, p.partition) for p in parts if len(p.isr) < len(p.replicas)
        ),
        offline=tuple((p.topic, p.partition) for p in parts if p.leader < 0),
    )


async def _wait_quorum_leader(
    controller_bootstrap: str, within: float, client: Mapping[str, Any] | None
) -> int:
    """The quorum leader's id once DescribeQuorum names one; ClusterError after `within` s."""
    last: BaseException | None = None
    with trio.move_on_after(within):
        while True:
            try:
                report = await quorum_report(controller_bootstrap, client=client)
                if report.leader_id >= 0:
                    return report.leader_id
            except (KafkaError, OSError) as exc:
                last = exc
            await trio.sleep(0.1)
    raise ClusterError(f"no controller quorum leader within {within:g} s ({last})")


async def wait_until_ready(
    bootstrap: str,
    brokers: int,
    *,
    within: float = 60.0,
    controller_bootstrap: str = "",
    client: Mapping[str, Any] | None = None,
    controller_client: Mapping[str, Any] | None = None,
) -> ClusterReport:
    """Poll until the cluster has a controller and knows `brokers` live brokers (Raft mode:
    listed in Metadata, i.e. registered and unfenced); with `controller_bootstrap` (Raft mode)
    first until the controller quorum has a leader. `client`, `controller_client`: the client
    settings of those listeners (security)."""
    deadline = trio.current_time() + within
    if controller_bootstrap:
        await _wait_quorum_leader(controller_bootstrap, within, controller_client)
    last: BaseException | None = None
    report: ClusterReport | None = None
    with trio.move_on_at(deadline):
        while True:
            try:
                report = await describe_cluster(bootstrap, timeout_ms=2000, client=client)
                if report.controller_id >= 0 and len(report.brokers) >= brokers:
                    return report
            except (TriokaError, OSError) as exc:
                last = exc
            await trio.sleep(0.1)
    seen = (
        f"controller {report.controller_id}, brokers {[b.node_id for b in report.brokers]}"
        if report is not None
        else f"no answer ({last})"
    )
    raise ClusterError(f"the cluster was not ready within {within:g} s: {seen}")
