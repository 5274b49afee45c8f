"""Admin.elect_leaders / alter_partition_reassignments / list_partition_reassignments against
an in-memory broker that plays the controller, including per-item NOT_CONTROLLER answers (a
forwarded request meeting a controller election) that the client must resend."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from client import (
    Admin,
    ElectionType,
    KafkaError,
    NewTopic,
    PartitionReassignment,
    TopicPartition,
)
from client.errors import KafkaTimeoutError
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.elect_leaders import (
    ElectLeadersPartitionResult,
    ElectLeadersResponse,
    ReplicaElectionResult,
)
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from protocol.messages.topics import CreatableTopicResult, DeletableTopicResult
from tests.unit.client.fake_broker import FakeBroker


class ControllerBroker(FakeBroker):
    """Answers the leader and reassignment APIs; `not_controller` partitions are answered
    NOT_CONTROLLER that many more times."""

    def __init__(self) -> None:
        super().__init__()
        self.leaders: dict[TopicPartition, int] = {}
        self.preferred: dict[TopicPartition, int] = {}
        self.ongoing: dict[TopicPartition, tuple[int, ...]] = {}
        self.not_controller: dict[TopicPartition, int] = {}
        self.request_level_not_controller = 0
        self.topic_not_controller: dict[str, int] = {}

    def _item(self, tp: TopicPartition) -> ErrorCode | None:
        if self.not_controller.get(tp, 0) > 0:
            self.not_controller[tp] -= 1
            return ErrorCode.NOT_CONTROLLER
        return None

    def _answer(self, key: ApiKey, req: Any) -> Any:
        if key in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS):
            names = [t.name for t in req.topics] if key is ApiKey.CREATE_TOPICS else req.topic_names
            refused = [n for n in names if self.topic_not_controller.get(n, 0) > 0]
            for n in refused:
                self.topic_not_controller[n] -= 1
            if key is ApiKey.CREATE_TOPICS:
                rest = dataclasses.replace(
                    req, topics=tuple(t for t in req.topics if t.name not in refused)
                )
                answer = super()._answer(key, rest)
                extra = tuple(
                    CreatableTopicResult(name=n, error_code=int(ErrorCode.NOT_CONTROLLER))
                    for n in refused
                )
                return dataclasses.replace(answer, topics=answer.topics + extra)
            rest = dataclasses.replace(req, topic_names=tuple(n for n in names if n not in refused))
            answer = super()._answer(key, rest)
            extra_deleted = tuple(
                DeletableTopicResult(name=n, error_code=int(ErrorCode.NOT_CONTROLLER))
                for n in refused
            )
            return dataclasses.replace(answer, responses=answer.responses + extra_deleted)
        if key is ApiKey.ELECT_LEADERS:
            if self.request_level_not_controller:
                self.request_level_not_controller -= 1
                return ElectLeadersResponse(error_code=int(ErrorCode.NOT_CONTROLLER))
            asked = (
                list(self.preferred)
                if req.topic_partitions is None
                else [
                    TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions
                ]
            )
            by_topic: dict[str, list[ElectLeadersPartitionResult]] = {}
            for tp in asked:
                code = self._item(tp)
                if code is None:
                    if tp not in self.preferred:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif self.leaders[tp] == self.preferred[tp]:
                        code = ErrorCode.ELECTION_NOT_NEEDED
                    else:
                        self.leaders[tp] = self.preferred[tp]
                        code = ErrorCode.NONE
                by_topic.setdefault(tp.topic, []).append(
                    ElectLeadersPartitionResult(
                        partition_id=tp.partition,
                        error_code=int(code),
                        error_message=None if code is ErrorCode.NONE else f"{code.name} for {tp}",
                    )
                )
            return ElectLeadersResponse(
                replica_election_results=tuple(
                    ReplicaElectionResult(topic=t, partition_result=tuple(rs))
                    for t, rs in by_topic.items()
                )
            )
        if key is ApiKey.ALTER_PARTITION_REASSIGNMENTS:
            topics = []
            for t in req.topics:
                results = []
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    code = self._item(tp) or ErrorCode.NONE
                    if code is ErrorCode.NONE:
                        if p.replicas is None:
                            if self.ongoing.pop(tp, None) is None:
                                code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                        else:
                            self.ongoing[tp] = tuple(p.replicas)
                    results.append(
                        ReassignablePartitionResponse(
                            partition_index=p.partition_index,
                            error_code=int(code),
                            error_message=None if code is ErrorCode.NONE else "no reassignment",
                        )
                    )
                topics.append(ReassignableTopicResponse(name=t.name, partitions=tuple(results)))
            return AlterPartitionReassignmentsResponse(responses=tuple(topics))
        if key is ApiKey.LIST_PARTITION_REASSIGNMENTS:
            wanted = (
                None
                if req.topics is None
                else {TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes}
            )
            by_name: dict[str, list[OngoingPartitionReassignment]] = {}
            for tp, target in self.ongoing.items():
                if wanted is None or tp in wanted:
                    by_name.setdefault(tp.topic, []).append(
                        OngoingPartitionReassignment(
                            partition_index=tp.partition,
                            replicas=(1, *target),
                            adding_replicas=target,
                            removing_replicas=(1,),
                        )
                    )
            return ListPartitionReassignmentsResponse(
                topics=tuple(
                    OngoingTopicReassignment(name=n, partitions=tuple(ps))
                    for n, ps in by_name.items()
                )
            )
        return super()._answer(key, req)


@pytest.fixture
async def controller(nursery: trio.Nursery) -> AsyncIterator[ControllerBroker]:
    broker = ControllerBroker()
    await nursery.start(broker.serve)
    yield broker


def admin_for(broker: FakeBroker, **config: Any) -> Admin:
    return Admin(
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        **config,
    )


T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


async def test_elect_leaders_reports_elected_not_needed_and_failed(
    controller: ControllerBroker,
) -> None:
    controller.preferred = {T0: 1, T1: 2}
    controller.leaders = {T0: 3, T1: 2}
    async with admin_for(controller) as admin:
        results = await admin.elect_leaders("preferred", [T0, T1, U0])
    assert results[T0] is None
    not_needed = results[T1]
    assert isinstance(not_needed, KafkaError)
    assert not_needed.code is ErrorCode.ELECTION_NOT_NEEDED
    unknown = results[U0]
    assert unknown is not None and unknown.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert controller.leaders[T0] == 1
    (request,) = [r for r in controller.requests if type(r).__name__ == "ElectLeadersRequest"]
    assert request.election_type == int(ElectionType.PREFERRED)


async def test_elect_leaders_resends_only_the_partitions_answered_not_controller(
    controller: ControllerBroker,
) -> None:
    controller.preferred = {T0: 1, T1: 1}
    controller.leaders = {T0: 2, T1: 2}
    controller.not_controller = {T1: 2}
    async with admin_for(controller) as admin:
        results = await admin.elect_leaders(ElectionType.PREFERRED, [T0, T1])
    # T0's first answer (elected) is kept, not replaced by a second try's ELECTION_NOT_NEEDED.
    assert results == {T0: None, T1: None}
    sent = [r for r in controller.requests if type(r).__name__ == "ElectLeadersRequest"]
    assert len(sent) == 3
    assert [[(t.topic, t.partitions) for t in r.topic_partitions] for r in sent[1:]] == [
        [("t", (1,))],
        [("t", (1,))],
    ]


async def test_elect_leaders_for_all_partitions_retries_request_level_not_controller(
    controller: ControllerBroker,
) -> None:
    controller.preferred = {T0: 1}
    controller.leaders = {T0: 2}
    controller.request_level_not_controller = 2
    async with admin_for(controller) as admin:
        results = await admin.elect_leaders("unclean")
    assert results == {T0: None}
    sent = [r for r in controller.requests if type(r).__name__ == "ElectLeadersRequest"]
    assert all(r.topic_partitions is None and r.election_type == 1 for r in sent)


async def test_not_controller_forever_gives_up_at_the_api_timeout(
    controller: ControllerBroker,
) -> None:
    controller.preferred = {T0: 1}
    controller.leaders = {T0: 2}
    controller.not_controller = {T0: 10**9}
    async with admin_for(controller, default_api_timeout_ms=300) as admin:
        with trio.fail_after(10):
            results = await admin.elect_leaders("preferred", [T0])
    error = results[T0]
    assert error is not None and error.code is ErrorCode.NOT_CONTROLLER
    controller.request_level_not_controller = 10**9
    async with admin_for(controller, default_api_timeout_ms=300) as admin:
        with trio.fail_after(10), pytest.raises(KafkaTimeoutError, match="NOT_CONTROLLER"):
            await admin.elect_leaders("preferred", [T0])


async def test_elect_leaders_rejects_an_unknown_election_type(
    controller: ControllerBroker,
) -> None:
    async with admin_for(controller) as admin:
        with pytest.raises(ValueError, match="'sideways' is not one of: preferred, unclean"):
            await admin.elect_leaders("sideways", [T0])


async def test_reassignments_start_list_and_cancel(controller: ControllerBroker) -> None:
    controller.not_controller = {T0: 1}
    async with admin_for(controller) as admin:
        await admin.alter_partition_reassignments({T0: [2, 3], U0: (3, 4)})
        assert controller.ongoing == {T0: (2, 3), U0: (3, 4)}
        listed = await admin.list_partition_reassignments()
        assert listed[T0] == PartitionReassignment((1, 2, 3), (2, 3), (1,))
        assert set(listed) == {T0, U0}
        assert set(await admin.list_partition_reassignments([U0, T1])) == {U0}
        await admin.alter_partition_reassignments({T0: None})
        assert set(await admin.list_partition_reassignments()) == {U0}
        with pytest.raises(KafkaError, match="t-0: no reassignment") as info:
            await admin.alter_partition_reassignments({T0: None})
        assert info.value.code is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


async def test_create_and_delete_topics_resend_the_topics_answered_not_controller(
    controller: ControllerBroker,
) -> None:
    controller.topic_not_controller = {"b": 2}
    async with admin_for(controller) as admin:
        created = await admin.create_topics([NewTopic("a", 1), NewTopic("b", 2)])
        assert [c.name for c in created] == ["a", "b"]
        assert set(controller.topics) == {"a", "b"}
        sent = [r for r in controller.requests if type(r).__name__ == "CreateTopicsRequest"]
        assert [[t.name for t in r.topics] for r in sent] == [["a", "b"], ["b"], ["b"]]
        controller.topic_not_controller = {"a": 1}
        await admin.delete_topics(["a", "b"])
        assert controller.topics == {}
        with pytest.raises(KafkaError, match="topic 'a' does not exist"):
            await admin.delete_topics(["a"])
