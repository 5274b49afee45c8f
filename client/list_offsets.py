"""ListOffsets for a consumer (Kafka's OffsetFetcher.fetchOffsetsByTimes): the offset of each
partition at a timestamp (or -2 earliest, -1 latest), asked of each partition's leader and
retried until a deadline.

    found = await list_offsets(cluster, {tp: timestamp, ...}, deadline)   # {tp: (offset, ts)}

A partition without a known leader waits for a metadata refresh; a broken connection or a
retriable error invalidates the leader and asks again after backoff (at once when the refresh
found every missing leader); other errors raise KafkaError, the deadline KafkaTimeoutError with
the last problem seen.
"""

from __future__ import annotations

import trio

from client.cluster import ClusterClient, backoff_ms, now_ms
from client.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.names import TopicPartition


async def list_offsets(
    cluster: ClusterClient, wanted: dict[TopicPartition, int], deadline: float
) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets for each partition at its leader, retrying retriable errors until
    `deadline`."""
    cluster.topics.update(tp.topic for tp in wanted)
    result: dict[TopicPartition, tuple[int, int]] = {}
    attempt = 0
    last_error = ""
    while True:
        todo = {tp: ts for tp, ts in wanted.items() if tp not in result}
        if not todo:
            return result
        by_node, error = _by_leader(cluster, todo)
        if error is not None:
            last_error = error
        for node, parts in by_node.items():
            error = await _ask_leader(cluster, node, parts, result)
            if error is not None:
                last_error = error
        if all(tp in result for tp in wanted):
            return result
        remaining = deadline - now_ms()
        if remaining <= 0:
            raise KafkaTimeoutError(
                "could not look up offsets before the deadline (default.api.timeout.ms)"
                + (f": {last_error}" if last_error else "")
            )
        attempt += 1
        if cluster.needs_update():
            await cluster.maybe_refresh()
            if _retry_now(cluster, wanted, result):
                continue
        await trio.sleep(
            min(backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms),
                remaining) / 1000
        )  # fmt: skip


def _by_leader(
    cluster: ClusterClient, todo: dict[TopicPartition, int]
) -> tuple[dict[int, dict[TopicPartition, int]], str | None]:
    """`todo` by leader (partitions without one left out, and a metadata refresh asked for),
    with the last problem seen (None: none)."""
    by_node: dict[int, dict[TopicPartition, int]] = {}
    missing = False
    last_error: str | None = None
    for tp, ts in todo.items():
        leader = cluster.metadata.leader_for(tp.topic, tp.partition)
        if leader is None:
            missing = True
            error = cluster.metadata.topic_errors.get(tp.topic)
            if error:
                last_error = error[1]
                if error[0] is ErrorCode.INVALID_TOPIC_EXCEPTION:
                    raise KafkaError(*error)
            elif (n := cluster.metadata.num_partitions(tp.topic)) is not None and not (
                0 <= tp.partition < n
            ):
                last_error = f"partition {tp} does not exist (the topic has {n})"
            continue
        by_node.setdefault(leader, {})[tp] = ts
    if missing:
        cluster.request_update()
    return by_node, last_error


async def _ask_leader(
    cluster: ClusterClient,
    node: int,
    parts: dict[TopicPartition, int],
    result: dict[TopicPartition, tuple[int, int]],
) -> str | None:
    """ListOffsets for `parts` at `node`: answers go to `result`; returns the last retriable
    problem (None: none)."""
    last_error: str | None = None
    try:
        response: ListOffsetsResponse = await cluster.send(node, _list_request(parts))
    except KafkaConnectionError as exc:
        cluster.drop(node)
        cluster.request_update()
        return exc.message
    if response.error_code:
        raise KafkaError(
            ErrorCode.from_wire(response.error_code),
            response.error_message or "ListOffsets failed",
        )
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.index)
            if p.error_code == 0:
                result[tp] = (p.offset, p.timestamp)
                continue
            code = ErrorCode.from_wire(p.error_code)
            message = p.error_message or code.name
            if not code.retriable:
                raise KafkaError(code, f"ListOffsets for {tp}: {message}")
            cluster.metadata.invalidate_leader(tp.topic, tp.partition)
            cluster.request_update()
            last_error = f"{tp}: {message}"
    return last_error


def _retry_now(
    cluster: ClusterClient,
    wanted: dict[TopicPartition, int],
    result: dict[TopicPartition, tuple[int, int]],
) -> bool:
    """After a refresh: retry at once if every missing partition now has a leader."""
    leader_for = cluster.metadata.leader_for
    return all(leader_for(tp.topic, tp.partition) is not None for tp in wanted if tp not in result)


def _list_request(parts: dict[TopicPartition, int]) -> ListOffsetsRequest:
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for tp, ts in parts.items():
        topics.setdefault(tp.topic, []).append(
            ListOffsetsPartition(index=tp.partition, timestamp=ts)
        )
    return ListOffsetsRequest(
        topics=tuple(ListOffsetsTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items())
    )
