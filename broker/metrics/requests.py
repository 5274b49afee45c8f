"""Kafka's RequestMetrics (kafka.network:type=RequestMetrics), per API, fed by broker.server,
under the jmx_exporter names Kafka dashboards read (protocol.metric_names: `RequestsPerSec` is
`kafka_network_requestmetrics_requests_total`, `TotalTimeMs` the histogram
`kafka_network_requestmetrics_totaltimems`). Labels as Kafka's MBean keys: `request`, and
`error` on the errors; Kafka's `version` key (the request's API version) is left out.

Each request's life is split as Kafka's RequestChannel splits it (all in milliseconds):

    received --RequestQueueTimeMs--> handler starts --LocalTimeMs--> local work done
      --RemoteTimeMs--> response ready --ResponseQueueTimeMs--> sending
      --ResponseSendTimeMs--> sent                     (TotalTimeMs: received -> sent)

"Local work done" is when the handler parks the request in a purgatory (`awaiting_remote()`:
an acks=all Produce waiting for the ISR, a Fetch long poll, a request forwarded to the
controller); a handler that never parks has no remote time. "Response queue" is the wait for
the answers before it on the same connection (responses go out in request order).

Counters: `RequestsPerSec{request}` and `ErrorsPerSec{request,error}`, every error code of the
response counted (each topic/partition entry's, and the request-level one when it is an error
or the response has no entries: `error_counts`), `error="NONE"` included (Kafka's: "If a response contains multiple errors, all are counted. error=NONE
indicates successful responses"). Fetch is counted as `Fetch` and, as Kafka's, also as
`FetchConsumer` or `FetchFollower` for the rate and the times; errors under `Fetch` only.

Everything is recorded once per request, by the connection's writer after the send, through
per-API children looked up once (no label lookup on the hot path).
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import time
import typing
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.metric_names import ERRORS, REQUEST_TIME_NAMES, REQUEST_TIMES, REQUESTS

MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
"""Milliseconds, from a fast in-memory answer to a long poll or a request timeout."""

TIME_METRICS = REQUEST_TIMES
"""Kafka's names of the request time histograms, in the order a request lives them."""


def request_name(api_key: ApiKey) -> str:
    """Kafka's ApiKeys name: PRODUCE -> Produce, OFFSET_FOR_LEADER_EPOCH -> OffsetForLeaderEpoch."""
    return "".join(word.capitalize() for word in api_key.name.split("_"))


def metric_names(api_key: ApiKey, body: object) -> tuple[str, ...]:
    """The `request` labels a request's rate and times go to."""
    name = request_name(api_key)
    if api_key == ApiKey.FETCH:
        follower = getattr(body, "replica_id", -1) >= 0
        return (name, "FetchFollower" if follower else "FetchConsumer")
    return (name,)


@dataclass(slots=True)
class RequestTiming:
    """Monotonic seconds (time.perf_counter) of one request's milestones; 0.0 = not yet."""

    received: float
    dequeued: float = 0.0
    local_done: float = 0.0
    response_done: float = 0.0
    send_start: float = 0.0
    sent: float = 0.0
    on_park: Callable[[], None] | None = None
    """Called at the first `awaiting_remote()` (the server: a parked request stops counting
    against queued.max.requests)."""


_current: contextvars.ContextVar[RequestTiming | None] = contextvars.ContextVar(
    "request_timing", default=None
)


def start_handling(timing: RequestTiming) -> None:
    """The server's request task: the handler starts now (its context is the task's own)."""
    timing.dequeued = time.perf_counter()
    _current.set(timing)


def awaiting_remote() -> None:
    """A handler parks the request (purgatory, controller): its local time ends here. Only
    the first call counts; outside a request it does nothing."""
    timing = _current.get()
    if timing is not None and not timing.local_done:
        timing.local_done = time.perf_counter()
        if timing.on_park is not None:
            timing.on_park()


# -- error counts ----------------------------------------------------------------------------

_NESTED: dict[type, tuple[str, ...]] = {}
"""Per response class: the fields holding tuples of entries that carry their own errors."""


def _nested_fields(cls: type) -> tuple[str, ...]:
    fields = _NESTED.get(cls)
    if fields is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an unresolvable annotation: no nested errors for this class
            hints = {}
        found = []
        for f in dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ():
            hint = hints.get(f.name)
            if typing.get_origin(hint) is tuple:
                args = typing.get_args(hint)
                if args and dataclasses.is_dataclass(args[0]):
                    found.append(f.name)
        fields = _NESTED[cls] = tuple(found)
    return fields


_error_code = attrgetter("error_code")


def _tally(entries: Iterable[object], counts: Tally[int]) -> None:
    entries = tuple(entries)
    if not entries:
        return
    cls = type(entries[0])
    if hasattr(entries[0], "error_code"):
        counts.update(map(_error_code, entries))
    for name in _nested_fields(cls):
        getter = attrgetter(name)
        for entry in entries:
            _tally(getter(entry), counts)


def error_counts(response: object) -> Tally[int]:
    """The error codes of `response`, as Kafka's AbstractResponse.errorCounts: every code of
    its topic/partition entries (any nesting of tuples of dataclasses), and its own
    request-level code when that is an error or when it has no entries. (Every trioka response
    has a request-level code; most of Kafka's with entries have none, so a successful
    Produce counts one NONE per partition, not one more for the request.)"""
    counts: Tally[int] = Tally()
    for name in _nested_fields(type(response)):
        _tally(getattr(response, name), counts)
    own = getattr(response, "error_code", None)
    if own is not None and (own != 0 or not counts):
        counts[own] += 1
    return counts


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# -- the metrics -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ApiChildren:
    requests: typing.Any
    times: tuple[typing.Any, ...]  # in TIME_METRICS order


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.requests = Counter(
            REQUESTS,
            "Requests answered, per API (RequestsPerSec; rate() gives Kafka's meter).",
            ["request"],
            registry=registry,
        )
        self.errors = Counter(
            ERRORS,
            "Error codes in responses, per API and error name, error=NONE included; every "
            "partition's error counts (ErrorsPerSec).",
            ["request", "error"],
            registry=registry,
        )
        docs = {
            "TotalTimeMs": "from the request received to its response sent",
            "RequestQueueTimeMs": "from the request received to its handler starting",
            "LocalTimeMs": "handled locally, until done or parked in a purgatory",
            "RemoteTimeMs": "parked: acks=all waiting for the ISR, a long poll, the controller",
            "ResponseQueueTimeMs": "waiting for earlier responses of the connection",
            "ResponseSendTimeMs": "writing the response to the socket",
        }
        self.times = {
            name: Histogram(
                REQUEST_TIME_NAMES[name],
                f"Per API, ms {doc} ({name}).",
                ["request"],
                buckets=MS_BUCKETS,
                registry=registry,
            )
            for name, doc in docs.items()
        }
        self._children: dict[str, _ApiChildren] = {}
        self._error_children: dict[tuple[str, int], typing.Any] = {}

    def _api(self, name: str) -> _ApiChildren:
        children = self._children.get(name)
        if children is None:
            children = _ApiChildren(
                self.requests.labels(name),
                tuple(self.times[t].labels(name) for t in TIME_METRICS),
            )
            self._children[name] = children
        return children

    def record(self, names: tuple[str, ...], timing: RequestTiming) -> None:
        """One answered request (acks=0 Produce: nothing sent, `timing.sent` = response_done)."""
        t = timing
        dequeued = t.dequeued or t.received
        response_done = t.response_done or dequeued
        local_done = t.local_done or response_done
        send_start = t.send_start or response_done
        sent = t.sent or send_start
        values = (
            sent - t.received,
            dequeued - t.received,
            local_done - dequeued,
            response_done - local_done,
            send_start - response_done,
            sent - send_start,
        )
        for name in names:
            children = self._api(name)
            children.requests.inc()
            for histogram, seconds in zip(children.times, values, strict=True):
                histogram.observe(seconds * 1000)

    def record_errors(self, name: str, counts: Tally[int]) -> None:
        for code, n in counts.items():
            child = self._error_children.get((name, code))
            if child is None:
                child = self.errors.labels(name, error_name(code))
                self._error_children[(name, code)] = child
            child.inc(n)


@functools.cache  # the process-wide default pattern: docs/internals.md, "Metrics"
def default_request_metrics() -> RequestMetrics:
    """The process-wide instance on prometheus_client's global registry."""
    return RequestMetrics()
