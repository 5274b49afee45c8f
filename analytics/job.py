"""The report job: telemetry topics (through format("trioka")) and local spools -> parsed,
filtered by time -> analytics.report.build_report -> DIR/report.html, PNGs, tables.

    trioka report --bootstrap-server 127.0.0.1:9092 --out reports/ [--from T --to T]
    PYSPARK_PYTHON=.venv/bin/python spark-submit analytics/job.py -b 127.0.0.1:9092 --out reports/

T is ISO 8601 (`2026-11-26T10:00:00Z`; no zone means UTC) or epoch milliseconds; samples and
events with from <= ts < to are kept. Chaos history ops are not filtered (their times are a
run's monotonic clock); start and end go to build_report too. Exit status: 0 done, 1 an error
(unreachable cluster, bad spool, a Spark failure such as running out of memory: one line on
stderr naming what failed, no traceback), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

if __name__ == "__main__" and __package__ in (None, ""):
    # `spark-submit analytics/job.py` puts analytics/ on sys.path, not the project root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from py4j.protocol import Py4JError
from pyspark import SparkConf
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics.progress import Progress, ProgressLines, silent
from analytics.report import ReportError, ReportSummary, build_report, first_line, headline
from analytics.schemas import (
    RAW_SCHEMA,
    parse_history,
    parse_logs,
    parse_metrics,
)
from analytics.source import FORMAT, register
from analytics.source_client import SourceReadError, existing_topics, log_offsets
from analytics.source_options import SourceOptionError
from analytics.spool import SpoolError, read_spool
from protocol.telemetry import (
    CHAOS_HISTORY_TOPIC,
    LOGS_TOPIC,
    METRICS_TOPIC,
    TELEMETRY_TOPICS,
)

DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = 4
SPARK_CONF_DIR = Path(__file__).with_name("spark_conf")
"""Its log4j2.properties keeps Spark's logging at ERROR from the JVM's start (no banner
hiding the progress lines); spark-class puts SPARK_CONF_DIR on the driver's classpath."""
DRIVER_MEMORY = "4g"
"""The driver JVM's heap when this process starts it (no spark-submit --driver-memory or
spark.driver.memory given). In local mode the driver is the executor too: it holds the cached
telemetry and runs every task. Spark's default 1g ran out on a 25,000-partition benchmark's
telemetry plus six smaller runs' (430 MB of spools): "Not enough memory to build and broadcast
the table" once the heap was full of cached blocks."""


@dataclass(frozen=True, slots=True)
class JobArgs:
    out: Path
    bootstrap_server: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    spools: tuple[Path, ...] = ()
    master: str | None = None


@dataclass(frozen=True, slots=True)
class Inputs:
    """The parsed, time-filtered telemetry (cached: the report runs many actions on it)."""

    samples: DataFrame
    events: DataFrame
    ops: DataFrame


def parse_time(text: str) -> datetime:
    """ISO 8601 (naive means UTC) or epoch milliseconds -> an aware UTC datetime."""
    value = text.strip()
    if value.isdigit():
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: ISO 8601 (2026-11-26T10:00:00Z) or epoch milliseconds"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trioka report", description="Telemetry of a trioka cluster -> an HTML report."
    )
    p.add_argument(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT[,...]",
        help="read the telemetry topics from this cluster",
    )
    p.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="report.html, *.png and tables/ go here",
    )
    p.add_argument(
        "--from",
        dest="start",
        type=parse_time,
        metavar="T",
        help="keep telemetry at or after T (ISO 8601 or epoch ms)",
    )
    p.add_argument(
        "--to",
        dest="end",
        type=parse_time,
        metavar="T",
        help="keep telemetry before T (ISO 8601 or epoch ms)",
    )
    p.add_argument(
        "--spool",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="a local telemetry spool directory to read too (repeatable)",
    )
    p.add_argument(
        "--master", default=None, help=f"Spark master (default {DEFAULT_MASTER}, or spark-submit's)"
    )
    return p  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> JobArgs:
    p = parser()
    ns = p.parse_args(argv)
    if not ns.bootstrap_server and not ns.spool:
        p.error("give --bootstrap-server, --spool DIR, or both")
    if ns.start and ns.end and ns.start >= ns.end:
        p.error(f"--from {ns.start.isoformat()} is not before --to {ns.end.isoformat()}")
    for spool in ns.spool:
        if not spool.is_dir():
            p.error(f"--spool {str(spool)!r} does not exist or is not a directory")
    return JobArgs(ns.out, ns.bootstrap_server, ns.start, ns.end, tuple(ns.spool), ns.master)


def build_session(master: str | None = None) -> SparkSession:
    """A quiet Spark session whose Python workers run this interpreter (and register the
    trioka source). Under spark-submit its master is kept unless `master` is given."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if SPARK_CONF_DIR.is_dir():  # spark-submit's own SPARK_CONF_DIR, if set, stays
        os.environ.setdefault("SPARK_CONF_DIR", str(SPARK_CONF_DIR))
    builder = (
        SparkSession.builder.appName("trioka-report")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # A few MB of telemetry on 2 local cores: Spark's default of 200 shuffle partitions
        # made every groupBy/window 200 tasks, most of the job's time (docs/benchmarks.md).
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.default.parallelism", str(SHUFFLE_PARTITIONS))
        .config(
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum", str(SHUFFLE_PARTITIONS)
        )
    )
    conf = SparkConf()
    if master is not None:
        builder = builder.master(master)
    elif not conf.contains("spark.master"):  # spark-submit's --master stays
        builder = builder.master(DEFAULT_MASTER)
    if not conf.contains("spark.driver.memory"):  # taken only when the JVM starts here
        builder = builder.config("spark.driver.memory", DRIVER_MEMORY)
    spark = builder.getOrCreate()
    # FATAL, not ERROR: a failed task or broadcast would log its JVM stack trace to stderr;
    # main reports a Spark failure itself, in one line.
    spark.sparkContext.setLogLevel("FATAL")
    register(spark)
    return spark


def read_topic(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.read.format(FORMAT)
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")  # retention deletes old telemetry under a read
        .load()
    )


def telemetry_topics(args: JobArgs) -> list[str]:
    """The telemetry topics that exist at the bootstrap server (none without one); asked
    before Spark starts, so an unreachable cluster fails in a second, not after the JVM."""
    if not args.bootstrap_server:
        return []
    return existing_topics(args.bootstrap_server, TELEMETRY_TOPICS)


def read_raw(spark: SparkSession, args: JobArgs, topics: Sequence[str] | None = None) -> DataFrame:
    """Every telemetry record: the telemetry topics at the bootstrap server + the spools."""
    raw = spark.createDataFrame([], RAW_SCHEMA)
    if args.bootstrap_server:
        for topic in telemetry_topics(args) if topics is None else topics:
            raw = raw.unionByName(read_topic(spark, args.bootstrap_server, topic))
    if args.spools:
        raw = raw.unionByName(read_spool(spark, args.spools))
    return raw


LOOKBACK = timedelta(minutes=10)
"""How far before --from the job keeps samples and events (build_report's baselines)."""


def in_window(df: DataFrame, start: datetime | None, end: datetime | None) -> DataFrame:
    """Rows with start <= ts < end (either bound may be None)."""
    if start is not None:
        df = df.where(F.col("ts") >= F.lit(start))
    if end is not None:
        df = df.where(F.col("ts") < F.lit(end))
    return df


def load_inputs(
    spark: SparkSession,
    args: JobArgs,
    topics: Sequence[str] | None = None,
    progress: Progress = silent,
) -> Inputs:
    progress("read", ", ".join([*(topics or ()), *(str(s) for s in args.spools)]) or "nothing")
    raw = read_raw(spark, args, topics).persist()
    raw.count()  # one read of the cluster: every table of the report sees the same records
    # build_report cuts to [start, end) itself; it needs what came just before `start` too: the
    # snapshot that is the baseline of a counter's first increase inside, a fault's last signs.
    since = None if args.start is None else args.start - LOOKBACK
    metrics = raw.where(F.col("topic") == METRICS_TOPIC)
    samples = in_window(parse_metrics(metrics, dedupe=True), since, args.end)
    events = in_window(parse_logs(raw.where(F.col("topic") == LOGS_TOPIC)), since, args.end)
    ops = parse_history(raw.where(F.col("topic") == CHAOS_HISTORY_TOPIC))
    inputs = Inputs(samples.persist(), events.persist(), ops.persist())
    progress("parse", "samples, events, chaos history ops")
    for frame in (inputs.samples, inputs.events, inputs.ops):
        frame.count()  # parsed from the cached records once...
    raw.unpersist()  # ...which then free their memory (the raw JSON is most of it)
    return inputs


def run(
    spark: SparkSession,
    args: JobArgs,
    topics: Sequence[str] | None = None,
    progress: Progress = silent,
    offsets: Sequence[tuple[str, int, int, int]] | None = None,
) -> ReportSummary:
    """Read, parse, filter, report; returns build_report's ReportSummary. `topics`: the
    telemetry topics to read (default: those that exist)."""
    inputs = load_inputs(spark, args, topics, progress)
    args.out.mkdir(parents=True, exist_ok=True)
    return build_report(
        spark,
        inputs.samples,
        inputs.events,
        inputs.ops,
        args.out,
        start=args.start,
        end=args.end,
        samples_deduplicated=True,
        log_offsets=offsets,
        progress=progress,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)  # exits 2 on bad arguments
    progress = ProgressLines()
    try:
        progress(
            "list",
            f"telemetry topics at {args.bootstrap_server}"
            if args.bootstrap_server
            else "spools only",
        )
        topics = telemetry_topics(args)
        offsets = None
        if args.bootstrap_server:
            progress("offsets", "log start and end offsets of every partition")
            offsets = log_offsets(args.bootstrap_server)
        progress("start", "Spark session")
        spark = build_session(args.master)
        try:
            summary = run(spark, args, topics, progress, offsets)
        finally:
            progress("stop", "Spark session")
            spark.stop()
    except (SourceOptionError, SourceReadError, SpoolError, ReportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (PySparkException, Py4JError) as exc:  # reading or parsing, outside a table
        print(f"error: Spark failed: {first_line(exc)}", file=sys.stderr)
        return 1
    progress("done", str(args.out / "report.html"))
    print(f"report: {args.out / 'report.html'}")
    for label, value in headline(summary):
        print(f"  {label}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
