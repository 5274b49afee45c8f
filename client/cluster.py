"""Connections to a cluster and the metadata cache behind them (shared by all client kinds).

Nodes are reached lazily by broker id once metadata names them; before that the bootstrap
servers are tried in order (they get negative ids, as in Kafka). Connections whose broker hangs
up are dropped and reopened on the next request.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

import structlog
import trio

from client.config import parse_host_port
from client.connection import BrokerConnection, open_stream
from client.errors import KafkaConnectionError, KafkaTimeoutError
from client.metadata import BrokerInfo, ClusterMetadata
from client.security import client_security
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.quorum_common import LeaderIdAndEpoch, NodeEndpoint

log = structlog.get_logger("client.cluster")


def now_ms() -> float:
    return time.monotonic() * 1000


def backoff_ms(
    attempt: int, base_ms: float, max_ms: float, rng: random.Random = random._inst
) -> float:  # type: ignore[attr-defined]
    """Kafka's exponential backoff with 20% jitter: base * 2^(attempt-1), capped at max."""
    raw = min(base_ms * (2 ** max(attempt - 1, 0)), max(max_ms, base_ms))
    return raw * rng.uniform(0.8, 1.2)


class ClusterClient:
    """Connections by node id plus the metadata cache. Needs a nursery for the readers."""

    def __init__(self, config: dict[str, Any], nursery: trio.Nursery) -> None:
        self._config = config
        self._security = client_security(config)
        """TLS and SASL of `security.protocol` (client.tls, client.sasl)."""
        self._nursery = nursery
        self._bootstrap = [parse_host_port(s) for s in config["bootstrap.servers"]]
        self._client_id = config["client.id"] or None
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, trio.Event] = {}
        self._refresh_lock = trio.Lock()
        self._refresh_done = trio.Event()
        self._refresh_wanted = False
        self._fruitless_refreshes = 0
        """Consecutive refreshes that failed, or that did not give what the client waits for
        (a tracked topic or leader still missing, or nothing changed after an update was
        asked for): Kafka's Metadata `attempts` and `equivalentResponseCount`."""
        self._next_refresh_ms = -float("inf")
        """When the next refresh of the tracked topics may start (drawn once per refresh)."""
        self._asked_topics: set[str] = set()
        """Tracked topics a refresh has asked for; one never asked for is fetched at once
        (Kafka's requestUpdateForNewTopics)."""
        self.metadata = ClusterMetadata()
        self.topics: set[str] = set()
        """Topics to keep metadata for (those the producer or consumer uses)."""
        self.allow_auto_topic_creation = False
        """Ask the broker to create unknown topics named in Metadata requests (Kafka's
        producer does; consumers when allow.auto.create.topics; the broker must also have
        auto.create.topics.enable)."""
        self.request_timeout_ms: float = config["request.timeout.ms"]
        self.retry_backoff_ms: float = config["retry.backoff.ms"]
        self.retry_backoff_max_ms: float = config["retry.backoff.max.ms"]
        self.metadata_max_age_ms: float = config["metadata.max.age.ms"]
        self.reconnect_backoff_ms: float = config["reconnect.backoff.ms"]
        self.reconnect_backoff_max_ms: float = config["reconnect.backoff.max.ms"]
        self._refused: dict[int, tuple[int, float]] = {}
        """Node id -> (failed connects in a row, when the next one may start): Kafka's
        ClusterConnectionStates. Without it a producer with records for a dead broker tried
        to connect ~1,400 times a second until the metadata named another leader."""
        self._closed = False

    # -- connections --------------------------------------------------------------------------

    def connection_if_ready(self, node_id: int) -> BrokerConnection | None:
        conn = self._connections.get(node_id)
        if conn is not None and conn.closed:
            del self._connections[node_id]
            return None
        return conn

    async def connection(self, node_id: int) -> BrokerConnection:
        """An open connection to `node_id`, opening one when needed."""
        conn = self.connection_if_ready(node_id)
        if conn is not None:
            return conn
        if self._closed:
            raise KafkaConnectionError("client is closed")
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return await self._open(node_id, broker.host, broker.port)

    def connection_delay_ms(self, node_id: int) -> float:
        """How long before a connect to `node_id` may start (0: now, or one is under way):
        after failed connects, reconnect.backoff.ms doubling up to reconnect.backoff.max.ms."""
        refused = self._refused.get(node_id)
        if refused is None or node_id in self._connecting:
            return 0.0
        return max(0.0, refused[1] - now_ms())

    def _connect_failed(self, node_id: int) -> None:
        failures = self._refused.get(node_id, (0, 0.0))[0] + 1
        delay = backoff_ms(failures, self.reconnect_backoff_ms, self.reconnect_backoff_max_ms)
        self._refused[node_id] = (failures, now_ms() + delay)

    async def _open(self, node_id: int, host: str, port: int) -> BrokerConnection:
        waiting = self._connecting.get(node_id)
        if waiting is not None:  # someone else is connecting to it: share their result
            await waiting.wait()
            conn = self.connection_if_ready(node_id)
            if conn is None:
                raise KafkaConnectionError(f"cannot connect to broker {host}:{port}")
            return conn
        delay = self.connection_delay_ms(node_id)
        if delay > 0:
            raise KafkaConnectionError(
                f"cannot connect to broker {host}:{port}: backing off {delay:.0f} ms after "
                f"{self._refused[node_id][0]} failed connects (reconnect.backoff.ms)"
            )
        event = self._connecting[node_id] = trio.Event()
        try:
            try:
                stream = await open_stream(
                    host, port, self._config["socket.connection.setup.timeout.ms"],
                    self._security.tls,
                )  # fmt: skip
            except KafkaConnectionError:
                self._connect_failed(node_id)
                raise
            self._refused.pop(node_id, None)
            conn = BrokerConnection(
                stream,
                address=f"{host}:{port}",
                node_id=node_id,
                client_id=self._client_id,
                max_in_flight=self._config["max.in.flight.requests.per.connection"],
                request_timeout_ms=self.request_timeout_ms,
            )
            await self._nursery.start(conn.reader)
            try:
                await self._security.authenticate(conn)
            except KafkaError:
                self._connect_failed(node_id)  # no login storm on a refusing broker
                raise
            self._connections[node_id] = conn
            return conn
        finally:
            if self._connecting.get(node_id) is event:
                del self._connecting[node_id]
            event.set()

    async def send(self, node_id: int, request: Request, *, timeout_ms: float | None = None) -> Any:
        conn = await self.connection(node_id)
        return await conn.request(request, timeout_ms=timeout_ms)

    async def send_to(
        self,
        connection_id: int,
        host: str,
        port: int,
        request: Request,
        *,
        timeout_ms: float | None = None,
    ) -> Any:
        """Send on a connection of our own naming to an address not taken from metadata (a
        group coordinator: Kafka gives it a separate connection, id MAX_INT - node id, so its
        long JoinGroups do not hold up fetches from the same broker)."""
        conn = self.connection_if_ready(connection_id)
        if conn is None:
            if self._closed:
                raise KafkaConnectionError("client is closed")
            conn = await self._open(connection_id, host, port)
        return await conn.request(request, timeout_ms=timeout_ms)

    async def send_any(self, request: Request, *, timeout_ms: float | None = None) -> Any:
        """Send to a connected broker if any, else a known one, else a bootstrap server."""
        conn = await self._any_connection()
        return await conn.request(request, timeout_ms=timeout_ms)

    async def _any_connection(self) -> BrokerConnection:
        for node_id in list(self._connections):
            conn = self.connection_if_ready(node_id)
            if conn is not None and conn.can_send:
                return conn
        errors: list[str] = []
        candidates: list[tuple[int, str, int]] = [
            (b.node_id, b.host, b.port) for b in self.metadata.brokers.values()
        ]
        random.shuffle(candidates)
        candidates += [(-1 - i, h, p) for i, (h, p) in enumerate(self._bootstrap)]
        for node_id, host, port in candidates:
            conn = self.connection_if_ready(node_id)
            if conn is not None:
                return conn
            try:
                return await self._open(node_id, host, port)
            except KafkaConnectionError as exc:
                errors.append(exc.message)
        raise KafkaConnectionError("; ".join(dict.fromkeys(errors)) or "no broker to connect to")

    def drop(self, node_id: int) -> None:
        """Forget a connection after a failure; the next request opens a new one."""
        conn = self._connections.pop(node_id, None)
        if conn is not None:
            self._nursery.start_soon(conn.aclose)

    # -- metadata -----------------------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> MetadataResponse:
        """Fetch metadata for `topics` (None: every topic) and update the cache."""
        wanted = None if topics is None else tuple(sorted(set(topics)))
        self._asked_topics.update(wanted or ())
        response: MetadataResponse = await self.send_any(
            MetadataRequest(
                topics=wanted,
                allow_auto_topic_creation=bool(wanted) and self.allow_auto_topic_creation,
            )
        )
        if response.error_code:
            raise KafkaError(
                ErrorCode.from_wire(response.error_code),
                response.error_message or "Metadata request failed",
            )
        self.metadata.update(response, now_ms(), all_topics=wanted is None)
        return response

    def take_leader_hint(
        self,
        topic: str,
        partition: int,
        current_leader: LeaderIdAndEpoch | None,
        endpoints: Sequence[NodeEndpoint],
    ) -> bool:
        """Use the leader an error answer named (KIP-951) instead of asking for metadata; True
        when it was newer than the one known and is now the partition's leader."""
        if current_leader is None or current_leader.leader_id < 0:
            return False
        endpoint = next((e for e in endpoints if e.node_id == current_leader.leader_id), None)
        known = None if endpoint is None else self.metadata.brokers.get(endpoint.node_id)
        info = (
            None
            if endpoint is None
            else BrokerInfo(
                endpoint.node_id, endpoint.host, endpoint.port, known.rack if known else None
            )
        )
        return self.metadata.apply_leader_hint(
            topic, partition, current_leader.leader_id, current_leader.leader_epoch, info
        )

    def request_update(self) -> None:
        """Ask for a refresh of the tracked topics (after a leadership error, or to find a
        leader): it starts once the refresh backoff allows (`refresh_delay_ms`)."""
        self._refresh_wanted = True

    def update_requested(self) -> bool:
        """Whether a refresh was asked for and has not started yet (it may be backing off)."""
        return self._refresh_wanted

    def needs_update(self) -> bool:
        """Whether `maybe_refresh` would refresh now: a tracked topic never asked for, or an
        update asked for or metadata.max.age.ms passed, once the refresh backoff allows;
        never while one is under way."""
        if self._refresh_lock.locked():
            return False
        if not self.topics <= self._asked_topics:
            return True
        now = now_ms()
        if now < self._next_refresh_ms:
            return False
        return self._refresh_wanted or (self.metadata.age_ms(now) >= self.metadata_max_age_ms)

    def refresh_delay_ms(self) -> float:
        """How long before the refresh backoff lets the next refresh start (0: now)."""
        if not self.topics <= self._asked_topics:
            return 0.0
        return max(0.0, self._next_refresh_ms - now_ms())

    async def refresh_when_allowed(self) -> None:
        """Wait for the refresh under way, or refresh the tracked topics once the refresh
        backoff allows (if a refresh is still wanted then). For a caller that cannot go on
        without fresh metadata: returning at once would have it ask again in a loop."""
        if self._refresh_lock.locked():
            await self._refresh_done.wait()
            return
        delay = self.refresh_delay_ms()
        if delay > 0:
            await trio.sleep(delay / 1000)
        await self.maybe_refresh()

    def _tracked_view(
        self,
    ) -> tuple[dict[tuple[str, int], tuple[int, int, bool]], frozenset[BrokerInfo]]:
        """What a refresh may change for the client: (leader, leader epoch, whether the leader
        is a live broker) of every known partition of the tracked topics, and the brokers.
        Taken from the responses, not from leaders the client set aside after a
        NOT_LEADER_OR_FOLLOWER answer (a refresh that names the same leader again changed
        nothing)."""
        brokers = self.metadata.brokers
        out = {}
        for topic in self.topics:
            info = self.metadata.topics.get(topic)
            if info is not None:
                for p in info.partitions:
                    out[(topic, p.partition)] = (p.leader, p.leader_epoch, p.leader in brokers)
        return out, frozenset(brokers.values())

    async def maybe_refresh(self) -> None:
        """Refresh the tracked topics if wanted or stale, once the refresh backoff allows;
        errors are logged, not raised.

        The backoff is Kafka's Metadata.timeToAllowUpdate (KIP-580): after every refresh the
        next waits retry.backoff.ms (20% jitter), doubling up to retry.backoff.max.ms per
        refresh in a row that failed, or that did not give what the client waits for: one
        that still lacks a tracked topic or a partition leader, or one that was asked for
        (`request_update`: a NOT_LEADER_OR_FOLLOWER answer, a partition without a leader)
        and changed nothing (Kafka's equivalent responses). A refresh that changed a tracked
        partition's leader or epoch, a topic or the brokers (a failover's changes landing
        step by step) sets it back to retry.backoff.ms; a topic never asked for is fetched at
        once. Without it a client with every broker down, a partition without a leader, or a
        broker that keeps answering NOT_LEADER_OR_FOLLOWER while the metadata names it,
        asked again at once, forever (~900 Metadata requests a second)."""
        if not self.needs_update() or self._refresh_lock.locked():
            return
        async with self._refresh_lock:
            asked_for = self._refresh_wanted
            self._refresh_wanted = False
            before = self._tracked_view()
            try:
                await self.refresh_metadata(self.topics)
            except KafkaError as exc:
                self._refresh_wanted = True
                self._fruitless_refreshes += 1
                log.info(
                    "metadata refresh failed", error=str(exc), attempt=self._fruitless_refreshes
                )
            else:
                if self._tracked_view() != before:
                    self._fruitless_refreshes = 0  # progress
                elif asked_for or not self.metadata.complete_for(self.topics):
                    self._fruitless_refreshes += 1  # nothing new for whoever waits
                else:
                    self._fruitless_refreshes = 0  # a periodic refresh (metadata.max.age.ms)
            finally:
                self._next_refresh_ms = now_ms() + backoff_ms(
                    max(self._fruitless_refreshes, 1),
                    self.retry_backoff_ms,
                    self.retry_backoff_max_ms,
                )
                done, self._refresh_done = self._refresh_done, trio.Event()
                done.set()

    async def wait_for_topic(self, topic: str, deadline_ms: float, what: str) -> int:
        """Partition count of `topic`, refreshing until it appears or `deadline_ms` passes."""
        self.topics.add(topic)
        attempt = 0
        last = ""
        while True:
            count = self.metadata.num_partitions(topic)
            if count is not None:
                return count
            attempt += 1
            try:
                await self.refresh_metadata(self.topics)
            except KafkaConnectionError as exc:
                last = exc.message
            error = self.metadata.topic_errors.get(topic)
            if error is not None:
                code, message = error
                if code in (
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                ):
                    raise KafkaError(code, message)
                last = message
            count = self.metadata.num_partitions(topic)
            if count is not None:
                return count
            remaining = deadline_ms - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after {what}"
                    + (f" ({last})" if last else "")
                )
            await trio.sleep(
                min(backoff_ms(attempt, self.retry_backoff_ms, self.retry_backoff_max_ms),
                    remaining) / 1000
            )  # fmt: skip

    async def aclose(self) -> None:
        self._closed = True
        for conn in list(self._connections.values()):
            await conn.aclose()
        self._connections.clear()
