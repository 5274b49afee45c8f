"""The state of a Raft controller quorum as its leader describes it (Kafka's\nkafka-metadata-quorum.sh describe): asked of the controllers one after the other until the\nleader answers; a follower's answer names the leader and, in its `nodes` (KIP-853), where the\nvoters listen, so one controller's address is enough.\n"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from client.config import ADMIN_CONFIGS
from client.security import client_security
from deploy.node.transport import PooledTransport
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.describe_quorum import DescribeQuorumPartitionResponse
from raft import wire


@dataclass(frozen=True)
class ReplicaRow:
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    status: str


@dataclass(frozen=True)
class QuorumReport:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    max_follower_lag: int
    max_follower_lag_time_ms: int
    current_voters: list[int]
    current_observers: list[int]
    replicas: list[ReplicaRow]


def parse_controllers(text: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for item in (p.strip() for p in text.split(",")):
        host, colon, port = item.rpartition(":")
        if not item or not colon or not host or not port.isdigit():
            raise ValueError(f"{item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


def report_from(part: DescribeQuorumPartitionResponse, now_ms: int) -> QuorumReport:
    """Kafka's MetadataQuorumCommand: lag = leader's log end - the replica's; lag time = now -
    its last caught-up time (0 for the leader)."""
    leader_end = next(
        (v.log_end_offset for v in part.current_voters if v.replica_id == part.leader_id), -1
    )
    rows: list[ReplicaRow] = []
    for replica, status in [(v, "Follower") for v in part.current_voters] + [
        (o, "Observer") for o in part.observers
    ]:
        is_leader = replica.replica_id == part.leader_id
        rows.append(
            ReplicaRow(
                node_id=replica.replica_id,
                log_end_offset=replica.log_end_offset,
                lag=max(leader_end - replica.log_end_offset, 0)
                if replica.log_end_offset >= 0
                else -1,
                last_fetch_timestamp=replica.last_fetch_timestamp,
                last_caught_up_timestamp=replica.last_caught_up_timestamp,
                status="Leader" if is_leader else status,
            )
        )
    rows.sort(key=lambda r: (r.status != "Leader", r.status == "Observer", r.node_id))
    followers = [r for r in rows if r.status == "Follower"]
    max_lag = max((r.lag for r in followers), default=0)
    caught_up = [r.last_caught_up_timestamp for r in followers]
    if not caught_up:
        max_lag_time = 0
    elif min(caught_up) < 0:
        max_lag_time = -1  # a voter that never caught up: unknown
    else:
        max_lag_time = max(now_ms - min(caught_up), 0)
    return QuorumReport(
        leader_id=part.leader_id,
        leader_epoch=part.leader_epoch,
        high_watermark=part.high_watermark,
        max_follower_lag=max_lag,
        max_follower_lag_time_ms=max_lag_time,
        current_voters=[v.replica_id for v in part.current_voters],
        current_observers=[o.replica_id for o in part.observers],
        replicas=rows,
    )


async def describe_quorum(
    controllers: list[tuple[str, int]], timeout_s: float, client: Mapping[str, Any] | None = None
) -> QuorumReport:
    """`client`: Kafka's client settings for the controllers' listener (security.protocol,
    ssl.*, sasl.*; none: PLAINTEXT)."""
    problems: list[str] = []
    todo = list(controllers)
    seen = set(controllers)
    security = client_security(ADMIN_CONFIGS.resolve(dict(client or {})))
    async with PooledTransport.open(client_id="trioka-quorum-tool", security=security) as transport:
        while todo:
            host, port = todo.pop(0)
            try:
                response = await transport.send(
                    host, port, wire.describe_quorum_request(), timeout_s=timeout_s
                )
            except KafkaError as exc:
                problems.append(f"{host}:{port}: {exc.message}")
                continue
            if response.error_code != ErrorCode.NONE:
                problems.append(f"{host}:{port}: {response.error_message}")
                continue
            part = response.topics[0].partitions[0]  # type: ignore[attr-defined]
            if part.error_code != ErrorCode.NONE:
                problems.append(
                    f"{host}:{port}: {ErrorCode(part.error_code).name} "
                    f"(leader {part.leader_id}, epoch {part.leader_epoch})"
                )
                # A follower names the leader; the answer's nodes (KIP-853) say where it is.
                for node in response.nodes:  # type: ignore[attr-defined]
                    if node.node_id == part.leader_id and node.listeners:
                        address = (node.listeners[0].host, node.listeners[0].port)
                        if address not in seen:
                            seen.add(address)
                            todo.insert(0, address)
                continue
            return report_from(part, int(time.time() * 1000))
    raise KafkaError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        "no quorum leader among the bootstrap controllers: " + "; ".join(problems),
    )
