"""`trioka quorum describe` (Kafka's kafka-metadata-quorum.sh describe --status / --replication).

Asks the controllers named by `--bootstrap-controller host:port[,host:port...]` for
DescribeQuorum, one after the other, until the quorum leader answers (only the leader has the
replication state); a follower's answer names the leader and, in its `nodes` (KIP-853), where
the voters listen, so one controller's address is enough. Prints the status (leader id, epoch, high watermark, max follower lag and
lag time, voters, observers) and the replication table (per node: log end offset, lag, last
fetch and last caught-up time, Leader/Follower/Observer), or `--json`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

import click
from rich.table import Table

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
            raise click.BadParameter(
                f"{item!r} is not host:port", param_hint="--bootstrap-controller"
            )
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


async def describe_quorum(controllers: list[tuple[str, int]], timeout_s: float) -> QuorumReport:
    from deploy.transport import PooledTransport

    problems: list[str] = []
    todo = list(controllers)
    seen = set(controllers)
    async with PooledTransport.open(client_id="trioka-quorum-tool") as transport:
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


@click.group()
def quorum() -> None:
    """Describe the Raft metadata quorum (kafka-metadata-quorum.sh)."""


@quorum.command("describe")
@click.option("--bootstrap-controller", "bootstrap", required=True, metavar="HOST:PORT[,...]",
              help="Controller(s) to ask; the quorum leader answers.")  # fmt: skip
@click.option("--status", "show_status", is_flag=True, help="Only the status summary.")
@click.option("--replication", "show_replication", is_flag=True, help="Only the replica table.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per controller.")
def quorum_describe(
    bootstrap: str, show_status: bool, show_replication: bool, as_json: bool, timeout: float
) -> None:
    """Leader, epoch, high watermark, lag and every voter's/observer's log end offset."""
    from deploy.cli import run, stdout_console

    controllers = parse_controllers(bootstrap)
    report: QuorumReport = run(describe_quorum, controllers, timeout)
    if as_json:
        click.echo(json.dumps(asdict(report)))
        return
    both = show_status == show_replication
    console = stdout_console()
    if show_status or both:
        status = Table(show_header=False, box=None)
        for key, value in [
            ("LeaderId", report.leader_id),
            ("LeaderEpoch", report.leader_epoch),
            ("HighWatermark", report.high_watermark),
            ("MaxFollowerLag", report.max_follower_lag),
            ("MaxFollowerLagTimeMs", report.max_follower_lag_time_ms),
            ("CurrentVoters", report.current_voters),
            ("CurrentObservers", report.current_observers),
        ]:
            status.add_row(key + ":", str(value))
        console.print(status)
    if show_replication or both:
        table = Table("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                      "LastCaughtUpTimestamp", "Status")  # fmt: skip
        for r in report.replicas:
            table.add_row(
                str(r.node_id), str(r.log_end_offset), str(r.lag), str(r.last_fetch_timestamp),
                str(r.last_caught_up_timestamp), r.status,
            )  # fmt: skip
        console.print(table)
