"""The report page's sections: which charts and tables each shows, and what it says when the
data for it is missing. Works on the tables already collected (pandas), by table name.

Each section is a row of SECTIONS (charts, notes, tables); `build` turns one into a Section,
so a new chart or table is one more line there, not another builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from analytics import render
from analytics.render import Section

Tables = dict[str, pd.DataFrame]
Frame = Callable[[Tables], pd.DataFrame]
Draw = Callable[[pd.DataFrame, Path], bool]
Condition = Callable[[Tables, int], bool]
"""Whether a note applies, given the tables and the number of chaos history ops."""

SPLIT = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs")


@dataclass(frozen=True, slots=True)
class Chart:
    file: str
    frame: Frame
    draw: Draw


@dataclass(frozen=True, slots=True)
class SectionSpec:
    title: str
    anchor: str
    charts: tuple[Chart, ...]
    notes: tuple[tuple[Condition, str], ...]
    tables: tuple[tuple[str, str], ...]
    """(table name, caption)."""


# -- frames, conditions and drawings the rows below name ---------------------------------------


def _table(name: str) -> Frame:
    return lambda t: t[name]


def _metric(name: str, metric: str) -> Frame:
    """The rows of one metric (an empty table may lack the column)."""

    def frame(t: Tables) -> pd.DataFrame:
        rows = t[name]
        return rows[rows["metric"] == metric] if not rows.empty else rows

    return frame


def _split(t: Tables) -> pd.DataFrame:
    """p99 of each part of a request, one column per part (Kafka's RequestMetrics split)."""
    period = t["request_latency"]
    if period.empty:
        return period
    parts = period[period["metric"].isin(SPLIT)]
    if parts.empty:
        return parts
    return parts.pivot_table(
        index=["source", "request"], columns="metric", values="p99"
    ).reset_index()


def _topics(name: str, *, internal: bool) -> Frame:
    """The rows of internal topics (their names start with `__`: trioka's telemetry, the group
    offsets) or of the users' topics, charted apart: the telemetry's volume dwarfs the rest."""

    def frame(t: Tables) -> pd.DataFrame:
        rows = t[name]
        if rows.empty:
            return rows
        return rows[rows["topic"].fillna("").str.startswith("__") == internal]

    return frame


def _empty(name: str) -> Condition:
    return lambda t, _history_ops: t[name].empty


NO_CLIENT_DATA = (
    "Client-observed unavailability: no client data (no acknowledged sends in the chaos history "
    "around these failovers)."
)


def _no_client_data(t: Tables, _history_ops: int) -> bool:
    """Failovers, but no partition's ack-to-ack gap: the table would be silently empty."""
    return not t["failover_timeline"].empty and t["failover_unavailability"].empty


def _no_history(_t: Tables, history_ops: int) -> bool:
    return history_ops == 0


def _lines(file: str, frame: Frame, **options: Any) -> Chart:
    return Chart(file, frame, partial(render.lines_chart, **options))


def _bars(file: str, frame: Frame, **options: Any) -> Chart:
    return Chart(file, frame, partial(render.grouped_bars, **options))


def _split_bars(split: pd.DataFrame, path: Path) -> bool:
    # The parts present decide the bars: a period without remote time has no RemoteTimeMs.
    return render.grouped_bars(
        split,
        path,
        label_cols=["source", "request"],
        value_cols=[c for c in SPLIT if c in split],
        title="p99 of the parts of a request (Kafka's RequestMetrics split)",
        ylabel="ms",
        log=True,
        panels="source",
    )


# -- the sections, in page order ----------------------------------------------------------------

_NO_HISTORY = (
    "No chaos history in this period: fault times are each broker's last sign of life "
    "(its last log event or metrics snapshot), and client unavailability is unknown."
)

SECTIONS: tuple[SectionSpec, ...] = (
    SectionSpec(
        "Throughput per broker and topic",
        "throughput",
        charts=(
            _lines("throughput_user.png", _topics("throughput", internal=False),
                   value="rate_per_s", series=["source"], panels=["metric", "topic"],
                   title="User topics: throughput per broker", ylabel="per second"),
            _lines("throughput_internal.png", _topics("throughput", internal=True),
                   value="rate_per_s", series=["source"], panels=["metric", "topic"],
                   title="Internal topics (__*): throughput per broker", ylabel="per second"),
        ),
        notes=((_empty("throughput"), "No BrokerTopicMetrics samples in this period."),),
        tables=(
            ("topic_records",
             "Records per topic: exact, from the log end offsets (log end - log start, now), "
             "beside the metrics' count and mean rate"),
            ("topic_totals", "Totals per topic (metric deltas over the period)"),
            ("broker_topic_rates", "Mean and peak rates per broker and topic"),
        ),
    ),
    SectionSpec(
        "Request latency (p50 / p95 / p99) per API and broker",
        "latency",
        charts=(
            _bars("latency_total.png", _metric("request_latency", "TotalTimeMs"),
                  label_cols=["source", "request"], value_cols=["p50", "p95", "p99"],
                  title="TotalTimeMs over the period", ylabel="ms", log=True,
                  panels="source"),
            Chart("latency_split.png", _split, _split_bars),
            _lines("latency_over_time.png", _metric("request_latency_windows", "TotalTimeMs"),
                   value="p99", series=["request"], panels="source", title="TotalTimeMs p99",
                   ylabel="ms"),
        ),
        notes=((_empty("request_latency"), "No RequestMetrics histograms in this period."),),
        tables=(("request_latency", "Quantiles over the period (ms)"),),
    ),
    SectionSpec(
        "Under-replicated and offline partitions; ISR changes",
        "replication",
        charts=(
            _lines("partition_health.png", _table("partition_health"), value="value",
                   series=["source"], panels="metric", title="Partitions", ylabel="partitions"),
        ),
        notes=(
            (_empty("partition_health"),
             "No ReplicaManager or KafkaController gauges in this period."),
            (_empty("isr_changes"), "No ISR shrink or expand events in this period."),
        ),
        tables=(
            ("partition_health_peaks", "Peaks"),
            ("isr_changes", "ISR shrink and expand events"),
            ("isr_change_counts",
             "ISR changes per broker: IsrShrinksPerSec / IsrExpandsPerSec counted (changes: "
             "the leader's own AlterPartition only, as Kafka's) beside the events it logged "
             "(events: any origin, the table above; events_proposed: its AlterPartition)"),
        ),
    ),
    SectionSpec(
        "Leader elections and the controller's queue",
        "elections",
        charts=(
            _bars("elections_by_cause.png", _table("elections_by_cause"), label_cols=["cause"],
                  value_cols=["elections", "unclean"],
                  title="Partition leader elections by cause", ylabel="elections"),
            Chart("election_time.png", _table("election_time_distribution"),
                  partial(render.distribution_chart,
                          title="LeaderElectionRateAndTimeMs: time per broker change (ms)")),
            _lines("controller_queue.png", _table("controller_queue_size"), value="value",
                   series=["source"], title="EventQueueSize", ylabel="events"),
            _lines("controller_queue_wait.png", _table("controller_queue_wait_windows"),
                   value="p99", series=["source"], title="EventQueueTimeMs p99", ylabel="ms"),
        ),
        notes=(
            (_empty("elections_by_cause"), "No leader elections in this period."),
            (_empty("controller_queue_size"),
             "No controller event-queue metrics in this period."),
        ),
        tables=(
            ("elections_by_cause", "Elections by cause"),
            ("election_time_quantiles", "LeaderElectionRateAndTimeMs quantiles (ms)"),
            ("controller_queue_wait", "EventQueueTimeMs quantiles (ms)"),
            ("controller_event_types", "Controller events by type (ms)"),
            ("leader_elections", "Elections"),
        ),
    ),
    SectionSpec(
        "Failovers: what slows leader switching",
        "failovers",
        charts=(
            Chart("failovers.png", _table("failover_timeline"), render.failover_chart),
        ),
        notes=(
            (_no_history, _NO_HISTORY),
            (_empty("failover_timeline"), "No broker failure detected in this period."),
            (_no_client_data, NO_CLIENT_DATA),
        ),
        tables=(
            ("failover_phases", "What slows leader switching: phases over all failovers"),
            ("failover_timeline", "Failover timeline (phases in ms)"),
            ("failover_elections", "Elections per failover, with propagation and apply"),
            ("failover_unavailability", "Client-observed unavailability per partition"),
        ),
    ),
    SectionSpec(
        "Failovers by cluster size",
        "failover-sizes",
        charts=(
            Chart("failovers_by_size.png", _table("failover_sizes"), render.size_chart),
        ),
        notes=(
            (_empty("failover_sizes"),
             "No failover with a known cluster size in this period (no GlobalPartitionCount "
             "or LeaderCount snapshot before a detection)."),
        ),
        tables=(
            ("failover_sizes",
             "Per cluster size: failovers, the median of each phase (ms), the clients' median "
             "and max gap (ms)"),
        ),
    ),
)  # fmt: skip


def build(spec: SectionSpec, t: Tables, out: Path, history_ops: int) -> Section:
    """One section: its charts drawn into `out` (those with nothing to draw left out), the
    notes that apply, its tables."""
    s = Section(spec.title, spec.anchor)
    for chart in spec.charts:
        if chart.draw(chart.frame(t), out / chart.file):
            s.charts.append(chart.file)
    s.notes.extend(text for applies, text in spec.notes if applies(t, history_ops))
    s.tables.extend((caption, name, t[name]) for name, caption in spec.tables if name in t)
    return s


def sections(t: Tables, out: Path, history_ops: int) -> tuple[list[Section], list[str]]:
    """The page's sections in order, and every chart written (file names)."""
    built = [build(spec, t, out, history_ops) for spec in SECTIONS]
    return built, [chart for section in built for chart in section.charts]
