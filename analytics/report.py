"""The report: every table of the transforms written as Parquet (tables/<name>/) and CSV
(tables/<name>.csv), the charts (PNG) and report.html, from typed samples, events and ops.

`build_report` is the only entry point (analytics.job calls it). Counter increases and
histogram buckets are computed over all the data given, then cut to [start, end): a snapshot
just before `start` is the baseline of the first one inside. Without `start` a series' first
sample counts from zero (the data begins with the processes); with it, a series' first sample is
only a baseline (see analytics.transforms.series).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics import render, report_sections
from analytics.progress import Progress, silent
from analytics.schemas import FAILOVER_OPS_SCHEMA
from analytics.transforms import elections as el
from analytics.transforms import replication as rep
from analytics.transforms.failovers import failovers, per_size, phase_breakdown
from analytics.transforms.history import with_wall_clock
from analytics.transforms.latency import request_buckets, request_latency
from analytics.transforms.series import between, dedupe_events, dedupe_samples
from analytics.transforms.throughput import broker_topic_rates, throughput, topic_totals

TITLE = "trioka cluster report"
MIN_WINDOW_MS = 10_000  # the shipper's default metrics.interval.ms: finer windows are empty
WINDOWS_PER_PERIOD = 40


@dataclass(frozen=True, slots=True)
class FailoverSummary:
    """One failover's phases in ms (None where the data does not say)."""

    failover_id: int
    broker_id: int
    controller: str
    fault_from: str | None
    fault_ms: int | None
    detected_ms: int
    detect_ms: float | None
    queue_ms: float | None
    election_ms: float | None
    propagation_ms: float | None
    """Commit/propagation: from the election to the new leader's receiving it."""
    apply_ms: float | None
    """Broker apply: from the new leader's receiving the change to its applying it."""
    unavailability_ms: float | None
    elections: int
    partitions: int | None = None
    """The cluster's partitions at the detection (the failover's size)."""


@dataclass(frozen=True, slots=True)
class ReportSummary:
    """The report's headline numbers, for people (the page's top) and tests."""

    out_dir: Path
    html: Path
    start_ms: int | None
    end_ms: int | None
    records_in: dict[str, int]
    bytes_in: dict[str, int]
    bytes_out: dict[str, int]
    elections: int
    elections_by_cause: dict[str, int]
    unclean_elections: int
    isr_shrinks: int
    isr_expands: int
    max_under_replicated: float | None
    max_offline_partitions: float | None
    failovers: list[FailoverSummary]
    slowest_phase: str | None
    """The failover phase with the largest mean (detect, queue, election, propagation,
    apply)."""
    history_ops: int
    tables: dict[str, int] = field(default_factory=dict)
    """Rows per written table."""
    charts: list[str] = field(default_factory=list)
    log_records: dict[str, int] | None = None
    """Records per topic in the log (log end offset - log start offset, summed over its
    partitions) when the cluster was asked (analytics.job does); exact whatever was killed,
    where records_in (metric deltas) misses what no snapshot shipped. Not cut to the period."""


def to_ms(when: datetime | int | float | None) -> int | None:
    """Epoch milliseconds of a bound (a datetime, or already epoch ms); None stays open."""
    if when is None:
        return None
    if isinstance(when, datetime):
        return int(when.timestamp() * 1000)
    return int(when)


def window_for(start_ms: int | None, end_ms: int | None) -> int:
    """About WINDOWS_PER_PERIOD windows over the period, in whole multiples of 10 s."""
    if start_ms is None or end_ms is None or end_ms <= start_ms:
        return MIN_WINDOW_MS
    per = (end_ms - start_ms) / WINDOWS_PER_PERIOD
    return max(MIN_WINDOW_MS, int(-(-per // MIN_WINDOW_MS)) * MIN_WINDOW_MS)


def _span(frames: list[DataFrame]) -> tuple[int | None, int | None]:
    lows, highs = [], []
    for frame in frames:
        row = frame.agg(F.min("ts_ms").alias("lo"), F.max("ts_ms").alias("hi")).first()
        if row is not None and row.lo is not None:
            lows.append(row.lo)
            highs.append(row.hi)
    return (min(lows), max(highs)) if lows else (None, None)


def _csv_value(value: Any) -> Any:
    if hasattr(value, "tolist"):
        value = value.tolist()
    return json.dumps(value) if isinstance(value, list | dict) else value


class ReportError(Exception):
    """A table of the report could not be computed: Spark failed (out of memory, a lost
    executor, ...). The message is one line: the table and the failure's first line."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """`exc`'s class name and the first non-blank line of its message (at most `limit`
    characters): a Spark failure's message goes on with the JVM's stack trace."""
    text = str(exc) if not isinstance(exc, Py4JError) else _py4j_message(exc)
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


WRAPPER_MESSAGES = ("Exception thrown in awaitResult",)
"""Java exceptions that only wrap the one that says what failed (their cause)."""


def _py4j_message(exc: Py4JError) -> str:
    """A Java exception's own line (class: message): the first in its cause chain that is
    not a wrapper (e.g. "SparkException: Not enough memory to build and broadcast the table
    ...", not "Exception thrown in awaitResult")."""
    java = getattr(exc, "java_exception", None)
    try:
        while java is not None:
            message = java.getMessage()
            cause = java.getCause()
            if cause is None or (message and not message.startswith(WRAPPER_MESSAGES)):
                return str(java.toString())
            java = cause
    except Py4JError:  # the JVM is gone
        pass
    return str(exc)


def write_table(frame: DataFrame, tables_dir: Path, name: str) -> pd.DataFrame:
    """tables/<name>/part-00000.parquet and tables/<name>.csv; returns the rows (pandas).
    Raises ReportError when Spark fails to compute the table."""
    try:
        table = frame.toArrow()
    except (PySparkException, Py4JError) as exc:
        raise ReportError(f"computing the table {name!r} failed: {first_line(exc)}") from exc
    return write_arrow(table, tables_dir, name)


def write_arrow(table: pa.Table, tables_dir: Path, name: str) -> pd.DataFrame:
    """write_table's files for rows already computed (not by Spark)."""
    target = tables_dir / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    pq.write_table(table, target / "part-00000.parquet")
    rows = table.to_pandas()
    csv = rows.copy()
    for col in csv.columns:
        if csv[col].dtype == object:
            csv[col] = csv[col].map(_csv_value)
    csv.to_csv(tables_dir / f"{name}.csv", index=False)
    return rows


def _tables(
    samples: DataFrame,
    events: DataFrame,
    ops: DataFrame,
    start_ms: int | None,
    end_ms: int | None,
    window_ms: int,
    cached: list[DataFrame],
) -> dict[str, DataFrame]:
    """Every table of the report, by name, cut to the period. Frames several tables are
    computed from are persisted and appended to `cached` (the caller unpersists them)."""
    zero = start_ms is None

    def cut(frame: DataFrame) -> DataFrame:
        return between(frame, start_ms, end_ms)

    # Frames two or more tables are computed from: each computed once (its window over the
    # samples is most of a table's cost), kept while the tables are written.
    rates = cut(throughput(samples, first_from_zero=zero)).persist()
    buckets = cut(request_buckets(samples, first_from_zero=zero)).persist()
    health = cut(rep.partition_health(samples)).persist()
    elections = cut(el.leader_elections(events)).persist()
    election_buckets = cut(el.election_time_buckets(samples, first_from_zero=zero)).persist()
    queue_buckets = cut(el.queue_wait_buckets(samples, first_from_zero=zero)).persist()
    isr_changes = cut(rep.isr_changes(events)).persist()
    cached += [rates, buckets, health, elections, election_buckets, queue_buckets, isr_changes]
    # Five tables come from the failovers: computed once (a large failover's elections and
    # propagation join hundreds of thousands of events).
    timeline, elected, gaps = (frame.persist() for frame in failovers(events, samples, ops))
    cached += [timeline, elected, gaps]
    ids = cut(timeline.withColumn("ts_ms", F.col("detected_ms"))).select("failover_id")
    in_period = timeline.join(ids, "failover_id", "left_semi").orderBy("failover_id")
    return {
        "throughput": rates,
        "topic_totals": topic_totals(rates),
        "broker_topic_rates": broker_topic_rates(rates),
        "request_latency": request_latency(buckets),
        "request_latency_windows": request_latency(buckets, window_ms=window_ms),
        "partition_health": health,
        "partition_health_peaks": rep.health_peaks(health),
        "isr_changes": isr_changes,
        "isr_change_counts": rep.isr_change_counts(
            cut(rep.isr_change_increases(samples, first_from_zero=zero)), isr_changes
        ),
        "leader_elections": elections,
        "elections_by_cause": el.elections_by_cause(elections),
        "election_time_distribution": el.election_time_distribution(election_buckets),
        "election_time_quantiles": el.election_time_quantiles(election_buckets),
        "controller_queue_size": cut(el.queue_size(samples)),
        "controller_queue_wait": el.queue_wait(queue_buckets),
        "controller_queue_wait_windows": el.queue_wait(queue_buckets, window_ms=window_ms),
        "controller_event_types": el.controller_event_types(cut(events)),
        "failover_timeline": in_period,
        "failover_phases": phase_breakdown(in_period),
        "failover_sizes": per_size(in_period),
        "failover_elections": elected.join(ids, "failover_id", "left_semi"),
        "failover_unavailability": gaps.join(ids, "failover_id", "left_semi"),
    }


def build_report(
    spark: SparkSession,
    samples: DataFrame,
    events: DataFrame,
    ops: DataFrame | None,
    out_dir: str | Path,
    start: datetime | int | None = None,
    end: datetime | int | None = None,
    *,
    window_ms: int | None = None,
    samples_deduplicated: bool = False,
    log_offsets: Sequence[tuple[str, int, int, int]] | None = None,
    progress: Progress = silent,
) -> ReportSummary:
    """Write out_dir/report.html, out_dir/*.png and out_dir/tables/ for [start, end) (epoch ms
    or datetimes; open when None) and return the headline numbers. `ops` may be None or empty
    (no chaos history); so may any input. `samples_deduplicated`: the caller dropped duplicate
    snapshots already (parse_metrics(dedupe=True)); `log_offsets`: (topic, partition, log start,
    log end) of every partition, asked of the cluster (analytics.source_client.log_offsets),
    the exact per-topic record counts (tables topic_log_offsets and topic_records; None: the
    counts are the metrics' only); `progress` is told each step."""
    out = Path(out_dir)
    tables_dir = out / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    start_ms, end_ms = to_ms(start), to_ms(end)
    if ops is None:
        ops = spark.createDataFrame([], FAILOVER_OPS_SCHEMA)
    if not samples_deduplicated:  # analytics.job dedupes whole snapshots, before the explode
        samples = dedupe_samples(samples)
    samples, events = samples.cache(), dedupe_events(events).cache()
    cached: list[DataFrame] = [samples, events]
    try:
        progress("span", "first and last sample")
        lo, hi = _span([between(samples, start_ms, end_ms), between(events, start_ms, end_ms)])
        period = (start_ms if start_ms is not None else lo, end_ms if end_ms is not None else hi)
        window = window_ms or window_for(*period)
        frames = _tables(samples, events, ops, start_ms, end_ms, window, cached)
        rows = {}
        for number, (name, frame) in enumerate(frames.items(), 1):
            progress("table", f"{name} ({number}/{len(frames)})")
            rows[name] = write_table(frame, tables_dir, name)
        history_ops = between(with_wall_clock(ops), start_ms, end_ms).count()
        if log_offsets is not None:
            progress("table", "topic_records (log end offsets)")
            offsets = offsets_table(log_offsets)
            rows["topic_log_offsets"] = write_arrow(offsets, tables_dir, "topic_log_offsets")
            records = topic_records(rows["topic_log_offsets"], rows["topic_totals"],
                                    rows["broker_topic_rates"])  # fmt: skip
            rows["topic_records"] = write_arrow(
                pa.Table.from_pandas(records, preserve_index=False), tables_dir, "topic_records"
            )
    finally:
        for frame in cached:
            # After a Spark failure (the JVM may be gone) the failure is what to report.
            with contextlib.suppress(PySparkException, Py4JError):
                frame.unpersist()
    progress("charts", str(out))
    sections, charts = report_sections.sections(rows, out, history_ops)
    summary = _summary(rows, out, period, history_ops, charts)
    if "topic_records" in rows:
        summary = replace(summary, log_records=_ints(rows["topic_records"], "topic", "records"))
    (out / "report.html").write_text(
        render.page(
            title=TITLE,
            period=_period_text(period, window),
            headline=headline(summary),
            sections=sections,
        ),
        encoding="utf-8",
    )
    return summary


OFFSETS_SCHEMA = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("log_start_offset", pa.int64()),
     ("log_end_offset", pa.int64())]
)  # fmt: skip


def offsets_table(log_offsets: Sequence[tuple[str, int, int, int]]) -> pa.Table:
    """The partitions' offsets as a table, with `records` (log end - log start)."""
    rows = sorted(log_offsets)
    table = pa.Table.from_pylist(
        [dict(zip(OFFSETS_SCHEMA.names, row, strict=True)) for row in rows], schema=OFFSETS_SCHEMA
    )
    records = pa.array([end - start for _, _, start, end in rows], pa.int64())
    return table.append_column("records", records)


def topic_records(offsets: pd.DataFrame, totals: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Per topic: internal (its name starts with `__`), partitions, records (exact: log end -
    log start summed over partitions), and beside them what the metrics say:
    messages_in_metrics (MessagesInPerSec increases over the period, which miss what no
    snapshot shipped) and messages_in_per_s (the brokers' mean rates summed)."""
    columns = ["topic", "internal", "partitions", "records", "messages_in_metrics",
               "messages_in_per_s"]  # fmt: skip
    if offsets.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    per = (
        offsets.groupby("topic")
        .agg(partitions=("partition", "count"), records=("records", "sum"))
        .reset_index()
    )
    per["internal"] = per["topic"].str.startswith("__")
    metric = (
        totals.set_index("topic")["messages_in"] if not totals.empty else pd.Series(dtype=float)
    )
    per["messages_in_metrics"] = per["topic"].map(metric).astype("Int64")
    if rates.empty:
        per["messages_in_per_s"] = float("nan")
    else:
        msgs = rates[rates["metric"] == "MessagesInPerSec"].groupby("topic")["mean_per_s"].sum()
        per["messages_in_per_s"] = per["topic"].map(msgs).astype(float)
    return per.sort_values(["internal", "topic"])[columns].reset_index(drop=True)


def _period_text(period: tuple[int | None, int | None], window_ms: int) -> str:
    lo, hi = period
    if lo is None:
        return "No telemetry in this period."
    return f"{render.utc(lo)} to {render.utc(hi)} UTC; time series in windows of {window_ms / 1000:g} s"


def _ints(frame: pd.DataFrame, key: str, value: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in zip(frame[key], frame[value], strict=True)}


def _peak(peaks: pd.DataFrame, metric: str) -> float | None:
    hit = peaks[peaks["metric"] == metric]
    return None if hit.empty else float(hit["max"].iloc[0])


def _optional(value: Any) -> Any:
    return None if value is None or pd.isna(value) else value


def _failover(row: Any) -> FailoverSummary:
    def ms(name: str) -> float | None:
        value = _optional(getattr(row, name))
        return None if value is None else float(value)

    fault_ms = _optional(row.fault_ms)
    partitions = _optional(row.partitions)
    return FailoverSummary(
        failover_id=int(row.failover_id),
        broker_id=int(row.broker_id),
        controller=str(row.controller),
        fault_from=_optional(row.fault_from),
        fault_ms=None if fault_ms is None else int(fault_ms),
        detected_ms=int(row.detected_ms),
        detect_ms=ms("detect_ms"),
        queue_ms=ms("queue_ms"),
        election_ms=ms("election_ms"),
        propagation_ms=ms("propagation_ms"),
        apply_ms=ms("apply_ms"),
        unavailability_ms=ms("unavailability_ms"),
        elections=int(row.elections),
        partitions=None if partitions is None else int(partitions),
    )


def _summary(
    rows: dict[str, pd.DataFrame],
    out: Path,
    period: tuple[int | None, int | None],
    history_ops: int,
    charts: list[str],
) -> ReportSummary:
    totals, causes, changes = rows["topic_totals"], rows["elections_by_cause"], rows["isr_changes"]
    phases = rows["failover_phases"]
    return ReportSummary(
        out_dir=out,
        html=out / "report.html",
        start_ms=period[0],
        end_ms=period[1],
        records_in=_ints(totals, "topic", "messages_in"),
        bytes_in=_ints(totals, "topic", "bytes_in"),
        bytes_out=_ints(totals, "topic", "bytes_out"),
        elections=int(causes["elections"].sum()),
        elections_by_cause=_ints(causes, "cause", "elections"),
        unclean_elections=int(causes["unclean"].sum()),
        isr_shrinks=int((changes["change"] == "shrink").sum()),
        isr_expands=int((changes["change"] == "expand").sum()),
        max_under_replicated=_peak(rows["partition_health_peaks"], "UnderReplicatedPartitions"),
        max_offline_partitions=_peak(rows["partition_health_peaks"], "OfflinePartitionsCount"),
        failovers=[_failover(r) for r in rows["failover_timeline"].itertuples()],
        slowest_phase=None if phases.empty else str(phases["phase"].iloc[0]),
        history_ops=history_ops,
        tables={name: len(frame) for name, frame in rows.items()},
        charts=charts,
    )


def _fmt_ms(value: float | None, none: str = "n/a") -> str:
    return none if value is None else f"{value:,.0f} ms"


def _fmt_count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def headline(summary: ReportSummary) -> list[tuple[str, str]]:
    counted = summary.records_in if summary.log_records is None else summary.log_records
    user_topics = {t: n for t, n in counted.items() if not t.startswith("__")}
    records = ", ".join(f"{t}: {n:,}" for t, n in sorted(user_topics.items())) or "none"
    source = "metric deltas" if summary.log_records is None else "log end offsets"
    causes = ", ".join(f"{c}: {n}" for c, n in summary.elections_by_cause.items()) or "none"
    out = [
        (f"Records (per user topic, from {source})", records),
        ("Bytes in (all topics)", f"{sum(summary.bytes_in.values()):,}"),
        ("Leader elections", f"{summary.elections} ({causes})"),
        ("Unclean elections", str(summary.unclean_elections)),
        ("ISR shrinks / expands", f"{summary.isr_shrinks} / {summary.isr_expands}"),
        (
            "Max under-replicated partitions",
            _fmt_count(summary.max_under_replicated),
        ),
        ("Max offline partitions", _fmt_count(summary.max_offline_partitions)),
        ("Failovers", str(len(summary.failovers))),
        ("Slowest failover phase (mean)", summary.slowest_phase or "n/a"),
        ("Chaos history ops", str(summary.history_ops)),
    ]
    for f in summary.failovers:
        size = "" if f.partitions is None else f", {f.partitions:,} partitions"
        out.append(
            (
                f"Failover #{f.failover_id} (broker {f.broker_id}{size})",
                f"detect {_fmt_ms(f.detect_ms)}, queue {_fmt_ms(f.queue_ms)}, election "
                f"{_fmt_ms(f.election_ms)}, commit/propagation {_fmt_ms(f.propagation_ms)}, "
                f"broker apply {_fmt_ms(f.apply_ms)}; clients unavailable "
                f"{_fmt_ms(f.unavailability_ms, none='no client data')}",
            )
        )
    return out
