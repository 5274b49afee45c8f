"""raft.wire: every core message survives core -> wire -> codec bytes -> wire -> core, and bad
wire input is refused with errors that name the problem."""

from __future__ import annotations

import pytest

from protocol.codec import (
    decode_request,
    decode_response_body,
    decode_response_header,
    encode_request,
    encode_response,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.messages import fetch as wf
from protocol.messages import vote as wv
from raft import wire
from raft.core import messages as cm
from raft.log_store import Entry, OffsetAndEpoch


def through_codec_request(request: Request) -> Request:
    return decode_request(encode_request(3, "t", request)[4:]).body


def through_codec_response(request: Request, response: Response) -> Response:
    corr, raw = decode_response_header(encode_response(3, response)[4:])
    assert corr == 3
    return decode_response_body(type(request).RESPONSE, raw)  # type: ignore[attr-defined, no-any-return]


REQUESTS: list[wire.CoreRequest] = [
    cm.VoteRequest(sender=2, epoch=7, last_epoch=5, end_offset=40, pre_vote=True),
    cm.VoteRequest(sender=3, epoch=8, last_epoch=6, end_offset=41),
    cm.BeginQuorumEpochRequest(sender=1, epoch=9, leader_id=1),
    cm.EndQuorumEpochRequest(sender=1, epoch=9, leader_id=1, preferred_successors=(3, 2)),
    cm.FetchRequest(sender=3, epoch=9, fetch_offset=12, last_fetched_epoch=8),
    cm.FetchSnapshotRequest(
        sender=2, epoch=9, snapshot_id=OffsetAndEpoch(100, 4), position=64, max_bytes=1024
    ),
]

ENTRIES = (Entry(12, 8, b"a"), Entry(13, 8, b""), Entry(14, 9, b"c" * 300), Entry(15, 9, b"d"))

# (the request each answers, the answer)
RESPONSES: list[tuple[wire.CoreRequest, wire.CoreResponse]] = [
    (REQUESTS[0], cm.VoteResponse(1, 7, -1, True, True, 7)),
    (REQUESTS[1], cm.VoteResponse(1, 8, 3, False, False, 8, ErrorCode.FENCED_LEADER_EPOCH)),
    (REQUESTS[2], cm.BeginQuorumEpochResponse(2, 9, 1)),
    (REQUESTS[3], cm.EndQuorumEpochResponse(3, 9, 1, ErrorCode.NONE)),
    (REQUESTS[4], cm.FetchResponse(1, 9, 1, 12, 8, entries=ENTRIES, high_watermark=14)),
    (
        REQUESTS[4],
        cm.FetchResponse(1, 9, 1, 12, 8, high_watermark=10, diverging_epoch=OffsetAndEpoch(11, 7)),
    ),
    (REQUESTS[4], cm.FetchResponse(1, 9, 1, 12, 8, snapshot_id=OffsetAndEpoch(50, 6))),
    (REQUESTS[4], cm.FetchResponse(2, 10, 3, 12, 8, error=ErrorCode.FENCED_LEADER_EPOCH)),
    (
        REQUESTS[5],
        cm.FetchSnapshotResponse(1, 9, 1, OffsetAndEpoch(100, 4), 64, size=200, data=b"x" * 100),
    ),
    (
        REQUESTS[5],
        cm.FetchSnapshotResponse(
            1, 9, 1, OffsetAndEpoch(100, 4), 64, error=ErrorCode.SNAPSHOT_NOT_FOUND
        ),
    ),
]


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_request_round_trip(msg: wire.CoreRequest) -> None:
    request = wire.request_to_wire(msg, to_node=1, cluster_id="c1")
    assert getattr(request, "cluster_id", None) == "c1"
    assert wire.request_from_wire(through_codec_request(request)) == msg


@pytest.mark.parametrize("sent,answer", RESPONSES, ids=lambda m: type(m).__name__)
def test_response_round_trip(sent: wire.CoreRequest, answer: wire.CoreResponse) -> None:
    request = wire.request_to_wire(sent, to_node=answer.sender, cluster_id=None)
    response = through_codec_response(request, wire.response_to_wire(answer))
    assert wire.response_to_core(sent, answer.sender, response) == answer


def test_entries_travel_as_one_batch_per_epoch() -> None:
    from protocol.record_batch import iter_batches

    data = wire.encode_entries(ENTRIES)
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch, h.records_count) for h in headers] == [
        (12, 8, 2),
        (14, 9, 2),
    ]
    assert wire.decode_entries(data) == ENTRIES
    assert wire.encode_entries(()) == b""


def test_request_naming_another_partition_is_refused() -> None:
    bad = wv.VoteRequest(
        topics=(
            wv.VoteTopic(
                topic_name="orders",
                partitions=(
                    wv.VotePartition(
                        partition_index=0,
                        candidate_epoch=1,
                        candidate_id=2,
                        last_offset_epoch=0,
                        last_offset=0,
                    ),
                ),
            ),
        )
    )
    with pytest.raises(KafkaError) as info:
        wire.request_from_wire(bad)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert "orders-0" in str(info.value)


def test_fetch_without_replica_id_is_refused() -> None:
    request = wire.request_to_wire(REQUESTS[4], to_node=1, cluster_id=None)
    assert isinstance(request, wf.FetchRequest)
    from dataclasses import replace

    with pytest.raises(KafkaError, match="replica_id >= 0, got -1"):
        wire.request_from_wire(replace(request, replica_id=-1))


def test_request_level_error_answer_is_named() -> None:
    sent = REQUESTS[2]
    request = wire.request_to_wire(sent, to_node=2, cluster_id="x")
    answer = wire.error_to_wire(request, ErrorCode.INCONSISTENT_CLUSTER_ID, "cluster id 'x' no")
    with pytest.raises(wire.WireResponseError, match="node 2: INCONSISTENT_CLUSTER_ID"):
        wire.response_to_core(sent, 2, answer)


def test_encoding_the_same_entries_again_reuses_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Followers and observers at the same offset get the same answer: encoded once. Other
    entries at the same offsets (a new leader's, after a truncation) are encoded anew."""
    built: list[int] = []
    real = wire.build_batch

    def counting(records: list[object], **kwargs: object) -> bytes:
        built.append(len(records))
        return real(records, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(wire, "build_batch", counting)
    first = [Entry(100 + i, 4, b"v%d" % i) for i in range(50)]
    data = wire.encode_entries(first)
    assert wire.encode_entries(list(first)) is data
    assert built == [50]
    other = [Entry(100 + i, 5, b"w%d" % i) for i in range(50)]
    assert wire.decode_entries(wire.encode_entries(other)) == tuple(other)
    assert wire.decode_entries(data) == tuple(first)
    assert built == [50, 50]
