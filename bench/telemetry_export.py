"""A benchmark's telemetry as a spool that `trioka report --spool DIR` reads (analytics.spool).

    from telemetry_export import export_run            # bench/ is on sys.path in a benchmark
    counts = export_run(cluster.bootstrap, results / "zk-25000",
                        sampler_lines=lines, faults=[{"time": t_kill, "action": "kill",
                                                      "node": f"broker-{victim}"}])
    # before the cluster is torn down; then, for several runs (one per size):
    #   trioka report --spool results/zk-25000 --spool results/zk-50000 ... --out report/

`export_run` (synchronous: it runs its own trio loop; from inside trio call `aexport_run`) writes
under `out_dir`:

- `spool/cluster/<20-digit n>.jsonl`: every record of the cluster's telemetry topics
  (protocol.telemetry.TELEMETRY_TOPICS that exist), from each partition's log start to its end
  offset when the export began, read with the project's own Consumer by assignment (no group,
  nothing committed) and bounded by `deadline_s`; one line per record in the shipper's spool
  envelope `{"topic", "key", "value"}`, the value the record's JSON object as shipped.
- `spool/bench/<20-digit n>.jsonl`: the benchmark's own operations as chaos history ops
  (deploy.chaos.check.history_files' JSON, in the same envelope on `__trioka_chaos_history`),
  which analytics.schemas.parse_history reads:
  - each sampler line `{"topic", "partition", "sent", "done", "ok", "error"}`
    (bench/failover_sampler.py; wall-clock epoch seconds) is a send invoke at `sent` and its
    completion at `done`: type "ok" when acknowledged, else "info" (a failed acks=all write may
    still have landed) with the error; process `sampler-<topic>-<partition>`. The report's
    client-observed unavailability is the gap between a partition's last "ok" before the fault
    and its first after it (analytics.transforms.failovers).
  - each fault `{"time": epoch s, "action": "kill", "node": "broker-3"}` (optional "detail": a
    JSON object kept in the op's detail) is a nemesis op of type "info", fault = action,
    targets = [node], detail.action = action. The report takes the latest nemesis op against
    the detected broker ("broker-<id>", as failovers.py matches targets) before the detection
    as the fault time if its action is a fault (kill, pause, cut, ...), so record a restart of
    the victim as {"action": "restart", ...} (a heal, not a fault). A Raft controller is
    "controller-<id>".
  Every op carries `ts_ms` (epoch ms) and an epoch-ns `time_ns`, so it needs no clock alignment.

The return value counts what was written: per topic read, the sampler's and the faults' ops, and
whether every partition was read to its end before the deadline (`complete`).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import trio  # noqa: E402

from client import Admin, Consumer, ConsumerRecord  # noqa: E402
from deploy.chaos.check.history import NemesisValue, Op, OpKind, OpType, SendValue  # noqa: E402
from deploy.chaos.check.history_files import op_to_json  # noqa: E402
from protocol.names import TopicPartition  # noqa: E402
from protocol.telemetry import CHAOS_HISTORY_TOPIC, TELEMETRY_TOPICS  # noqa: E402

__all__ = [
    "SPOOL_DIR",
    "Segments",
    "aexport_run",
    "export_run",
    "fault_ops",
    "history_ops",
    "read_telemetry",
    "record_line",
    "sampler_ops",
    "write_history",
]

SPOOL_DIR = "spool"
"""out_dir/spool: the directory to give `trioka report --spool` (out_dir works too)."""
CLUSTER_DIR = "cluster"
BENCH_DIR = "bench"
SEGMENT_LINES = 200_000
"""Lines per segment file: a 50,000-partition run's logs topic holds millions of records."""
POLL_MS = 500
MAX_POLL = 10_000
DEFAULT_DEADLINE_S = 300.0


# -- the benchmark's operations as chaos history ops ------------------------------------------


def _at(seconds: float) -> tuple[int, int]:
    """(time_ns, ts_ms) of a wall-clock epoch time in seconds."""
    return round(seconds * 1e9), round(seconds * 1000)


def sampler_ops(lines: Iterable[Mapping[str, Any]]) -> Iterator[tuple[float, int, Op]]:
    """(time, order, op) of each sampler line's invoke and completion; the ops' index and
    invocation are placeholders until `history_ops` numbers them."""
    for n, line in enumerate(lines):
        topic, partition = str(line["topic"]), int(line["partition"])
        sent, done = float(line["sent"]), float(line["done"])
        process = f"sampler-{topic}-{partition}"
        value = SendValue(topic, b"", None, partition, None)
        ok = bool(line.get("ok"))
        error = None if ok else str(line.get("error") or "not acknowledged")
        time_ns, ts_ms = _at(sent)
        yield sent, 2 * n, Op(-1, time_ns, process, OpType.INVOKE, OpKind.SEND, value, ts_ms=ts_ms)
        time_ns, ts_ms = _at(done)
        completed = OpType.OK if ok else OpType.INFO
        yield done, 2 * n + 1, Op(-1, time_ns, process, completed, OpKind.SEND, value, error,
                                  invocation=2 * n, ts_ms=ts_ms)  # fmt: skip


def fault_ops(faults: Iterable[Mapping[str, Any]]) -> Iterator[tuple[float, int, Op]]:
    """(time, order, op) of each fault {"time", "action", "node"[, "detail"]} as a nemesis op."""
    for n, fault in enumerate(faults):
        at, action, node = float(fault["time"]), str(fault["action"]), str(fault["node"])
        if not math.isfinite(at) or not node or not action:
            raise ValueError(f"a fault needs a time, an action and a node: {dict(fault)!r}")
        detail = {**dict(fault.get("detail") or {}), "action": action}
        time_ns, ts_ms = _at(at)
        value = NemesisValue(action, (node,), detail)
        yield at, n, Op(-1, time_ns, "nemesis", OpType.INFO, OpKind.NEMESIS, value, ts_ms=ts_ms)


def history_ops(
    sampler_lines: Iterable[Mapping[str, Any]], faults: Iterable[Mapping[str, Any]]
) -> list[Op]:
    """The sampler's and the faults' ops as one history in time order, numbered from 0 (a
    completion's invocation is its invoke's index)."""
    timed = sorted(
        [(t, 0, order, op) for t, order, op in sampler_ops(sampler_lines)]
        + [(t, 1, order, op) for t, order, op in fault_ops(faults)],
        key=lambda item: item[:3],
    )
    index_of: dict[tuple[int, int], int] = {}
    out = []
    for index, (_t, source, order, op) in enumerate(timed):
        index_of[(source, order)] = index
        invocation = None if op.invocation is None else index_of[(source, op.invocation)]
        out.append(_renumbered(op, index, invocation))
    return out


def _renumbered(op: Op, index: int, invocation: int | None) -> Op:
    return Op(index, op.time_ns, op.process, op.type, op.kind, op.value, op.error, invocation,
              op.ts_ms)  # fmt: skip


def write_history(ops: Sequence[Op], spool_dir: Path) -> int:
    """`ops` as spool lines on the chaos history topic under `spool_dir`; returns the count."""
    with Segments(spool_dir) as out:
        for op in ops:
            out.write(_envelope(CHAOS_HISTORY_TOPIC, op.process, json.dumps(op_to_json(op))))
    return out.written


# -- spool files ---------------------------------------------------------------------------------


def _envelope(topic: str, key: str | None, value_json: str) -> str:
    """One spool line (analytics.spool's envelope) around a JSON object's text."""
    return f'{{"topic":{json.dumps(topic)},"key":{json.dumps(key)},"value":{value_json}}}'


class Segments:
    """Lines into `<20-digit n>.jsonl` segments of SEGMENT_LINES lines (0, 1, ...) under a
    directory, written as they come (a large run's records are not all held in memory)."""

    def __init__(self, spool_dir: Path) -> None:
        self.dir = spool_dir
        self.written = 0
        self._out: TextIO | None = None

    def __enter__(self) -> Segments:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def write(self, line: str) -> None:
        if self.written % SEGMENT_LINES == 0:
            self.close()
            segment = self.dir / f"{self.written // SEGMENT_LINES:020d}.jsonl"
            self._out = segment.open("w")  # closed by close(), at the next segment or the end
        assert self._out is not None
        self._out.write(line + "\n")
        self.written += 1

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


def record_line(record: ConsumerRecord) -> str | None:
    """A telemetry record as a spool line; None when its value is not a JSON object. The value's
    text is kept as shipped when it is one line (it is: compact JSON) rather than dumped again,
    and checked with orjson (the shipper's encoder): a large run's logs topic has millions."""
    value = record.value or b""
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    text = value.decode() if b"\n" not in value else orjson.dumps(parsed).decode()
    key = None if record.key is None else record.key.decode("utf-8", "replace")
    return _envelope(record.topic, key, text)


# -- reading the cluster's telemetry topics ------------------------------------------------------


async def _partitions(bootstrap: str) -> list[TopicPartition]:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        present = set(await admin.list_topics(include_internal=True))
        topics = [t for t in TELEMETRY_TOPICS if t in present]
        described = await admin.describe_topics(topics) if topics else []
    return [TopicPartition(t.name, p.partition) for t in described for p in t.partitions]


class _Reader:
    """The records of `tps` from their log start to their end offsets, by assignment."""

    def __init__(self, consumer: Consumer, ends: Mapping[TopicPartition, int]) -> None:
        self.consumer = consumer
        self.ends = dict(ends)
        self.positions: dict[TopicPartition, int] = {}

    def done(self) -> bool:
        return all(self.positions.get(tp, 0) >= end for tp, end in self.ends.items())

    async def read(self, sink: Segments, counts: dict[str, int]) -> None:
        """Write spool lines to `sink` until every partition reached its end (cancel it at
        the deadline: what was written stays)."""
        pending = {tp for tp, end in self.ends.items() if self.positions.get(tp, 0) < end}
        while pending:
            for record in await self.consumer.poll(POLL_MS, max_records=MAX_POLL):
                tp = TopicPartition(record.topic, record.partition)
                if record.offset >= self.ends.get(tp, 0):
                    continue  # shipped after the export began
                line = record_line(record)
                if line is None:
                    counts["skipped"] += 1
                    continue
                sink.write(line)
                counts[record.topic] += 1
            for tp in list(pending):
                self.positions[tp] = await self.consumer.position(tp)
                if self.positions[tp] >= self.ends[tp]:
                    pending.discard(tp)


async def read_telemetry(bootstrap: str, sink: Segments, deadline_s: float) -> dict[str, Any]:
    """Every telemetry record as a spool line into `sink`; counts: records per topic,
    `skipped` (values that are not JSON objects) and `complete`."""
    counts: dict[str, Any] = dict.fromkeys((*TELEMETRY_TOPICS, "skipped"), 0)
    with trio.move_on_after(deadline_s) as scope:
        tps = await _partitions(bootstrap)
        config = {"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "allow.auto.create.topics": False}  # fmt: skip
        async with Consumer(config) as consumer:
            starts = await consumer.beginning_offsets(tps)
            ends = await consumer.end_offsets(tps)
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, starts[tp])
            reader = _Reader(consumer, ends)
            reader.positions.update(starts)
            await reader.read(sink, counts)
    counts["complete"] = not scope.cancelled_caught
    return counts


# -- the whole export ----------------------------------------------------------------------------


async def aexport_run(
    bootstrap: str,
    out_dir: Path,
    *,
    sampler_lines: Sequence[Mapping[str, Any]],
    faults: Sequence[Mapping[str, Any]],
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> dict[str, Any]:
    """`export_run` inside a running trio loop."""
    spool = Path(out_dir) / SPOOL_DIR
    with Segments(spool / CLUSTER_DIR) as sink:
        counts = await read_telemetry(bootstrap, sink, deadline_s)
    counts["cluster_lines"] = sink.written
    ops = history_ops(sampler_lines, faults)
    counts["bench_ops"] = write_history(ops, spool / BENCH_DIR)
    counts["sampler_ops"] = sum(1 for op in ops if op.kind is OpKind.SEND)
    counts["fault_ops"] = sum(1 for op in ops if op.kind is OpKind.NEMESIS)
    counts["spool"] = str(spool)
    return counts


def export_run(
    bootstrap: str,
    out_dir: Path,
    *,
    sampler_lines: Sequence[Mapping[str, Any]],
    faults: Sequence[Mapping[str, Any]],
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> dict[str, Any]:
    """Write the cluster's telemetry and the benchmark's sampler outcomes and faults under
    `out_dir/spool` (the module docstring's layout); call it before the cluster is torn down.
    Returns counts: one per telemetry topic (records written), `skipped`, `complete` (every
    partition read to its end within `deadline_s`), `cluster_lines`, `bench_ops`,
    `sampler_ops`, `fault_ops` and `spool` (the directory for `trioka report --spool`)."""
    return trio.run(
        lambda: aexport_run(
            bootstrap, out_dir, sampler_lines=sampler_lines, faults=faults, deadline_s=deadline_s
        )
    )
