"""History files (JSON Lines) round-trip every op kind, and bad lines are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.chaos.check.history import (
    CommitValue,
    History,
    NemesisValue,
    OpKind,
    OpType,
    PolledRecord,
    SendValue,
)
from deploy.chaos.check.history_files import history_records, read_history, write_history
from protocol.names import TopicPartition

TP = TopicPartition("t", 1)
ALL_BYTES = bytes(range(256))


def every_kind() -> History:
    h = History()
    s = h.invoke("producer-1", OpKind.SEND, SendValue("t", ALL_BYTES, key=b"\x00k"))
    h.complete(s, OpType.OK, SendValue("t", ALL_BYTES, b"\x00k", 1, 7))
    f = h.invoke("producer-1", OpKind.SEND, SendValue("t", b'x\n"y'))
    h.complete(f, OpType.FAIL, error="NOT_ENOUGH_REPLICAS")
    h.invoke("producer-2", OpKind.SEND, SendValue("t", b"never completed", partition=0))
    a = h.invoke("consumer-1", OpKind.ASSIGN, (TP,))
    h.complete(a, OpType.OK)
    k = h.invoke("consumer-1", OpKind.SEEK, {TP: 3})
    h.complete(k, OpType.OK)
    p = h.invoke("final-consumer", OpKind.POLL, ())
    h.complete(p, OpType.OK, (PolledRecord("t", 1, 7, ALL_BYTES, b"\x00k"),))
    c = h.invoke("consumer-1", OpKind.COMMIT, CommitValue("g", {TP: 8}))
    h.complete(c, OpType.INFO, error="timed out")
    h.nemesis(NemesisValue("partition", ("broker-1", "broker-2"), {"halves": [[1], [2, 3]]}))
    return h


def test_every_kind_round_trips(tmp_path: Path) -> None:
    h = every_kind()
    path = tmp_path / "history.jsonl"
    write_history(h, path)
    assert read_history(path).ops == h.ops
    assert len(path.read_text().splitlines()) == len(h.ops)


def test_a_bare_commit_mapping_reads_back_as_group_empty(tmp_path: Path) -> None:
    h = History()
    h.complete(h.invoke("c", OpKind.COMMIT, {TP: 5}), OpType.OK)
    write_history(h, tmp_path / "h")
    assert read_history(tmp_path / "h").ops[1].value == CommitValue("", {TP: 5})


def test_bytes_are_latin1_strings(tmp_path: Path) -> None:
    h = History()
    h.invoke("p", OpKind.SEND, SendValue("t", b"value-1"))
    write_history(h, tmp_path / "h")
    line = json.loads((tmp_path / "h").read_text())
    assert line["value"]["value"] == "value-1" and line["kind"] == "send"


def test_history_records_one_json_record_per_op() -> None:
    h = every_kind()
    records = list(history_records(h))
    assert len(records) == len(h.ops)
    assert records[0][0] == b"producer-1"
    assert json.loads(records[-1][1])["value"]["fault"] == "partition"


@pytest.mark.parametrize(
    "line, problem",
    [
        ("{not json", "not a history op"),
        ('{"index": 0}', "not a history op"),
        (
            '{"index":0,"time_ns":1,"process":"p","type":"ok","kind":"dance","value":null}',
            "not a history op",
        ),
        ('{"index":3,"time_ns":1,"process":"p","type":"ok","kind":"poll"}', "op index 3"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=rf"bad.jsonl:1: {problem}"):
        read_history(path)
