"""Mapping between raft.core's messages and the KRaft wire messages of protocol/ (KIP-595).

Every quorum request names `__cluster_metadata` partition 0 and the cluster id. The core's
messages name their `sender`; on the wire a request's sender is in its body (candidate_id,
leader_id, replica_id) and a response's sender is whoever the request went to, so a wire
response becomes a core message only together with the core request it answers
(`response_to_core(sent, to_node, response)`): the echo fields the core checks (fetch offset,
candidate epoch, snapshot position) come from that request, as KafkaRaftClient keeps the
request beside its in-flight answer.

Fetched entries travel as record batches (protocol.record_batch), one batch per run of one
epoch with the batch's partition leader epoch = the entry epoch, as Kafka's metadata log does;
an entry's data is the record value (b"" for the core's control entries). A leader answers
its followers and observers with the same entries, mostly: `encode_entries` keeps the last
few encodings (keyed by the entries themselves, so a hit is exact) and encodes each run once.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response, error_response
from protocol.messages import describe_quorum as dq
from protocol.messages import fetch as wf
from protocol.messages import fetch_snapshot as wfs
from protocol.messages import quorum_epoch as wqe
from protocol.messages import vote as wv
from protocol.messages.quorum_common import LeaderIdAndEpoch
from protocol.messages.quorum_common import SnapshotId as WireSnapshotId
from protocol.record_batch import Record, build_batch, decode_records, iter_batches
from raft.core import messages as cm
from raft.log_store import Entry, OffsetAndEpoch

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0

CoreRequest = (
    cm.VoteRequest
    | cm.BeginQuorumEpochRequest
    | cm.EndQuorumEpochRequest
    | cm.FetchRequest
    | cm.FetchSnapshotRequest
)
CoreResponse = (
    cm.VoteResponse
    | cm.BeginQuorumEpochResponse
    | cm.EndQuorumEpochResponse
    | cm.FetchResponse
    | cm.FetchSnapshotResponse
)
# Which core response answers which core request (the driver matches them by kind).
RESPONSE_FOR: dict[type, type] = {
    cm.VoteRequest: cm.VoteResponse,
    cm.BeginQuorumEpochRequest: cm.BeginQuorumEpochResponse,
    cm.EndQuorumEpochRequest: cm.EndQuorumEpochResponse,
    cm.FetchRequest: cm.FetchResponse,
    cm.FetchSnapshotRequest: cm.FetchSnapshotResponse,
}
CORE_REQUEST_TYPES = tuple(RESPONSE_FOR)
QUORUM_WIRE_REQUESTS = (
    wv.VoteRequest,
    wqe.BeginQuorumEpochRequest,
    wqe.EndQuorumEpochRequest,
    wf.FetchRequest,
    wfs.FetchSnapshotRequest,
)


# --- entries <-> record batches ------------------------------------------------------------
ENCODED_CACHE_ENTRIES = 8
"""How many recent Fetch answers' encodings are kept (one per fetcher position, roughly)..."""
ENCODED_CACHE_BYTES = 16 * 1024 * 1024
"""... and at most this many bytes of them."""
_encoded: OrderedDict[tuple[Entry, ...], bytes] = OrderedDict()
_encoded_bytes = 0


def encode_entries(entries: Sequence[Entry]) -> bytes:
    """Contiguous entries -> record batches, one per run of one epoch. The same entries
    asked again (another fetcher at the same offset) reuse the bytes."""
    key = tuple(entries)
    if len(key) < 2:
        return _encode_runs(key)
    # Hashing hits each entry's cached bytes hash; equality is identity on a hit, mostly.
    global _encoded_bytes
    data = _encoded.get(key)
    if data is None:
        data = _encode_runs(key)
        _encoded[key] = data
        _encoded_bytes += len(data)
        while len(_encoded) > ENCODED_CACHE_ENTRIES or _encoded_bytes > ENCODED_CACHE_BYTES:
            _encoded_bytes -= len(_encoded.popitem(last=False)[1])
    else:
        _encoded.move_to_end(key)
    return data


def _encode_runs(entries: Sequence[Entry]) -> bytes:
    out: list[bytes] = []
    i = 0
    while i < len(entries):
        j = i
        while j < len(entries) and entries[j].epoch == entries[i].epoch:
            j += 1
        run = entries[i:j]
        out.append(
            build_batch(
                [Record(value=e.data) for e in run],
                base_offset=run[0].offset,
                partition_leader_epoch=run[0].epoch,
            )
        )
        i = j
    return b"".join(out)


def decode_entries(data: bytes) -> tuple[Entry, ...]:
    """Record batches -> entries; a corrupt batch raises CorruptRecordBatchError naming it."""
    out: list[Entry] = []
    for pos, header in iter_batches(data):
        epoch = header.partition_leader_epoch
        for record in decode_records(data, pos):
            out.append(Entry(record.offset, epoch, record.value or b""))
    return tuple(out)


# --- the converters' shared parts -----------------------------------------------------------
# Each direction is a table: message class -> converter. A lookup walks the message's class
# and its bases, so it matches what an isinstance ladder would.
V = TypeVar("V")
T = TypeVar("T")


def _lookup(table: Mapping[type, V], msg: object) -> V | None:
    return next((table[cls] for cls in type(msg).__mro__ if cls in table), None)


def _topics(topic_type: Callable[..., T], part: object) -> tuple[T]:
    """The one topic with one partition every quorum message names (__cluster_metadata-0).
    KIP-595's messages call the topic's name `topic_name`, Fetch's call it `name`."""
    fields = {f.name for f in dataclasses.fields(topic_type)}  # type: ignore[arg-type]
    name = "topic_name" if "topic_name" in fields else "name"
    return (topic_type(**{name: METADATA_TOPIC, "partitions": (part,)}),)


# --- core request -> wire request (sending) -------------------------------------------------
def _vote_request(msg: cm.VoteRequest, to_node: int, cluster_id: str | None) -> Request:
    part = wv.VotePartition(
        partition_index=METADATA_PARTITION,
        candidate_epoch=msg.epoch,
        candidate_id=msg.sender,
        last_offset_epoch=msg.last_epoch,
        last_offset=msg.end_offset,
        pre_vote=msg.pre_vote,
    )
    topics = _topics(wv.VoteTopic, part)
    return wv.VoteRequest(topics=topics, cluster_id=cluster_id, voter_id=to_node)


def _begin_epoch_request(
    msg: cm.BeginQuorumEpochRequest, to_node: int, cluster_id: str | None
) -> Request:
    part = wqe.BeginQuorumEpochPartition(
        partition_index=METADATA_PARTITION, leader_id=msg.leader_id, leader_epoch=msg.epoch
    )
    topics = _topics(wqe.BeginQuorumEpochTopic, part)
    return wqe.BeginQuorumEpochRequest(topics=topics, cluster_id=cluster_id, voter_id=to_node)


def _end_epoch_request(
    msg: cm.EndQuorumEpochRequest, to_node: int, cluster_id: str | None
) -> Request:
    part = wqe.EndQuorumEpochPartition(
        partition_index=METADATA_PARTITION,
        leader_id=msg.leader_id,
        leader_epoch=msg.epoch,
        preferred_successors=msg.preferred_successors,
    )
    topics = _topics(wqe.EndQuorumEpochTopic, part)
    return wqe.EndQuorumEpochRequest(topics=topics, cluster_id=cluster_id)


def _fetch_request(msg: cm.FetchRequest, to_node: int, cluster_id: str | None) -> Request:
    part = wf.FetchPartition(
        index=METADATA_PARTITION,
        fetch_offset=msg.fetch_offset,
        current_leader_epoch=msg.epoch,
        last_fetched_epoch=msg.last_fetched_epoch,
    )
    return wf.FetchRequest(
        max_wait_ms=0,  # the leader's core parks the fetch itself (fetch_max_wait_ms)
        min_bytes=1,
        topics=_topics(wf.FetchTopic, part),
        replica_id=msg.sender,
        cluster_id=cluster_id,
    )


def _fetch_snapshot_request(
    msg: cm.FetchSnapshotRequest, to_node: int, cluster_id: str | None
) -> Request:
    snapshot = msg.snapshot_id
    part = wfs.FetchSnapshotPartition(
        partition=METADATA_PARTITION,
        current_leader_epoch=msg.epoch,
        snapshot_id=WireSnapshotId(end_offset=snapshot.offset, epoch=snapshot.epoch),
        position=msg.position,
    )
    return wfs.FetchSnapshotRequest(
        topics=_topics(wfs.FetchSnapshotTopic, part),
        cluster_id=cluster_id,
        replica_id=msg.sender,
        max_bytes=msg.max_bytes,
    )


_REQUEST_TO_WIRE: dict[type, Callable[[Any, int, str | None], Request]] = {
    cm.VoteRequest: _vote_request,
    cm.BeginQuorumEpochRequest: _begin_epoch_request,
    cm.EndQuorumEpochRequest: _end_epoch_request,
    cm.FetchRequest: _fetch_request,
    cm.FetchSnapshotRequest: _fetch_snapshot_request,
}


def request_to_wire(msg: CoreRequest, *, to_node: int, cluster_id: str | None) -> Request:
    convert = _lookup(_REQUEST_TO_WIRE, msg)
    if convert is None:
        raise TypeError(f"not a raft.core request: {type(msg).__name__}")
    return convert(msg, to_node, cluster_id)


# --- wire request -> core request (receiving) -----------------------------------------------
def _vote_from_wire(request: wv.VoteRequest) -> CoreRequest:
    vp = request.only_partition(METADATA_TOPIC, METADATA_PARTITION)
    return cm.VoteRequest(
        sender=vp.candidate_id,
        epoch=vp.candidate_epoch,
        last_epoch=vp.last_offset_epoch,
        end_offset=vp.last_offset,
        pre_vote=vp.pre_vote,
    )


def _begin_epoch_from_wire(request: wqe.BeginQuorumEpochRequest) -> CoreRequest:
    bp = request.only_partition(METADATA_TOPIC, METADATA_PARTITION)
    return cm.BeginQuorumEpochRequest(
        sender=bp.leader_id, epoch=bp.leader_epoch, leader_id=bp.leader_id
    )


def _end_epoch_from_wire(request: wqe.EndQuorumEpochRequest) -> CoreRequest:
    ep = request.only_partition(METADATA_TOPIC, METADATA_PARTITION)
    return cm.EndQuorumEpochRequest(
        sender=ep.leader_id,
        epoch=ep.leader_epoch,
        leader_id=ep.leader_id,
        preferred_successors=tuple(ep.preferred_successors),
    )


def _fetch_from_wire(request: wf.FetchRequest) -> CoreRequest:
    named = [(t.name, p.index) for t in request.topics for p in t.partitions]
    if named != [(METADATA_TOPIC, METADATA_PARTITION)]:
        shown = ", ".join(f"{t}-{p}" for t, p in named) or "none"
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"FetchRequest to a controller must name exactly one partition, "
            f"{METADATA_TOPIC}-{METADATA_PARTITION}; it named {shown}",
        )
    if request.replica_id < 0:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"FetchRequest for {METADATA_TOPIC} needs a replica_id >= 0, got {request.replica_id}",
        )
    fp = request.topics[0].partitions[0]
    return cm.FetchRequest(
        sender=request.replica_id,
        epoch=fp.current_leader_epoch,
        fetch_offset=fp.fetch_offset,
        last_fetched_epoch=fp.last_fetched_epoch,
    )


def _fetch_snapshot_from_wire(request: wfs.FetchSnapshotRequest) -> CoreRequest:
    sp = request.only_partition(METADATA_TOPIC, METADATA_PARTITION)
    return cm.FetchSnapshotRequest(
        sender=request.replica_id,
        epoch=sp.current_leader_epoch,
        snapshot_id=OffsetAndEpoch(sp.snapshot_id.end_offset, sp.snapshot_id.epoch),
        position=sp.position,
        max_bytes=request.max_bytes,
    )


_REQUEST_FROM_WIRE: dict[type, Callable[[Any], CoreRequest]] = {
    wv.VoteRequest: _vote_from_wire,
    wqe.BeginQuorumEpochRequest: _begin_epoch_from_wire,
    wqe.EndQuorumEpochRequest: _end_epoch_from_wire,
    wf.FetchRequest: _fetch_from_wire,
    wfs.FetchSnapshotRequest: _fetch_snapshot_from_wire,
}


def request_from_wire(request: Request) -> CoreRequest:
    """A quorum request as the core's message. KafkaError INVALID_REQUEST when it names
    another partition or (Fetch) has no replica id."""
    convert = _lookup(_REQUEST_FROM_WIRE, request)
    if convert is None:
        name = type(request).__name__
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{name} is not a quorum request")
    return convert(request)


# --- core response -> wire response (answering) --------------------------------------------
def _vote_response(msg: cm.VoteResponse) -> Response:
    part = wv.VotePartitionResponse(
        partition_index=METADATA_PARTITION,
        error_code=msg.error,
        leader_id=msg.leader_id,
        leader_epoch=msg.epoch,
        vote_granted=msg.granted,
    )
    return wv.VoteResponse(topics=_topics(wv.VoteTopicResponse, part))


def _epoch_response(
    wire_type: type[wqe.BeginQuorumEpochResponse | wqe.EndQuorumEpochResponse],
    msg: cm.BeginQuorumEpochResponse | cm.EndQuorumEpochResponse,
) -> Response:
    """Begin- and EndQuorumEpoch answer with the same partition shape."""
    part = wqe.QuorumEpochPartitionResponse(
        partition_index=METADATA_PARTITION,
        error_code=msg.error,
        leader_id=msg.leader_id,
        leader_epoch=msg.epoch,
    )
    return wire_type(topics=_topics(wqe.QuorumEpochTopicResponse, part))


def _fetch_response(msg: cm.FetchResponse) -> Response:
    div, snap = msg.diverging_epoch, msg.snapshot_id
    part = wf.FetchPartitionResponse(
        index=METADATA_PARTITION,
        error_code=msg.error,
        high_watermark=msg.high_watermark,
        records=encode_entries(msg.entries),
        diverging_epoch=(
            wf.EpochEndOffset(epoch=div.epoch, end_offset=div.offset) if div is not None else None
        ),
        # Always set (KRaft does): the fetcher learns the leader and epoch from it.
        current_leader=LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.epoch),
        snapshot_id=(
            WireSnapshotId(end_offset=snap.offset, epoch=snap.epoch) if snap is not None else None
        ),
    )
    return wf.FetchResponse(topics=_topics(wf.FetchTopicResponse, part))


def _fetch_snapshot_response(msg: cm.FetchSnapshotResponse) -> Response:
    snapshot = msg.snapshot_id
    part = wfs.FetchSnapshotPartitionResponse(
        index=METADATA_PARTITION,
        error_code=msg.error,
        snapshot_id=WireSnapshotId(end_offset=snapshot.offset, epoch=snapshot.epoch),
        current_leader=LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.epoch),
        size=msg.size,
        position=msg.position,
        unaligned_records=msg.data,
    )
    return wfs.FetchSnapshotResponse(topics=_topics(wfs.FetchSnapshotTopicResponse, part))


_RESPONSE_TO_WIRE: dict[type, Callable[[Any], Response]] = {
    cm.VoteResponse: _vote_response,
    cm.BeginQuorumEpochResponse: partial(_epoch_response, wqe.BeginQuorumEpochResponse),
    cm.EndQuorumEpochResponse: partial(_epoch_response, wqe.EndQuorumEpochResponse),
    cm.FetchResponse: _fetch_response,
    cm.FetchSnapshotResponse: _fetch_snapshot_response,
}


def response_to_wire(msg: CoreResponse) -> Response:
    convert = _lookup(_RESPONSE_TO_WIRE, msg)
    if convert is None:
        raise TypeError(f"not a raft.core response: {type(msg).__name__}")
    return convert(msg)


def error_to_wire(request: Request, code: ErrorCode, message: str) -> Response:
    """A request-level error answer (bad cluster id, bad partition, no answer in time)."""
    return error_response(type(request), code, message)


# --- wire response -> core response (answer to what we sent) --------------------------------
class WireResponseError(Exception):
    """A wire answer the core cannot take (request-level error, wrong shape): named."""


def _only(parts: Sequence[object], what: str) -> object:
    if len(parts) != 1:
        raise WireResponseError(f"{what} must answer exactly one partition, got {len(parts)}")
    return parts[0]


def _vote_answer(
    sent: cm.VoteRequest, to_node: int, part: wv.VotePartitionResponse
) -> CoreResponse:
    return cm.VoteResponse(
        sender=to_node,
        epoch=part.leader_epoch,
        leader_id=part.leader_id,
        granted=part.vote_granted,
        pre_vote=sent.pre_vote,
        candidate_epoch=sent.epoch,
        error=ErrorCode(part.error_code),
    )


def _epoch_answer(
    core_type: type[cm.BeginQuorumEpochResponse | cm.EndQuorumEpochResponse],
    sent: cm.BeginQuorumEpochRequest | cm.EndQuorumEpochRequest,
    to_node: int,
    part: wqe.QuorumEpochPartitionResponse,
) -> CoreResponse:
    """Begin- and EndQuorumEpoch answers share the partition shape; the core's type differs."""
    return core_type(
        sender=to_node,
        epoch=part.leader_epoch,
        leader_id=part.leader_id,
        error=ErrorCode(part.error_code),
    )


def _fetch_answer(
    sent: cm.FetchRequest, to_node: int, part: wf.FetchPartitionResponse
) -> CoreResponse:
    leader = part.current_leader or LeaderIdAndEpoch()
    div, snap = part.diverging_epoch, part.snapshot_id
    return cm.FetchResponse(
        sender=to_node,
        epoch=leader.leader_epoch,
        leader_id=leader.leader_id,
        fetch_offset=sent.fetch_offset,
        last_fetched_epoch=sent.last_fetched_epoch,
        error=ErrorCode(part.error_code),
        entries=decode_entries(part.records) if part.records else (),
        high_watermark=part.high_watermark,
        diverging_epoch=OffsetAndEpoch(div.end_offset, div.epoch) if div else None,
        snapshot_id=OffsetAndEpoch(snap.end_offset, snap.epoch) if snap else None,
    )


def _fetch_snapshot_answer(
    sent: cm.FetchSnapshotRequest, to_node: int, part: wfs.FetchSnapshotPartitionResponse
) -> CoreResponse:
    leader = part.current_leader or LeaderIdAndEpoch()
    return cm.FetchSnapshotResponse(
        sender=to_node,
        epoch=leader.leader_epoch,
        leader_id=leader.leader_id,
        snapshot_id=OffsetAndEpoch(part.snapshot_id.end_offset, part.snapshot_id.epoch),
        position=part.position if part.position >= 0 else sent.position,
        error=ErrorCode(part.error_code),
        size=max(part.size, 0),
        data=part.unaligned_records,
    )


# The request we sent -> (the partition answer it expects, its converter).
_RESPONSE_TO_CORE: dict[type, tuple[type, Callable[[Any, int, Any], CoreResponse]]] = {
    cm.VoteRequest: (wv.VotePartitionResponse, _vote_answer),
    cm.BeginQuorumEpochRequest: (
        wqe.QuorumEpochPartitionResponse,
        partial(_epoch_answer, cm.BeginQuorumEpochResponse),
    ),
    cm.EndQuorumEpochRequest: (
        wqe.QuorumEpochPartitionResponse,
        partial(_epoch_answer, cm.EndQuorumEpochResponse),
    ),
    cm.FetchRequest: (wf.FetchPartitionResponse, _fetch_answer),
    cm.FetchSnapshotRequest: (wfs.FetchSnapshotPartitionResponse, _fetch_snapshot_answer),
}


def response_to_core(sent: CoreRequest, to_node: int, response: Response) -> CoreResponse:
    """`response` from `to_node` to our `sent` request as the core's message. Raises
    WireResponseError for a request-level error or a malformed answer."""
    if response.error_code != ErrorCode.NONE:
        raise WireResponseError(
            f"{type(response).__name__} from node {to_node}: "
            f"{ErrorCode(response.error_code).name} {response.error_message or ''}".rstrip()
        )
    topics = getattr(response, "topics", ())
    topic = _only(topics, type(response).__name__)
    parts = topic.partitions  # type: ignore[attr-defined]
    part = _only(parts, type(response).__name__)
    expected = _lookup(_RESPONSE_TO_CORE, sent)
    if expected is None or not isinstance(part, expected[0]):
        raise WireResponseError(
            f"{type(response).__name__} from node {to_node} does not answer {type(sent).__name__}"
        )
    return expected[1](sent, to_node, part)


def describe_quorum_request() -> dq.DescribeQuorumRequest:
    return dq.DescribeQuorumRequest(
        topics=(
            dq.DescribeQuorumTopic(
                topic_name=METADATA_TOPIC,
                partitions=(dq.DescribeQuorumPartition(partition_index=METADATA_PARTITION),),
            ),
        )
    )
