"""The fault proxy's pure part: its policy, its counters and one connection's frame bookkeeping.

`ConnectionBook` is fed the bytes read from each side (client -> broker requests, broker ->
client responses), splits them with the protocol's FrameDecoder, reads each request's api key
and correlation id from its msgpack header (`[api_key, api_version, correlation_id, ...]`) and
each response's correlation id (`[correlation_id, body]`), so a response is matched to the
request it answers. Every frame gets a release time (now + delay +- jitter, never before the
previous frame's of the same direction: a delayed frame never overtakes an earlier one, as
netem's per-queue delay). The driver (deploy/cluster/proxy.py) asks `due()` what to write now and
`next_release()` when to look again. No sockets, no trio: time is a float the caller passes.
"""

from __future__ import annotations

import enum
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import msgpack

from protocol.errors import ProtocolError
from protocol.framing import NEED_DATA, FrameDecoder, encode_frame


class Direction(enum.Enum):
    REQUESTS = "requests"  # client -> broker
    RESPONSES = "responses"  # broker -> client


@dataclass
class Delay:
    """Per-frame delay of one direction: delay_ms plus a uniform jitter in [-jitter, +jitter]."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0

    def draw(self, rng: random.Random) -> float:
        """Seconds to hold one frame (never negative)."""
        if self.delay_ms <= 0 and self.jitter_ms <= 0:
            return 0.0
        jitter = rng.uniform(-self.jitter_ms, self.jitter_ms) if self.jitter_ms > 0 else 0.0
        return max(0.0, self.delay_ms + jitter) / 1000.0


@dataclass
class ProxyPolicy:
    """What the proxy does now. The harness mutates or replaces it at run time; each frame is
    judged by the policy in force when it arrives."""

    requests: Delay = field(default_factory=Delay)
    responses: Delay = field(default_factory=Delay)
    # Api keys (protocol.messages.ApiKey) whose responses may be swallowed.
    drop_responses: frozenset[int] = frozenset()
    drop_probability: float = 0.0
    # "close": the connection is closed right after the swallowed response (the client sees a
    # disconnection); "hold": it stays open and nothing more reaches the client on it (the
    # client notices only by its request.timeout.ms).
    after_drop: Literal["close", "hold"] = "close"
    # Accept connections but forward nothing in either direction.
    blackhole: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop_probability <= 1.0:
            raise ValueError(f"drop_probability must be in [0, 1], got {self.drop_probability}")
        if self.after_drop not in ("close", "hold"):
            raise ValueError(f"after_drop must be 'close' or 'hold', got {self.after_drop!r}")

    def delay(self, direction: Direction) -> Delay:
        return self.requests if direction is Direction.REQUESTS else self.responses


PolicySource = Callable[[], ProxyPolicy]


@dataclass
class ProxyCounters:
    """Totals over every connection of one proxy."""

    connections: int = 0
    frames_forwarded: int = 0
    frames_delayed: int = 0
    responses_dropped: int = 0
    frames_blackholed: int = 0
    connections_severed: int = 0
    # Requests forwarded per api key (e.g. FETCH: proves followers replicate through us).
    requests_by_api: Counter[int] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, object]:
        return {
            "connections": self.connections,
            "frames_forwarded": self.frames_forwarded,
            "frames_delayed": self.frames_delayed,
            "responses_dropped": self.responses_dropped,
            "frames_blackholed": self.frames_blackholed,
            "connections_severed": self.connections_severed,
            "requests_by_api": dict(sorted(self.requests_by_api.items())),
        }


class Close:
    """Queued in place of a swallowed response when after_drop="close": the driver closes the
    connection when it reaches this entry (responses queued before it still go out)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CLOSE"


CLOSE = Close()
Entry = bytes | Close


def request_header(payload: bytes) -> tuple[int | None, int | None]:
    """(api_key, correlation_id) of a request payload; None for what cannot be read (the
    proxy still forwards it: the broker answers bad input itself)."""
    fields = _leading(payload, 3)
    if len(fields) < 3:
        return None, None
    key, corr = fields[0], fields[2]
    return (key if isinstance(key, int) else None, corr if isinstance(corr, int) else None)


def response_correlation_id(payload: bytes) -> int | None:
    fields = _leading(payload, 1)
    return fields[0] if fields and isinstance(fields[0], int) else None


def _leading(payload: bytes, count: int) -> list[object]:
    """The first `count` items of a msgpack array, without decoding the body after them."""
    unpacker = msgpack.Unpacker(max_buffer_size=len(payload) + 1)
    unpacker.feed(payload)
    try:
        size = unpacker.read_array_header()
        return [unpacker.unpack() for _ in range(min(size, count))]
    except (msgpack.OutOfData, msgpack.UnpackException, ValueError, TypeError):
        return []


class ConnectionBook:
    """One proxied connection: decoders, requests in flight (correlation id -> api key) and
    the two release queues."""

    def __init__(
        self, policy_source: PolicySource, counters: ProxyCounters, rng: random.Random
    ) -> None:
        self._policy = policy_source
        self.counters = counters
        self._rng = rng
        self._decoders = {d: FrameDecoder() for d in Direction}
        self._queues: dict[Direction, deque[tuple[float, Entry]]] = {d: deque() for d in Direction}
        self._last_release = dict.fromkeys(Direction, 0.0)
        self.in_flight: dict[int, int | None] = {}
        # After a swallowed response with after_drop="hold": nothing more goes to the client.
        self.holding = False

    def feed(self, direction: Direction, data: bytes, now: float) -> None:
        """Bytes read from one side. Raises ProtocolError when the stream loses its framing
        (the driver closes the connection, as a broker would)."""
        decoder = self._decoders[direction]
        decoder.feed(data)
        while (frame := decoder.next_frame()) is not NEED_DATA:
            assert isinstance(frame, bytes)
            self._on_frame(direction, frame, now)

    def _on_frame(self, direction: Direction, payload: bytes, now: float) -> None:
        policy = self._policy()
        if policy.blackhole:
            self.counters.frames_blackholed += 1
            return
        entry: Entry = encode_frame(payload)
        if direction is Direction.REQUESTS:
            api_key, corr = request_header(payload)
            if corr is not None:
                self.in_flight[corr] = api_key
            if api_key is not None:
                self.counters.requests_by_api[api_key] += 1
        else:
            if self.holding:
                self.counters.responses_dropped += 1
                return
            corr = response_correlation_id(payload)
            api_key = self.in_flight.pop(corr, None) if corr is not None else None
            if self._drops(policy, api_key):
                self.counters.responses_dropped += 1
                if policy.after_drop == "hold":
                    self.holding = True
                    return
                entry = CLOSE
        self._enqueue(direction, entry, policy.delay(direction).draw(self._rng), now)

    def _drops(self, policy: ProxyPolicy, api_key: int | None) -> bool:
        if api_key is None or api_key not in policy.drop_responses:
            return False
        return self._rng.random() < policy.drop_probability

    def _enqueue(self, direction: Direction, entry: Entry, delay: float, now: float) -> None:
        release = max(now + delay, self._last_release[direction])
        self._last_release[direction] = release
        if delay > 0:
            self.counters.frames_delayed += 1
        self._queues[direction].append((release, entry))

    def due(self, direction: Direction, now: float) -> list[Entry]:
        """Entries whose release time has come, in arrival order; counted as forwarded."""
        queue = self._queues[direction]
        out: list[Entry] = []
        while queue and queue[0][0] <= now:
            entry = queue.popleft()[1]
            if isinstance(entry, bytes):
                self.counters.frames_forwarded += 1
            out.append(entry)
        return out

    def next_release(self, direction: Direction) -> float | None:
        queue = self._queues[direction]
        return queue[0][0] if queue else None


__all__ = [
    "CLOSE",
    "Close",
    "ConnectionBook",
    "Delay",
    "Direction",
    "PolicySource",
    "ProtocolError",
    "ProxyCounters",
    "ProxyPolicy",
    "request_header",
    "response_correlation_id",
]
