"""Property tests of the chaos checker over generated histories of a model log, and a large
history that must check in seconds."""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.chaos.check.checker import check
from deploy.chaos.check.history import History, OpKind, OpType, PolledRecord, SendValue
from protocol.names import TopicPartition

T = "t"
OUTCOMES = ("ok", "ok", "ok", "info-written", "info-lost", "fail")


@dataclass
class Model:
    """The log the generated history ran against: partition -> [(offset, value)]."""

    history: History
    log: dict[int, list[tuple[int, bytes]]]
    acked: list[tuple[int, int, bytes]]


def write(sends: list[tuple[int, str]], partitions: int) -> Model:
    ticks = itertools.count()
    h = History(clock_ns=lambda: next(ticks))
    log: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    acked = []
    for i, (partition, outcome) in enumerate(sends):
        value = b"v%d" % i
        op = h.invoke(f"producer-{i % 2}", OpKind.SEND, SendValue(T, value))
        if outcome in ("ok", "info-written"):
            log[partition].append((len(log[partition]), value))
        if outcome == "ok":
            offset = len(log[partition]) - 1
            h.complete(op, OpType.OK, SendValue(T, value, partition=partition, offset=offset))
            acked.append((partition, offset, value))
        elif outcome != "fail":
            h.complete(op, OpType.INFO, error="timed out")
        else:
            h.complete(op, OpType.FAIL, error="refused before sending")
    return Model(h, log, acked)


def read(model: Model, process: str, chunk: int) -> None:
    """`process` assigns itself every partition and polls them in chunks to the end."""
    h = model.history
    tps = tuple(TopicPartition(T, p) for p in model.log)
    h.complete(h.invoke(process, OpKind.ASSIGN, tps), OpType.OK)
    for p, records in model.log.items():
        for start in range(0, max(len(records), 1), chunk):  # an empty partition: one poll
            op = h.invoke(process, OpKind.POLL, ())
            got = tuple(PolledRecord(T, p, o, v) for o, v in records[start : start + chunk])
            h.complete(op, OpType.OK, got)


sends_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(OUTCOMES)), min_size=1, max_size=40
)


@settings(max_examples=60, deadline=None)
@given(sends=sends_strategy, chunks=st.lists(st.integers(1, 5), min_size=1, max_size=3))
def test_a_generated_valid_history_is_valid(
    sends: list[tuple[int, str]], chunks: list[int]
) -> None:
    model = write(sends, partitions=3)
    for i, chunk in enumerate(chunks):
        read(model, f"consumer-{i}", chunk)
    read(model, "final-reader", 3)
    result = check(model.history)
    assert result.valid, result.summary()
    assert result.acknowledged == len(model.acked)


@settings(max_examples=60, deadline=None)
@given(sends=sends_strategy, pick=st.integers(0, 10**6), chunk=st.integers(1, 5))
def test_deleting_an_acknowledged_record_is_caught(
    sends: list[tuple[int, str]], pick: int, chunk: int
) -> None:
    model = write([*sends, (0, "ok")], partitions=3)
    partition, offset, value = model.acked[pick % len(model.acked)]
    model.log[partition].remove((offset, value))
    read(model, "final-reader", chunk)
    result = check(model.history)
    assert not result.valid
    assert set(result.anomalies()) <= {"lost-write", "unseen", "poll-skip"}, result.summary()
    assert value in {w.value for w in result.lost} | {s.value for s in result.unseen}


@settings(max_examples=60, deadline=None)
@given(sends=sends_strategy, pick=st.integers(0, 10**6), to=st.integers(0, 2))
def test_duplicating_a_value_in_the_log_is_caught(
    sends: list[tuple[int, str]], pick: int, to: int
) -> None:
    model = write([*sends, (0, "ok")], partitions=3)
    _, _, value = model.acked[pick % len(model.acked)]
    model.log[to].append((len(model.log[to]), value))  # a retry wrote it again
    read(model, "final-reader", 2)
    result = check(model.history)
    assert list(result.anomalies()) == ["duplicate"], result.summary()
    assert [d.value for d in result.duplicates] == [value]


def big_history(ops: int, partitions: int = 8) -> Model:
    rng = random.Random(6)
    sends = [(rng.randrange(partitions), rng.choice(OUTCOMES)) for _ in range(ops // 3)]
    model = write(sends, partitions)
    read(model, "consumer-0", 1)  # ~2 ops per send, ~2 per record polled: ~3.4 per send
    read(model, "final-reader", 50)
    return model


def test_a_100k_op_history_checks() -> None:
    model = big_history(100_000)
    assert len(model.history.ops) >= 100_000
    started = time.perf_counter()
    result = check(model.history)
    print(f"checked {len(model.history.ops)} ops in {time.perf_counter() - started:.2f} s")
    assert result.valid, result.summary()
