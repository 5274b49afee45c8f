"""The report page's sections: which charts and tables each shows, and what it says when the
data for it is missing. Works on the tables already collected (pandas), by table name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from analytics import render
from analytics.render import Section

Tables = dict[str, pd.DataFrame]


def _chart(
    out: Path, charts: list[str], section: Section, name: str, draw: Callable[[Path], bool]
) -> None:
    if draw(out / name):
        charts.append(name)
        section.charts.append(name)


def _table(section: Section, tables: Tables, name: str, caption: str) -> None:
    section.tables.append((caption, name, tables[name]))


def throughput(t: Tables, out: Path, charts: list[str]) -> Section:
    s = Section("Throughput per broker and topic", "throughput")
    rates = t["throughput"]
    _chart(
        out,
        charts,
        s,
        "throughput.png",
        lambda p: render.lines_chart(
            rates,
            p,
            value="rate_per_s",
            series=["source", "topic"],
            panels="metric",
            title="Throughput",
            ylabel="per second",
        ),
    )
    if rates.empty:
        s.notes.append("No BrokerTopicMetrics samples in this period.")
    _table(s, t, "topic_totals", "Totals per topic")
    _table(s, t, "broker_topic_rates", "Mean and peak rates per broker and topic")
    return s


def latency(t: Tables, out: Path, charts: list[str]) -> Section:
    s = Section("Request latency (p50 / p95 / p99) per API and broker", "latency")
    period = t["request_latency"]
    total = period[period["metric"] == "TotalTimeMs"] if not period.empty else period
    _chart(
        out,
        charts,
        s,
        "latency_total.png",
        lambda p: render.grouped_bars(
            total,
            p,
            label_cols=["source", "request"],
            value_cols=["p50", "p95", "p99"],
            title="TotalTimeMs over the period",
            ylabel="ms",
            log=True,
        ),
    )
    split = _split(period)
    _chart(
        out,
        charts,
        s,
        "latency_split.png",
        lambda p: render.grouped_bars(
            split,
            p,
            label_cols=["source", "request"],
            value_cols=[c for c in SPLIT if c in split],
            title="p99 of the parts of a request (Kafka's RequestMetrics split)",
            ylabel="ms",
            log=True,
        ),
    )
    windows = t["request_latency_windows"]
    windows = windows[windows["metric"] == "TotalTimeMs"] if not windows.empty else windows
    _chart(
        out,
        charts,
        s,
        "latency_over_time.png",
        lambda p: render.lines_chart(
            windows,
            p,
            value="p99",
            series=["source", "request"],
            title="TotalTimeMs p99",
            ylabel="ms",
        ),
    )
    if period.empty:
        s.notes.append("No RequestMetrics histograms in this period.")
    _table(s, t, "request_latency", "Quantiles over the period (ms)")
    return s


SPLIT = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs")


def _split(period: pd.DataFrame) -> pd.DataFrame:
    if period.empty:
        return period
    parts = period[period["metric"].isin(SPLIT)]
    if parts.empty:
        return parts
    return parts.pivot_table(
        index=["source", "request"], columns="metric", values="p99"
    ).reset_index()


def replication(t: Tables, out: Path, charts: list[str]) -> Section:
    s = Section("Under-replicated and offline partitions; ISR changes", "replication")
    health = t["partition_health"]
    _chart(
        out,
        charts,
        s,
        "partition_health.png",
        lambda p: render.lines_chart(
            health,
            p,
            value="value",
            series=["source"],
            panels="metric",
            title="Partitions",
            ylabel="partitions",
        ),
    )
    if health.empty:
        s.notes.append("No ReplicaManager or KafkaController gauges in this period.")
    if t["isr_changes"].empty:
        s.notes.append("No ISR shrink or expand events in this period.")
    _table(s, t, "partition_health_peaks", "Peaks")
    _table(s, t, "isr_changes", "ISR shrink and expand events")
    _table(s, t, "isr_change_counts", "IsrShrinksPerSec / IsrExpandsPerSec counted")
    return s


def elections(t: Tables, out: Path, charts: list[str]) -> Section:
    s = Section("Leader elections and the controller's queue", "elections")
    causes = t["elections_by_cause"]
    _chart(
        out,
        charts,
        s,
        "elections_by_cause.png",
        lambda p: render.grouped_bars(
            causes,
            p,
            label_cols=["cause"],
            value_cols=["elections", "unclean"],
            title="Partition leader elections by cause",
            ylabel="elections",
        ),
    )
    _chart(
        out,
        charts,
        s,
        "election_time.png",
        lambda p: render.distribution_chart(
            t["election_time_distribution"],
            p,
            title="LeaderElectionRateAndTimeMs: time per broker change (ms)",
        ),
    )
    _chart(
        out,
        charts,
        s,
        "controller_queue.png",
        lambda p: render.lines_chart(
            t["controller_queue_size"],
            p,
            value="value",
            series=["source"],
            title="EventQueueSize",
            ylabel="events",
        ),
    )
    _chart(
        out,
        charts,
        s,
        "controller_queue_wait.png",
        lambda p: render.lines_chart(
            t["controller_queue_wait_windows"],
            p,
            value="p99",
            series=["source"],
            title="EventQueueTimeMs p99",
            ylabel="ms",
        ),
    )
    if causes.empty:
        s.notes.append("No leader elections in this period.")
    if t["controller_queue_size"].empty:
        s.notes.append("No controller event-queue metrics in this period.")
    _table(s, t, "elections_by_cause", "Elections by cause")
    _table(s, t, "election_time_quantiles", "LeaderElectionRateAndTimeMs quantiles (ms)")
    _table(s, t, "controller_queue_wait", "EventQueueTimeMs quantiles (ms)")
    _table(s, t, "controller_event_types", "Controller events by type (ms)")
    _table(s, t, "leader_elections", "Elections")
    return s


def failovers(t: Tables, out: Path, charts: list[str], history_ops: int) -> Section:
    s = Section("Failovers: what slows leader switching", "failovers")
    timeline = t["failover_timeline"]
    _chart(out, charts, s, "failovers.png", lambda p: render.failover_chart(timeline, p))
    if history_ops == 0:
        s.notes.append(
            "No chaos history in this period: fault times are each broker's last sign of life "
            "(its last log event or metrics snapshot), and client unavailability is unknown."
        )
    if timeline.empty:
        s.notes.append("No broker failure detected in this period.")
    _table(s, t, "failover_phases", "What slows leader switching: phases over all failovers")
    _table(s, t, "failover_timeline", "Failover timeline (phases in ms)")
    _table(s, t, "failover_elections", "Elections per failover, with propagation")
    _table(s, t, "failover_unavailability", "Client-observed unavailability per partition")
    return s


def sections(t: Tables, out: Path, history_ops: int) -> tuple[list[Section], list[str]]:
    """The page's sections in order, and every chart written (file names)."""
    charts: list[str] = []
    return [
        throughput(t, out, charts),
        latency(t, out, charts),
        replication(t, out, charts),
        elections(t, out, charts),
        failovers(t, out, charts, history_ops),
    ], charts
