"""deploy/docker/monitoring/grafana/trioka.json: the dashboard shipped for Grafana users.

Every metric name a panel or a variable queries must be one trioka exports. The exported names
come from the real metric classes, each created on one fresh registry (nothing is started),
plus what prometheus_client's default registry adds in every process (process_*, python_gc_*)
and the GC pause histogram: rename a metric and this test names the panel that lost it. It also
checks that the dashboard imports anywhere (one Prometheus data source variable, used by every
panel and query) and still shows the series issue 17 asked for."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from broker.metrics import BrokerMetrics, RequestMetrics
from broker.metrics.socket_server import SocketServerMetrics
from controller.metrics import ControllerMetrics
from deploy.node.gc_policy import GC_PAUSES
from deploy.telemetry.event_loop import EventLoopMetrics
from protocol import metric_names as names
from raft.metrics import RaftMetrics

DASHBOARD = Path(__file__).parents[3] / "deploy/docker/monitoring/grafana/trioka.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("", "_count", "_sum"),
    "info": ("_info",),
}
"""A family's sample names: prometheus_client names a counter's family without `_total`."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"\$?[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "group_left", "group_right"}


def exported_names() -> set[str]:
    """Every sample name trioka's processes can export (each family's, by its type)."""
    registry = CollectorRegistry()
    BrokerMetrics.create(registry)
    RequestMetrics(registry)
    SocketServerMetrics(registry)
    ControllerMetrics(registry)
    RaftMetrics(registry)
    EventLoopMetrics(registry)
    ProcessCollector(registry=registry)  # prometheus_client's default registry's three
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)
    registry.register(GC_PAUSES)  # deploy.node.gc_policy's, on every node process
    found = set()
    for family in registry.collect():
        found.update(family.name + s for s in SAMPLE_SUFFIXES.get(family.type, ("",)))
        found.update(sample.name for sample in family.samples)
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once strings, label
    matchers, ranges, groupings and numbers are cut out, less functions (followed by a
    parenthesis), keywords and $variables."""
    text = _STRING.sub('""', expr)
    for pattern in (_MATCHERS, _RANGE, _GROUPING, _NUMBER):
        text = pattern.sub(" ", text)
    return {
        m.group()
        for m in _IDENTIFIER.finditer(text)
        if not text[m.end() :].lstrip().startswith("(")
        and not m.group().startswith("$")
        and m.group() not in _KEYWORDS
    }


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", ())  # a collapsed row holds its panels


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    for panel in panels(board):
        for target in panel.get("targets", ()):
            if "expr" in target:
                yield f"panel {panel['title']!r}", target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", text)
            yield f"variable {variable['name']!r}", inner.group(1) if inner else text


def test_the_name_extraction_reads_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (request, le) (rate(a_bucket{job=~"$job",x="{y}"}'
        "[$__rate_interval]))) / on (instance) group_left b_total * 100 + count(c)"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert metric_names("x") == {"x"}
    assert metric_names('topk(20, x_total{a="1"}) > 1e3') == {"x_total"}


def test_every_query_reads_a_metric_trioka_exports() -> None:
    exported = exported_names()
    board = dashboard()
    used: set[str] = set()
    for where, expr in queries(board):
        assert expr.count("(") == expr.count(")"), f"{where}: unbalanced {expr}"
        found = metric_names(expr)
        assert found, f"{where}: no metric in {expr}"
        assert found <= exported, f"{where}: not exported: {sorted(found - exported)}"
        used |= found
    # The series issue 17 asked the dashboard to show (a panel dropped fails here).
    wanted = {
        names.ACTIVE_CONTROLLER_COUNT,
        names.OFFLINE_PARTITIONS_COUNT,
        names.UNDER_REPLICATED_PARTITIONS,
        names.UNDER_MIN_ISR_PARTITION_COUNT,
        names.AT_MIN_ISR_PARTITION_COUNT,
        names.UNCLEAN_LEADER_ELECTIONS,
        names.MESSAGES_IN,
        names.BYTES_IN,
        names.BYTES_OUT,
        names.TOTAL_PRODUCE_REQUESTS,
        names.FAILED_PRODUCE_REQUESTS,
        names.TOTAL_FETCH_REQUESTS,
        names.FAILED_FETCH_REQUESTS,
        names.REQUEST_TIME_NAMES["TotalTimeMs"] + "_bucket",
        names.ISR_SHRINKS,
        names.ISR_EXPANDS,
        names.LEADER_ELECTION_RATE_AND_TIME + "_bucket",
        names.RAFT_CURRENT_LEADER,
        names.RAFT_CURRENT_EPOCH,
        names.RAFT_HIGH_WATERMARK,
        names.RAFT_COMMIT_LATENCY_AVG,
        names.CONSUMERGROUP_LAG_SUM,
        names.CONSUMERGROUP_LAG_MAX,
        names.REQUEST_HANDLER_AVG_IDLE_PERCENT,
        names.CONNECTION_COUNT,
        names.LOG_SIZE,
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        GC_PAUSES.describe()[0].name + "_sum",
    }
    assert wanted <= used, sorted(wanted - used)


def test_a_renamed_metric_would_be_caught() -> None:
    exported = exported_names()
    assert names.LOG_SIZE in exported and "kafka_log_log_sizes" not in exported
    assert names.TOTAL_FETCH_REQUESTS in exported  # a counter: its _total sample
    assert names.REQUEST_TIME_NAMES["TotalTimeMs"] + "_bucket" in exported


def test_it_imports_anywhere_through_one_prometheus_data_source_variable() -> None:
    board = dashboard()
    assert board["schemaVersion"] >= 36
    assert board["uid"] and board.get("id") is None
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["DS_PROMETHEUS"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]
