"""The fault proxy's pure part: frames fed a byte at a time, order under jitter, response drops
matched by correlation id, hold, blackhole, counters."""

from __future__ import annotations

import random

import msgpack
import pytest

from deploy.cluster.proxy_policy import (
    CLOSE,
    ConnectionBook,
    Delay,
    Direction,
    ProxyCounters,
    ProxyPolicy,
    request_header,
    response_correlation_id,
)
from protocol.errors import ProtocolError
from protocol.framing import encode_frame
from protocol.messages import ApiKey

REQ, RESP = Direction.REQUESTS, Direction.RESPONSES


def request(api: ApiKey, corr: int) -> bytes:
    return encode_frame(msgpack.packb([int(api), 9, corr, "c", [1, 2, "x" * 50]]))


def response(corr: int) -> bytes:
    return encode_frame(msgpack.packb([corr, [0, "body"]]))


def book(policy: ProxyPolicy, seed: int = 1) -> ConnectionBook:
    return ConnectionBook(lambda: policy, ProxyCounters(), random.Random(seed))


def feed_bytewise(b: ConnectionBook, d: Direction, data: bytes, now: float = 0.0) -> None:
    for i in range(len(data)):
        b.feed(d, data[i : i + 1], now)


def test_headers_are_read_without_the_body() -> None:
    assert request_header(request(ApiKey.PRODUCE, 7)[4:]) == (int(ApiKey.PRODUCE), 7)
    assert response_correlation_id(response(7)[4:]) == 7
    assert request_header(b"\xc1garbage") == (None, None)
    assert response_correlation_id(msgpack.packb(["x"])) is None


def test_frames_fed_one_byte_at_a_time_come_out_whole_and_in_order() -> None:
    b = book(ProxyPolicy())
    frames = [request(ApiKey.PRODUCE, i) for i in range(5)]
    feed_bytewise(b, REQ, b"".join(frames))
    assert b.due(REQ, 0.0) == frames
    assert b.counters.frames_forwarded == 5
    assert b.counters.requests_by_api[int(ApiKey.PRODUCE)] == 5
    assert set(b.in_flight) == set(range(5))


def test_jitter_never_lets_a_frame_overtake_an_earlier_one() -> None:
    policy = ProxyPolicy(requests=Delay(delay_ms=100, jitter_ms=90))
    b = book(policy, seed=3)
    frames = [request(ApiKey.FETCH, i) for i in range(200)]
    for i, frame in enumerate(frames):
        b.feed(REQ, frame, now=i * 0.001)
    out: list[object] = []
    now = 0.0
    while (release := b.next_release(REQ)) is not None:
        assert release >= now
        now = release
        out += b.due(REQ, now)
    assert out == frames
    assert b.counters.frames_delayed == 200


def test_delay_holds_a_frame_until_its_release_time() -> None:
    b = book(ProxyPolicy(responses=Delay(delay_ms=200)))
    b.feed(RESP, response(1), now=10.0)
    assert b.due(RESP, 10.199) == []
    assert b.next_release(RESP) == pytest.approx(10.2)
    assert b.due(RESP, 10.2) == [response(1)]


def test_only_responses_to_the_chosen_api_are_dropped_then_close() -> None:
    policy = ProxyPolicy(drop_responses=frozenset({int(ApiKey.PRODUCE)}), drop_probability=1.0)
    b = book(policy)
    b.feed(REQ, request(ApiKey.METADATA, 1) + request(ApiKey.PRODUCE, 2), 0.0)
    b.due(REQ, 0.0)
    feed_bytewise(b, RESP, response(1) + response(2))
    assert b.due(RESP, 0.0) == [response(1), CLOSE]
    assert b.counters.responses_dropped == 1
    assert b.in_flight == {}


def test_drop_probability_uses_the_seeded_rng() -> None:
    def dropped(seed: int) -> list[int]:
        policy = ProxyPolicy(drop_responses=frozenset({0}), drop_probability=0.3,
                             after_drop="hold")  # fmt: skip
        out = []
        for corr in range(200):
            b = book(policy, seed=seed * 1000 + corr)
            b.feed(REQ, request(ApiKey.PRODUCE, corr), 0.0)
            b.feed(RESP, response(corr), 0.0)
            out.append(b.counters.responses_dropped)
        return out

    first = dropped(1)
    assert first == dropped(1)
    assert 30 < sum(first) < 90


def test_hold_swallows_that_response_and_every_later_one() -> None:
    policy = ProxyPolicy(drop_responses=frozenset({0}), drop_probability=1.0, after_drop="hold")
    b = book(policy)
    b.feed(REQ, request(ApiKey.PRODUCE, 1) + request(ApiKey.METADATA, 2), 0.0)
    b.feed(RESP, response(1) + response(2), 0.0)
    assert b.holding
    assert b.due(RESP, 0.0) == []
    assert b.counters.responses_dropped == 2
    assert b.due(REQ, 0.0) == [request(ApiKey.PRODUCE, 1), request(ApiKey.METADATA, 2)]


def test_a_response_to_an_unknown_correlation_id_is_forwarded() -> None:
    b = book(ProxyPolicy(drop_responses=frozenset({0}), drop_probability=1.0))
    b.feed(RESP, response(42), 0.0)
    assert b.due(RESP, 0.0) == [response(42)]


def test_blackhole_forwards_nothing_and_policy_changes_apply_to_later_frames() -> None:
    policy = ProxyPolicy(blackhole=True)
    b = book(policy)
    b.feed(REQ, request(ApiKey.PRODUCE, 1), 0.0)
    policy.blackhole = False
    b.feed(REQ, request(ApiKey.PRODUCE, 2), 0.0)
    assert b.due(REQ, 0.0) == [request(ApiKey.PRODUCE, 2)]
    assert b.counters.frames_blackholed == 1


def test_a_stream_without_framing_raises() -> None:
    b = book(ProxyPolicy())
    with pytest.raises(ProtocolError):
        b.feed(REQ, b"\xff\xff\xff\xff", 0.0)


def test_bad_policy_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="drop_probability"):
        ProxyPolicy(drop_probability=1.5)
    with pytest.raises(ValueError, match="after_drop"):
        ProxyPolicy(after_drop="never")  # type: ignore[arg-type]
