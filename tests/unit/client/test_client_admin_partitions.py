"""Admin.create_partitions (Kafka's Admin.createPartitions / NewPartitions) against an
in-memory broker that plays the controller: the request it sends, per-topic errors raised with
the controller's message, and topics answered NOT_CONTROLLER resent alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from client import Admin, KafkaError, NewPartitions
from client.sync import SyncAdmin
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.create_partitions import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from tests.unit.client.fake_broker import FakeBroker, FakePartition


class PartitionsBroker(FakeBroker):
    """Answers CreatePartitions as a controller would; `not_controller[topic]` more answers
    are NOT_CONTROLLER for that topic."""

    def __init__(self) -> None:
        super().__init__()
        self.not_controller: dict[str, int] = {}

    def _answer(self, key: ApiKey, req: Any) -> Any:
        if key is not ApiKey.CREATE_PARTITIONS:
            return super()._answer(key, req)
        results = []
        for t in req.topics:
            code, message = ErrorCode.NONE, None
            current = self.topics.get(t.name)
            if self.not_controller.get(t.name, 0) > 0:
                self.not_controller[t.name] -= 1
                code = ErrorCode.NOT_CONTROLLER
            elif current is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # no message: the client says it
            elif t.count <= len(current):
                code = ErrorCode.INVALID_PARTITIONS
                message = (
                    f"The topic {t.name} currently has {len(current)} partition(s); "
                    f"{t.count} would not be an increase."
                )
            elif not req.validate_only:
                current.extend(FakePartition() for _ in range(t.count - len(current)))
            results.append(
                CreatePartitionsTopicResult(
                    name=t.name, error_code=int(code), error_message=message
                )
            )
        return CreatePartitionsResponse(results=tuple(results))


@pytest.fixture
async def broker(nursery: trio.Nursery) -> AsyncIterator[PartitionsBroker]:
    fake = PartitionsBroker()
    await nursery.start(fake.serve)
    yield fake


def admin_for(broker: FakeBroker, **config: Any) -> Admin:
    return Admin(
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        **config,
    )


def sent(broker: FakeBroker) -> list[Any]:
    return [r for r in broker.requests if type(r).__name__ == "CreatePartitionsRequest"]


async def test_grows_topics_with_counts_and_assignments(broker: PartitionsBroker) -> None:
    broker.create("a", 1)
    broker.create("b", 2)
    async with admin_for(broker) as admin:
        await admin.create_partitions({"a": 3, "b": NewPartitions(3, [[1, 2]])})
        assert [len(broker.topics[n]) for n in ("a", "b")] == [3, 3]
        await admin.create_partitions({"a": 4}, assignments={"a": [[3, 1, 2]]})
        await admin.create_partitions({"b": 9}, validate_only=True)
    assert len(broker.topics["a"]) == 4
    assert len(broker.topics["b"]) == 3  # validate_only changed nothing
    first, second, third = sent(broker)
    assert [(t.name, t.count, t.assignments) for t in first.topics] == [
        ("a", 3, None),
        ("b", 3, ((first.topics[1].assignments or ())[0],)),
    ]
    assert [a.broker_ids for a in first.topics[1].assignments or ()] == [(1, 2)]
    assert [a.broker_ids for a in second.topics[0].assignments or ()] == [(3, 1, 2)]
    assert third.validate_only and not first.validate_only


async def test_shrinking_and_unknown_topics_raise_the_controllers_message(
    broker: PartitionsBroker,
) -> None:
    broker.create("a", 3)
    async with admin_for(broker) as admin:
        with pytest.raises(KafkaError) as shrink:
            await admin.create_partitions({"a": 1})
        assert shrink.value.code is ErrorCode.INVALID_PARTITIONS
        assert shrink.value.message == (
            "The topic a currently has 3 partition(s); 1 would not be an increase."
        )
        with pytest.raises(KafkaError, match="topic 'nope' does not exist") as unknown:
            await admin.create_partitions({"nope": 2})
        assert unknown.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_resends_only_the_topics_answered_not_controller(broker: PartitionsBroker) -> None:
    broker.create("a", 1)
    broker.create("b", 1)
    broker.not_controller = {"b": 2}
    async with admin_for(broker) as admin:
        await admin.create_partitions({"a": 2, "b": 2})
    assert [[t.name for t in r.topics] for r in sent(broker)] == [["a", "b"], ["b"], ["b"]]
    assert [len(broker.topics[n]) for n in ("a", "b")] == [2, 2]


async def test_bad_arguments_are_refused_before_sending(broker: PartitionsBroker) -> None:
    async with admin_for(broker) as admin:
        with pytest.raises(ValueError, match="assignments for topics without a new count: x"):
            await admin.create_partitions({"a": 2}, assignments={"x": [[1]]})
        with pytest.raises(ValueError, match="a: assignments given twice"):
            await admin.create_partitions({"a": NewPartitions(2, [[1]])}, assignments={"a": [[2]]})
        with pytest.raises(ValueError, match="a: the new partition count must be an int"):
            await admin.create_partitions({"a": "3"})  # type: ignore[dict-item]
        with pytest.raises(KafkaError, match=r"INVALID_TOPIC_EXCEPTION|topic"):
            await admin.create_partitions({"bad name!": 2})
        await admin.create_partitions({})
    assert sent(broker) == []


async def test_sync_admin_create_partitions(broker: PartitionsBroker) -> None:
    broker.create("a", 1)

    def script() -> None:  # in a worker thread while the fake broker runs in trio
        with SyncAdmin(bootstrap_servers=f"127.0.0.1:{broker.port}") as admin:
            admin.create_partitions({"a": 2})

    await trio.to_thread.run_sync(script)
    assert len(broker.topics["a"]) == 2
