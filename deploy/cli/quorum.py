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
from dataclasses import asdict

import click
from rich.table import Table

from deploy.cluster.quorum import QuorumReport, describe_quorum, parse_controllers


@click.group()
def quorum() -> None:
    """Describe the Raft metadata quorum (kafka-metadata-quorum.sh)."""


@quorum.command("describe")
@click.option("--bootstrap-controller", "bootstrap", required=True, metavar="HOST:PORT[,...]",
              help="Controller(s) to ask; the quorum leader answers.")  # fmt: skip
@click.option("--status", "show_status", is_flag=True, help="Only the status summary.")
@click.option("--replication", "show_replication", is_flag=True, help="Only the replica table.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object on stdout (whatever --status, --replication): leader_id, "
              "leader_epoch, high_watermark, max_follower_lag, max_follower_lag_time_ms, "
              "current_voters, current_observers, replicas (node_id, log_end_offset, lag, "
              "last_fetch_timestamp, last_caught_up_timestamp, status).")  # fmt: skip
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per controller.")
def quorum_describe(
    bootstrap: str, show_status: bool, show_replication: bool, as_json: bool, timeout: float
) -> None:
    """Leader, epoch, high watermark, lag and every voter's/observer's log end offset."""
    from deploy.cli.common import run, stdout_console

    try:
        controllers = parse_controllers(bootstrap)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bootstrap-controller") from None
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
