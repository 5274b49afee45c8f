"""A synthetic telemetry spool for timing `trioka report`: N brokers and 3 controllers shipping
a metrics snapshot every INTERVAL for DURATION (default: one hour of a 3-broker cluster), with
user and internal topics, request-time histograms, replication gauges and ISR counters, broker 2
SIGKILLed for five minutes in the middle (no snapshots: a gap), and the log events that go with
it (isr shrink / expand, leader changes).

    .venv/bin/python bench/gen_report_telemetry.py /tmp/hour-spool [--minutes 60 --brokers 3]
    /usr/bin/time -v .venv/bin/trioka report --spool /tmp/hour-spool --out /tmp/hour-report

The metric names are protocol.metric_names' (jmx_exporter style); the spool format is the
shipper's (analytics.spool). Deterministic (seeded).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from protocol import metric_names as m  # noqa: E402
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC  # noqa: E402

START_MS = 1_795_900_000_000
USER_TOPICS = ("orders", "payments", "perf")
INTERNAL_TOPICS = ("__trioka_metrics", "__trioka_logs", "__consumer_offsets")
REQUESTS = ("Produce", "Fetch", "FetchConsumer", "Metadata", "OffsetCommit", "JoinGroup")
BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, float("inf"))


def _le(b: float) -> str:
    return "+Inf" if b == float("inf") else f"{float(b)}"


def broker_samples(state: dict, rng: random.Random) -> list[dict]:
    out: list[dict] = []
    for topic in USER_TOPICS + INTERNAL_TOPICS:
        n = rng.randint(50, 400) * (5 if topic.startswith("__") else 1)
        state[(m.MESSAGES_IN, topic)] = state.get((m.MESSAGES_IN, topic), 0) + n
        state[(m.BYTES_IN, topic)] = state.get((m.BYTES_IN, topic), 0) + n * 200
        state[(m.BYTES_OUT, topic)] = state.get((m.BYTES_OUT, topic), 0) + n * 150
        for name in (m.MESSAGES_IN, m.BYTES_IN, m.BYTES_OUT):
            out.append({"name": name, "labels": {"topic": topic}, "value": state[(name, topic)]})
    for request in REQUESTS:
        key = (m.REQUESTS, request)
        calls = rng.randint(10, 200)
        state[key] = state.get(key, 0) + calls
        out.append({"name": m.REQUESTS, "labels": {"request": request}, "value": state[key]})
        for family in m.REQUEST_TIME_NAMES.values():
            cum = 0
            for b in BUCKETS:
                k = (family, request, b)
                cum += calls // len(BUCKETS)
                state[k] = state.get(k, 0) + cum
                out.append({"name": family + "_bucket", "labels": {"request": request, "le": _le(b)},
                            "value": state[k]})  # fmt: skip
            for suffix, add in (("_count", calls), ("_sum", calls * 3.0)):
                k = (family + suffix, request)
                state[k] = state.get(k, 0) + add
                out.append({"name": family + suffix, "labels": {"request": request}, "value": state[k]})  # fmt: skip
    for name in (m.UNDER_REPLICATED_PARTITIONS, m.UNDER_MIN_ISR_PARTITION_COUNT,
                 m.AT_MIN_ISR_PARTITION_COUNT, m.LEADER_COUNT, m.PARTITION_COUNT):  # fmt: skip
        out.append({"name": name, "labels": {}, "value": float(state.get(name, 0))})
    for name in (m.ISR_SHRINKS, m.ISR_EXPANDS):
        out.append({"name": name, "labels": {}, "value": float(state.get(name, 0))})
    return out


def controller_samples(state: dict, rng: random.Random, active: bool) -> list[dict]:
    out = [
        {"name": m.ACTIVE_CONTROLLER_COUNT, "labels": {}, "value": 1.0 if active else 0.0},
        {"name": m.OFFLINE_PARTITIONS_COUNT, "labels": {}, "value": 0.0},
        {"name": m.EVENT_QUEUE_SIZE, "labels": {}, "value": float(rng.randint(0, 3))},
        {"name": m.GLOBAL_PARTITION_COUNT, "labels": {}, "value": 12.0},
    ]
    for family in (m.EVENT_QUEUE_TIME, m.LEADER_ELECTION_RATE_AND_TIME):
        cum = 0
        for b in BUCKETS:
            cum += rng.randint(0, 3)
            k = (family, b)
            state[k] = state.get(k, 0) + cum
            out.append({"name": family + "_bucket", "labels": {"le": _le(b)}, "value": state[k]})
    return out


def _envelope(key: str, topic: str, value: dict) -> str:
    return json.dumps({"topic": topic, "key": key, "value": value})


def generate(out: Path, minutes: int = 60, brokers: int = 3, interval_ms: int = 10_000) -> int:
    """Write the spool under `out`; returns the records written."""
    rng = random.Random(17)
    end_ms = START_MS + minutes * 60_000
    down = (START_MS + (end_ms - START_MS) // 2, START_MS + (end_ms - START_MS) // 2 + 300_000)
    written = 0
    nodes = [("broker", b) for b in range(1, brokers + 1)] + [
        ("controller", c) for c in (3001, 3002, 3003)
    ]
    for role, node in nodes:
        d = out / f"{role}-{node}"
        d.mkdir(parents=True, exist_ok=True)
        state: dict = {}
        seq = 0
        lines: list[str] = []
        key = f"{role}-{node}"
        for ts in range(START_MS, end_ms, interval_ms):
            if role == "broker" and node == 2 and down[0] <= ts < down[1]:
                continue  # SIGKILLed: ships nothing
            if role == "broker" and node != 2 and down[0] <= ts < down[0] + interval_ms:
                state[m.ISR_SHRINKS] = state.get(m.ISR_SHRINKS, 0) + 4
                state[m.UNDER_REPLICATED_PARTITIONS] = 4
                for p in range(4):
                    seq += 1
                    lines.append(_envelope(key, LOGS_TOPIC, {
                        "event": "isr shrink", "topic": USER_TOPICS[p % 3], "partition": p,
                        "leader_epoch": 3, "old_isr": [1, 2, 3], "new_isr": [1, 3],
                        "origin": "alter_partition", "node_id": node, "role": "broker",
                        "level": "info", "v": 1, "kind": "log", "ts_ms": ts + 500,
                        "seq": seq,
                    }))  # fmt: skip
            if role == "broker" and node != 2 and down[1] <= ts < down[1] + interval_ms:
                state[m.ISR_EXPANDS] = state.get(m.ISR_EXPANDS, 0) + 4
                state[m.UNDER_REPLICATED_PARTITIONS] = 0
            samples = (
                broker_samples(state, rng)
                if role == "broker"
                else controller_samples(state, rng, node == 3001)
            )
            lines.append(_envelope(key, METRICS_TOPIC, {
                "v": 1, "kind": "metrics", "ts_ms": ts,
                "source": {"role": role, "node_id": node, "host": "bench", "pid": 1},
                "samples": samples,
            }))  # fmt: skip
        (d / f"{1:020d}.jsonl").write_text("".join(line + "\n" for line in lines))
        written += len(lines)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--minutes", type=int, default=60)
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--interval-ms", type=int, default=10_000)
    ns = p.parse_args(argv)
    n = generate(ns.out, ns.minutes, ns.brokers, ns.interval_ms)
    print(f"{n} records under {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
