"""The full chaos checker on hand-made histories: each planted anomaly is named, alone; valid
histories that look suspicious pass."""

from __future__ import annotations

import itertools
import json

from deploy.chaos.check.checker import CheckResult, check
from deploy.chaos.check.history import (
    CommitValue,
    History,
    NemesisValue,
    OpKind,
    OpType,
    PolledRecord,
    SendValue,
)
from protocol.names import TopicPartition

T = "t"
TP0, TP1 = TopicPartition(T, 0), TopicPartition(T, 1)


def history() -> History:
    ticks = itertools.count()
    return History(clock_ns=lambda: next(ticks))


def send(
    h: History,
    value: bytes,
    outcome: OpType = OpType.OK,
    partition: int = 0,
    offset: int = 0,
    process: str = "producer",
) -> None:
    op = h.invoke(process, OpKind.SEND, SendValue(T, value))
    if outcome is OpType.OK:
        h.complete(op, OpType.OK, SendValue(T, value, partition=partition, offset=offset))
    else:
        h.complete(op, outcome, error="broken connection")


def poll(h: History, *records: tuple[int, int, bytes], process: str = "consumer") -> None:
    op = h.invoke(process, OpKind.POLL, ())
    h.complete(op, OpType.OK, tuple(PolledRecord(T, p, o, v) for p, o, v in records))


def assign(h: History, *tps: TopicPartition, process: str = "consumer") -> None:
    h.complete(h.invoke(process, OpKind.ASSIGN, tps), OpType.OK)


def commit(h: History, group: str, offsets: dict[TopicPartition, int]) -> None:
    h.complete(h.invoke("consumer", OpKind.COMMIT, CommitValue(group, offsets)), OpType.OK)


def base() -> History:
    """Six acknowledged writes over two partitions, all read by one consumer, then re-read
    from the beginning by a final reader."""
    h = history()
    assign(h, TP0, TP1)
    for i in range(6):
        send(h, b"v%d" % i, partition=i % 2, offset=i // 2)
    everything = [(i % 2, i // 2, b"v%d" % i) for i in range(6)]
    poll(h, *everything[:2])
    poll(h, *everything[2:])
    assign(h, TP0, TP1, process="final-0")
    poll(h, *sorted(everything), process="final-0")
    return h


def only(result: CheckResult, name: str) -> list[object]:
    """The examples of `name`, asserting it is the one anomaly found."""
    assert not result.valid
    found = result.anomalies()
    assert list(found) == [name], result.summary()
    assert result.to_json()["counts"][name] == len(found[name])
    assert list(result.to_json()["anomalies"]) == [name]
    assert f"  {name} " in result.summary()
    return found[name]


def test_the_base_history_is_valid_and_reports_as_json() -> None:
    result = check(base())
    assert result.valid, result.summary()
    verdict = result.to_json()
    json.dumps(verdict)
    assert verdict["valid"] is True
    assert verdict["anomalies"] == {}
    assert set(verdict["counts"].values()) == {0}
    assert verdict["stats"]["acknowledged"] == 6
    assert verdict["stats"]["final_reads"] is True
    assert result.summary().startswith("valid: 6 sent, 6 acknowledged, 6 read; no anomalies")


def test_lost_write() -> None:
    h = base()
    send(h, b"gone", partition=0, offset=3)
    send(h, b"after", partition=0, offset=4)
    poll(h, (0, 4, b"after"), process="final-1")
    (lost,) = only(check(h), "lost-write")
    assert (lost.value, lost.tp, lost.offset) == (b"gone", TP0, 3)


def test_unseen_is_an_anomaly_only_with_final_reads() -> None:
    h = base()
    send(h, b"tail", partition=1, offset=3)
    (unseen,) = only(check(h), "unseen")
    assert unseen.value == b"tail"
    h = history()
    send(h, b"a", offset=0)
    send(h, b"b", offset=1)
    poll(h, (0, 0, b"a"))
    result = check(h)
    assert result.valid, result.summary()
    assert result.counts()["unseen"] == 1 and [s.value for s in result.unread] == [b"b"]


def test_duplicate() -> None:
    h = base()
    poll(h, (0, 3, b"v4"), process="final-0")  # a retry wrote v4 again
    (dup,) = only(check(h), "duplicate")
    assert dup.copies == ((TP0, 2), (TP0, 3))


def test_inconsistent_offsets_between_two_reads() -> None:
    h = base()
    send(h, b"maybe", OpType.INFO)
    poll(h, (1, 2, b"maybe"), process="other")  # v5 is at t-1@2 by the others
    (bad,) = only(check(h), "inconsistent-offsets")
    assert (bad.tp, bad.offset, bad.values) == (TP1, 2, (b"maybe", b"v5"))


def test_inconsistent_offsets_between_an_ack_and_a_read() -> None:
    h = base()
    send(h, b"maybe", OpType.INFO)
    send(h, b"acked", partition=1, offset=3)
    poll(h, (1, 3, b"maybe"), process="final-0")
    poll(h, (1, 4, b"acked"), process="final-0")
    (bad,) = only(check(h), "inconsistent-offsets")
    assert (bad.tp, bad.offset, bad.values) == (TP1, 3, (b"acked", b"maybe"))


def test_aborted_read() -> None:
    h = base()
    send(h, b"refused", OpType.FAIL)
    poll(h, (0, 3, b"refused"), process="final-0")
    (bad,) = only(check(h), "aborted-read")
    assert (bad.value, bad.tp, bad.offset) == (b"refused", TP0, 3)


def test_nonmonotonic_send() -> None:
    h = history()
    send(h, b"a", offset=1)
    send(h, b"b", offset=0)
    poll(h, (0, 0, b"b"), (0, 1, b"a"), process="final-0")
    (bad,) = only(check(h), "nonmonotonic-send")
    assert (bad.process, bad.tp, bad.previous, bad.offset) == ("producer", TP0, 1, 0)


def test_nonmonotonic_poll() -> None:
    h = base()
    poll(h, (0, 1, b"v2"))  # the consumer went back without an assign or a seek
    (bad,) = only(check(h), "nonmonotonic-poll")
    assert (bad.process, bad.tp, bad.previous, bad.offset) == ("consumer", TP0, 2, 1)


def test_nonmonotonic_poll_within_one_poll() -> None:
    h = base()
    assign(h, TP0)
    poll(h, (0, 1, b"v2"), (0, 0, b"v0"))
    only(check(h), "nonmonotonic-poll")


def test_poll_skip() -> None:
    h = base()
    assign(h, TP0, process="skipper")
    poll(h, (0, 0, b"v0"), process="skipper")
    poll(h, (0, 2, b"v4"), process="skipper")
    (bad,) = only(check(h), "poll-skip")
    assert (bad.process, bad.tp, bad.previous, bad.offset, bad.skipped) == (
        "skipper",
        TP0,
        0,
        2,
        (1,),
    )


def test_commit_offset_backwards() -> None:
    h = base()
    commit(h, "g", {TP0: 3, TP1: 2})
    commit(h, "g", {TP0: 2})
    commit(h, "other-group", {TP0: 1})  # another group's commits are its own
    (bad,) = only(check(h), "commit-offset-backwards")
    assert (bad.group, bad.tp, bad.previous, bad.offset) == ("g", TP0, 3, 2)


def test_unexpected() -> None:
    h = base()
    poll(h, (1, 3, b"ghost"), process="final-0")
    (bad,) = only(check(h), "unexpected")
    assert bad.value == b"ghost"


def test_rereads_after_an_assign_or_a_seek_are_fine() -> None:
    h = base()
    assign(h, TP0, TP1)  # a rebalance gave the consumer its partitions again
    poll(h, (0, 0, b"v0"), (1, 0, b"v1"))
    seek = h.invoke("consumer", OpKind.SEEK, {TP0: 2})
    h.complete(seek, OpType.OK)
    poll(h, (0, 2, b"v4"), (1, 1, b"v3"))
    failed = h.invoke("consumer", OpKind.POLL, ())
    h.complete(failed, OpType.INFO, error="timed out")  # may have moved: state reset
    poll(h, (1, 0, b"v1"))
    result = check(h)
    assert result.valid, result.summary()


def test_failed_info_and_unfinished_sends_may_be_present_or_missing() -> None:
    h = base()
    send(h, b"failed", OpType.FAIL)
    send(h, b"info missing", OpType.INFO)
    send(h, b"info present", OpType.INFO)
    h.invoke("producer", OpKind.SEND, SendValue(T, b"never completed"))
    poll(h, (0, 3, b"info present"), process="final-0")
    result = check(h)
    assert result.valid, result.summary()
    assert result.stats["failed"] == 1 and result.stats["info"] == 2
    assert result.stats["info_read"] == 1 and result.stats["unfinished"] == 1


def test_gaps_no_one_knows_of_are_no_skips() -> None:
    h = history()
    send(h, b"a", offset=0)
    send(h, b"b", offset=5)  # offsets 1-4: records of failed or info sends, or markers
    poll(h, (0, 0, b"a"), (0, 5, b"b"), process="final-0")
    assert check(h).valid


def test_nemesis_ops_are_counted_and_ignored() -> None:
    h = base()
    h.nemesis(NemesisValue("kill", ("broker-2",), {"signal": "SIGKILL"}))
    result = check(h)
    assert result.valid and result.stats["nemesis"] == 1
    (op,) = [op for op in h.ops if op.kind is OpKind.NEMESIS]
    assert (op.process, op.type) == ("nemesis", OpType.INFO)


def test_a_bare_commit_mapping_is_group_empty() -> None:
    h = base()
    for offset in (3, 1):
        h.complete(h.invoke("consumer", OpKind.COMMIT, {TP0: offset}), OpType.OK)
    (bad,) = only(check(h), "commit-offset-backwards")
    assert bad.group == ""


def test_summary_shows_the_first_few_of_many() -> None:
    h = history()
    for i in range(8):
        send(h, b"v%d" % i, offset=i)
    poll(h, (0, 9, b"v8-never-sent"), process="final-0")
    summary = check(h).summary()
    assert summary.count("  lost-write ") == 5
    assert "... 3 more lost-write" in summary
