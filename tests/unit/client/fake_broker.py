"""An in-memory broker for client unit tests: a real trio TCP server speaking the protocol,
with a dict of partitions instead of storage. Enough of Metadata, Produce, Fetch, ListOffsets,
CreateTopics, DeleteTopics for the client's logic; the real broker is tested in integration/.

`fail_next[(api_key)] = [ErrorCode, ...]` makes the next requests of that API fail per partition.
`fail_after_append = [ErrorCode, ...]`: the next Produce partitions are appended, then answered
with that error (a write whose acknowledgement was lost). InitProducerId hands out ids from
1000; batches with a producer id are checked as a leader does (duplicates of the last five
answered with their first offsets, gaps refused), enough for the client's idempotence logic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from protocol.codec import decode_request, encode_response
from protocol.errors import ErrorCode
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.fetch import FetchPartitionResponse, FetchResponse, FetchTopicResponse
from protocol.messages.init_producer_id import InitProducerIdResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
)
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.messages.quorum_common import LeaderIdAndEpoch, NodeEndpoint
from protocol.messages.topics import (
    CreatableTopicResult,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from protocol.record_batch import iter_batches, stamp
from tests.support.waiting import wait_until


@dataclass
class FakePartition:
    batches: list[bytearray] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    end: int = 0
    start: int = 0


@dataclass
class FakeProducerState:
    epoch: int
    last_sequence: int
    batches: list[tuple[int, int, int]]
    """(first sequence, last sequence, base offset) of the last five batches."""


class FakeBroker:
    def __init__(self, node_id: int = 1) -> None:
        self.node_id = node_id
        self.port = 0
        self.topics: dict[str, list[FakePartition]] = {}
        self.fail_next: dict[ApiKey, list[ErrorCode]] = {}
        self.fail_after_append: list[ErrorCode] = []
        self.next_producer_id = 1000
        self.producers: dict[tuple[str, int, int], FakeProducerState] = {}
        self.requests: list[Any] = []
        self.handlers: dict[ApiKey, Callable[[Any], Awaitable[Any]]] = {}
        """Async answers for more APIs (tests.unit.client.fake_group plugs a coordinator in)."""
        self.moved: dict[tuple[str, int], tuple[int, int, int]] = {}
        """Partitions led elsewhere: (leader id, leader epoch, leader port); Produce and Fetch
        answer NOT_LEADER_OR_FOLLOWER naming that leader (KIP-951)."""
        self.leaderless: set[tuple[str, int]] = set()
        """Partitions Metadata shows without a leader (leader_id -1)."""
        self.held: trio.Event | None = None
        """While set to an unset Event, responses wait for it (requests pile up in flight)."""
        self._listeners: list[trio.SocketListener] = []

    def _moved_to(
        self, topic: str, partition: int, endpoints: dict[int, NodeEndpoint]
    ) -> LeaderIdAndEpoch | None:
        """The leader a moved partition names (its endpoint added to `endpoints`), else None."""
        moved = self.moved.get((topic, partition))
        if moved is None:
            return None
        leader, epoch, port = moved
        endpoints[leader] = NodeEndpoint(node_id=leader, host="127.0.0.1", port=port)
        return LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)

    def create(self, name: str, partitions: int = 1) -> None:
        self.topics[name] = [FakePartition() for _ in range(partitions)]

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self._listeners = listeners
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        # Reading and answering are separate tasks so requests keep arriving (and are
        # recorded) while answers are held back: that is how pipelining is observed.
        send, receive = trio.open_memory_channel[bytes](1000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write, stream, receive)
            decoder = FrameDecoder()
            try:
                while True:
                    data = await stream.receive_some(1 << 16)
                    if not data:
                        break
                    decoder.feed(data)
                    while (frame := decoder.next_frame()) is not NEED_DATA:
                        env = decode_request(frame)  # type: ignore[arg-type]
                        self.requests.append(env.body)
                        handler = self.handlers.get(env.api_key)
                        if handler is not None:
                            response = await handler(env.body)
                        else:
                            response = self._answer(env.api_key, env.body)
                        if response is not None:
                            await send.send(encode_response(env.correlation_id, response))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()

    async def _write(
        self, stream: trio.SocketStream, receive: trio.MemoryReceiveChannel[bytes]
    ) -> None:
        try:
            async for frame in receive:
                if self.held is not None:
                    await self.held.wait()
                await stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    def _append(self, topic: str, index: int, buf: bytearray) -> tuple[ErrorCode, int]:
        """Append the batches (all or none); a whole duplicate answers its first offset."""
        part = self.topics[topic][index]
        headers = list(iter_batches(buf))
        first = headers[0][1]
        if first.producer_id >= 0:
            state = self.producers.get((topic, index, first.producer_id))
            for dup_first, _, dup_base in state.batches if state else ():
                if dup_first == first.base_sequence:
                    return ErrorCode.NONE, dup_base
            expected = 0 if state is None else state.last_sequence + 1
            if first.base_sequence != expected:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        base = part.end
        for pos, header in headers:
            stamp(buf, pos, part.end, 0)
            part.batches.append(bytearray(buf[pos : pos + header.size]))
            part.bases.append(part.end)
            part.timestamps.append(header.max_timestamp)
            if header.producer_id >= 0:
                key = (topic, index, header.producer_id)
                state = self.producers.setdefault(key, FakeProducerState(0, -1, []))
                state.last_sequence = header.last_sequence
                state.batches = [
                    *state.batches[-4:],
                    (header.base_sequence, header.last_sequence, part.end),
                ]
            part.end += header.records_count
        return ErrorCode.NONE, base

    def _error(self, key: ApiKey) -> ErrorCode:
        queue = self.fail_next.get(key)
        return queue.pop(0) if queue else ErrorCode.NONE

    def _answer(self, key: ApiKey, req: Any) -> Any:
        if key is ApiKey.API_VERSIONS:
            return ApiVersionsResponse()
        if key is ApiKey.METADATA:
            names = list(self.topics) if req.topics is None else list(req.topics)
            topics = []
            for name in names:
                parts = self.topics.get(name)
                if parts is None:
                    topics.append(MetadataTopic(error_code=3, name=name, error_message="unknown"))
                    continue
                topics.append(MetadataTopic(error_code=0, name=name, topic_id="id-" + name, partitions=tuple(
                    MetadataPartition(error_code=0, index=i, leader_epoch=0,
                                      leader_id=-1 if (name, i) in self.leaderless else self.node_id,
                                      replica_nodes=(self.node_id,), isr_nodes=(self.node_id,))
                    for i in range(len(parts)))))  # fmt: skip
            return MetadataResponse(
                brokers=(MetadataBroker(node_id=self.node_id, host="127.0.0.1", port=self.port),),
                cluster_id="fake",
                controller_id=self.node_id,
                topics=tuple(topics),
            )
        if key is ApiKey.INIT_PRODUCER_ID:
            code = self._error(key)
            if code:
                return InitProducerIdResponse(error_code=code, error_message="fake refusal")
            self.next_producer_id += 1
            return InitProducerIdResponse(producer_id=self.next_producer_id - 1, producer_epoch=0)
        if key is ApiKey.PRODUCE:
            out = []
            endpoints: dict[int, NodeEndpoint] = {}
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    current = self._moved_to(t.name, p.index, endpoints)
                    if current is not None:
                        parts.append(ProducePartitionResponse(
                            index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            current_leader=current))  # fmt: skip
                        continue
                    code = self._error(key)
                    if code:
                        parts.append(ProducePartitionResponse(index=p.index, error_code=code))
                        continue
                    code, base = self._append(t.name, p.index, bytearray(p.records))
                    if not code and self.fail_after_append:
                        code = self.fail_after_append.pop(0)
                    parts.append(
                        ProducePartitionResponse(
                            index=p.index, error_code=code, base_offset=-1 if code else base
                        )
                    )
                out.append(ProduceTopicResponse(name=t.name, partitions=tuple(parts)))
            if req.acks == 0:
                return None
            return ProduceResponse(topics=tuple(out), node_endpoints=tuple(endpoints.values()))
        if key is ApiKey.FETCH:
            out = []
            endpoints: dict[int, NodeEndpoint] = {}
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    current = self._moved_to(t.name, p.index, endpoints)
                    if current is not None:
                        parts.append(FetchPartitionResponse(
                            index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            current_leader=current))  # fmt: skip
                        continue
                    part = self.topics[t.name][p.index]
                    code = self._error(key)
                    if not code and not part.start <= p.fetch_offset <= part.end:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                    if code:
                        parts.append(FetchPartitionResponse(index=p.index, error_code=code))
                        continue
                    data = bytearray()
                    for base, batch in zip(part.bases, part.batches, strict=True):
                        last = base + int.from_bytes(batch[23:27], "big")
                        if last >= p.fetch_offset and (
                            not data or len(data) + len(batch) <= p.partition_max_bytes
                        ):
                            data += batch
                    parts.append(FetchPartitionResponse(index=p.index, error_code=0, high_watermark=part.end,
                                                        log_start_offset=part.start, records=bytes(data)))  # fmt: skip
                out.append(FetchTopicResponse(name=t.name, partitions=tuple(parts)))
            return FetchResponse(topics=tuple(out), node_endpoints=tuple(endpoints.values()))
        if key is ApiKey.LIST_OFFSETS:
            out = []
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    part = self.topics[t.name][p.index]
                    if p.timestamp == -1:
                        off = part.end
                    elif p.timestamp == -2:
                        off = part.start
                    else:
                        off = next((b for b, ts in zip(part.bases, part.timestamps, strict=True)
                                    if ts >= p.timestamp), -1)  # fmt: skip
                    parts.append(
                        ListOffsetsPartitionResponse(index=p.index, error_code=0, offset=off)
                    )
                out.append(ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
            return ListOffsetsResponse(topics=tuple(out))
        if key is ApiKey.CREATE_TOPICS:
            results = []
            for t in req.topics:
                if t.name in self.topics:
                    results.append(CreatableTopicResult(name=t.name, error_code=36,
                                                        error_message=f"Topic '{t.name}' already exists."))  # fmt: skip
                    continue
                self.create(t.name, max(t.num_partitions, 1))
                results.append(CreatableTopicResult(name=t.name, error_code=0))
            return CreateTopicsResponse(topics=tuple(results))
        if key is ApiKey.DELETE_TOPICS:
            results = []
            for name in req.topic_names:
                code = 0 if self.topics.pop(name, None) is not None else 3
                results.append(DeletableTopicResult(name=name, error_code=code))
            return DeleteTopicsResponse(responses=tuple(results))
        raise AssertionError(f"fake broker does not serve {key!r}")


async def wait_for(condition: Callable[[], bool], limit_s: float = 5.0) -> None:
    """Poll `condition` until true, failing after `limit_s` seconds (no blind sleeps)."""
    await wait_until(condition, within=limit_s, every=0.001)
