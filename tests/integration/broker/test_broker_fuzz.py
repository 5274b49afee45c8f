"""A real broker process under hostile input: a bounded, seeded stream of frames (random
bytes, random msgpack, every API's header with bodies of wrong shapes and types, produce
requests carrying forged batches with valid CRCs, truncated and oversized frames, deep
nesting), sent pipelined over many short connections. The broker must stay up, answer a
canary between the rounds, lose none of the records acknowledged before, and store nothing a
consumer cannot read.

TRIOKA_NET_FUZZ_FRAMES (default 20,000) and TRIOKA_NET_FUZZ_SEED (default below) replay a
run; a failure prints the seed."""

from __future__ import annotations

import dataclasses
import os
import random
import struct

import msgpack
import trio

from client import Admin, Consumer, Producer, TopicPartition
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages import REQUESTS
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.record_batch import (
    CONTROL_FLAG,
    Compression,
    Record,
    build_batch,
    encode_batch_bytes,
)
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient

FRAMES = int(os.environ.get("TRIOKA_NET_FUZZ_FRAMES", "20000"))
SEED = int(os.environ.get("TRIOKA_NET_FUZZ_SEED", "20261128"))
PER_CONNECTION = 40
"""Frames sent on one connection before it is half-closed (a long poll parks at most this)."""
CONCURRENT = 6
ROUNDS = 10
"""Canary checks: one after each tenth of the frames."""
API_KEYS = sorted(int(k) for k in REQUESTS)
FIELD_COUNTS = {int(k): len(dataclasses.fields(cls)) for k, cls in REQUESTS.items()}
TOPICS = ("fuzz", "nope", "")
"""Names the bodies use. Never the canary's: a well-formed DeleteTopics of it would be obeyed
(refusing it is authorization's job, not robustness's); "fuzz" may be deleted and re-created."""


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Hostile:
    """Seeded generator of hostile frames."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def value(self, depth: int = 0) -> object:
        """Any msgpack value, nested a little."""
        r = self.rng
        kind = r.randrange(10 if depth < 3 else 7)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice((True, False))
        if kind == 2:
            return r.choice((0, -1, 1, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), r.randrange(100)))
        if kind == 3:
            return r.random() * r.choice((1, 1e9, -1e9))
        if kind == 4:
            return r.choice(TOPICS) + "".join(
                r.choice("ab-._/é\x00") for _ in range(r.randrange(4))
            )
        if kind == 5:
            return r.randbytes(r.randrange(64))
        if kind == 6:
            return r.choice(TOPICS)
        if kind == 7:
            return [self.value(depth + 1) for _ in range(r.randrange(5))]
        if kind == 8:
            return {
                str(self.value(depth + 1)): self.value(depth + 1) for _ in range(r.randrange(3))
            }
        return [[self.value(depth + 2) for _ in range(r.randrange(4))]]

    def request(self) -> bytes:
        """An API's header (sometimes a bad version) and a body of about the right length."""
        r = self.rng
        key = r.choice(API_KEYS)
        version = r.choice((0, 0, 0, 1, -1, 99))
        n = FIELD_COUNTS[key] + r.choice((0, 0, 0, -1, 1))
        body = [self.value() for _ in range(max(n, 0))]
        return msgpack.packb([key, version, r.randrange(2**31), "fuzz", body])

    def forged_batch(self) -> bytes:
        r = self.rng
        if r.random() < 0.3:
            records = [Record(value=r.randbytes(r.randrange(50)), key=b"k") for _ in range(3)]
            codec = r.choice((Compression.NONE, Compression.LZ4, Compression.ZSTD))
            good = build_batch(records, compression=codec)
            return good if r.random() < 0.5 else good[: r.randrange(len(good))]
        payload = r.choice(
            (
                r.randbytes(r.randrange(80)),
                msgpack.packb([self.value() for _ in range(r.randrange(4))]),
                msgpack.packb([[0, 0, i, b"k", b"v", []] for i in range(r.randrange(1, 4))]),
            )
        )
        count = r.choice((0, 1, 3, 2**31 - 1, r.randrange(10)))
        return encode_batch_bytes(
            payload,
            attributes=r.choice((0, 0, CONTROL_FLAG, 7, r.randrange(2**15))),
            last_offset_delta=max(0, r.choice((count - 1, 2**31 - 2, r.randrange(10)))),
            base_timestamp=r.choice((0, -1, 2**62)),
            max_timestamp=0,
            records_count=count,
            producer_id=r.choice((-1, -1, 0, 7)),
            base_sequence=r.choice((-1, 0, 5)),
        )

    def produce(self) -> bytes:
        r = self.rng
        partitions = [[r.randrange(-1, 4), self.forged_batch()] for _ in range(r.randrange(1, 3))]
        body = [r.choice((1, -1, 0, 7)), r.choice((0, 100)), [["fuzz", partitions]], None]
        return msgpack.packb([0, 0, r.randrange(2**31), "fuzz", body])

    def answered(self) -> bytes:
        """A frame with a readable header: answered, the connection stays open."""
        if self.rng.random() < 0.55:
            return framed(self.request())
        return framed(self.produce())

    def fatal(self) -> bytes:
        """A frame after which the broker may close the connection."""
        r = self.rng
        kind = r.randrange(40, 100)
        if kind < 75:
            return framed(msgpack.packb(self.value()))
        if kind < 88:
            return framed(r.randbytes(r.randrange(1, 200)))
        if kind < 93:
            return framed(b"\x91" * r.randrange(100, 5000) + b"\xc0")  # deep nesting
        if kind < 97:
            whole = framed(self.request())
            return whole[: r.randrange(1, len(whole))]  # truncated: the rest never comes
        return struct.pack(">i", r.choice((-1, 2**31 - 1, 200 * 2**20)))  # absurd lengths


async def blast(host: str, port: int, frames: list[bytes]) -> int:
    """Send `frames` pipelined on one connection, half-close, read until the broker closes;
    how many answers came back."""
    decoder = FrameDecoder(max_frame_bytes=2**31 - 1)
    answers = 0
    with trio.move_on_after(30):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            try:
                await stream.send_all(b"".join(frames))
                await stream.send_eof()
                while data := await stream.receive_some(1 << 16):
                    decoder.feed(data)
                    while decoder.next_frame() is not NEED_DATA:
                        answers += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass  # the broker closes a connection on an unreadable frame
    return answers


async def canary(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        with trio.fail_after(10):
            assert (await c.request(ApiVersionsRequest())).error_code == 0


async def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes | None]]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[tuple[int, bytes | None]] = []
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = await c.end_offsets(tps)
        with trio.fail_after(30):
            while [tp for tp in tps if await c.position(tp) < ends[tp]]:
                out += [(r.partition, r.value) for r in await c.poll(500)]
    return out


async def test_a_broker_survives_hostile_frames_and_loses_nothing(broker_factory) -> None:
    broker: BrokerProcess = broker_factory()
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("canary", 3, 1)
        await admin.create_topic("fuzz", 3, 1)
    acknowledged = []
    async with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
        for i in range(60):
            value = b"canary-%d" % i
            await producer.send_and_wait("canary", value, partition=i % 3)
            acknowledged.append((i % 3, value))
    rng = random.Random(SEED)
    hostile = Hostile(rng)
    limiter = trio.CapacityLimiter(CONCURRENT)

    answers = 0

    async def one(frames: list[bytes]) -> None:
        nonlocal answers
        async with limiter:
            got = await blast(broker.host, broker.port, frames)
            answers += got

    sent = 0
    per_round = FRAMES // ROUNDS
    for round_ in range(ROUNDS):
        async with trio.open_nursery() as nursery:
            for _ in range(per_round // PER_CONNECTION):
                # The ones that may close the connection go last, so that the rest is read.
                frames = [hostile.answered() for _ in range(PER_CONNECTION - 1)]
                frames.append(hostile.fatal() if rng.random() < 0.5 else hostile.answered())
                sent += len(frames)
                nursery.start_soon(one, frames)
        assert broker.running, f"seed {SEED}: the broker died in round {round_}"
        await canary(broker)
    assert sent >= FRAMES - PER_CONNECTION * ROUNDS
    # Read and answered, not dropped with a closed connection (acks=0 produces get none).
    assert answers >= sent * 0.6, (answers, sent)
    # Nothing acknowledged was lost, and what the fuzz managed to store is readable.
    assert sorted(await read_all(broker.bootstrap, "canary", 3)) == sorted(acknowledged)
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        if "fuzz" in await admin.list_topics():
            (fuzz,) = await admin.describe_topics(["fuzz"])
            await read_all(broker.bootstrap, "fuzz", len(fuzz.partitions))
    async with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
        await producer.send_and_wait("canary", b"after", partition=0)
    assert broker.running, f"seed {SEED}"
