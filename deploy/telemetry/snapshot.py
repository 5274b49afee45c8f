"""A prometheus_client registry flattened into a MetricsSnapshot (protocol/telemetry.py).

Every sample of every collector as `/metrics` shows it (counters as `<name>_total`, histograms
as `_bucket`/`_count`/`_sum`). `/metrics` has no `_created` samples (serve_metrics turns them
off for the process); a registry that still has them (a process that serves no /metrics, a
test's own registry) has them left out here too: they hold the creation time of each series,
which no report uses, and they are about a third of a broker's samples. Also left out: the
`UNSHIPPED` families, per-partition series for Prometheus that no report reads (the log sizes:
25,000 samples, ~2 MB of JSON, per snapshot of a 25,000-partition broker).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.registry import Collector, CollectorRegistry

from protocol.metric_names import UNSHIPPED, shipping
from protocol.telemetry import MetricsSnapshot, Sample, Source, json_number

SKIPPED_SUFFIXES = ("_created",)


def samples_of(registry: CollectorRegistry | Collector) -> list[Sample]:
    """The registry's samples now (collectors run in the calling thread), with `shipping` set
    so that the UNSHIPPED families' collectors skip their work."""
    out = []
    token = shipping.set(True)
    try:
        for family in registry.collect():
            if family.name in UNSHIPPED:
                continue
            for s in family.samples:
                if s.name.endswith(SKIPPED_SUFFIXES) and family.type in ("counter", "histogram"):
                    continue
                out.append(Sample(s.name, dict(s.labels), json_number(float(s.value))))
    finally:
        shipping.reset(token)
    return out


def snapshot(
    registry: CollectorRegistry | Collector, source: Source, ts_ms: int
) -> MetricsSnapshot:
    return MetricsSnapshot(ts_ms=ts_ms, source=source, samples=samples_of(registry))


def sample_names(samples: Iterable[Sample]) -> set[str]:
    return {s.name for s in samples}
