"""The admin APIs the controller answers (Kafka's KafkaApis.handleCreateTopicsRequest, ...):
CreateTopics and DeleteTopics, checked here and forwarded (answered once the image has their
effect); CreatePartitions, ElectLeaders and the reassignment APIs relayed as they are."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from broker.handlers.forwarding import ControllerForwarder
from broker.handlers.router import Handler
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """What CreateTopics fills in when a topic asks -1 (num.partitions,
    default.replication.factor), and whether DeleteTopics is served (delete.topic.enable)."""

    num_partitions: int
    replication_factor: int
    delete_topic_enable: bool


class AdminHandler:
    def __init__(self, forwarder: ControllerForwarder, defaults: TopicDefaults) -> None:
        self.forwarder = forwarder
        self.defaults = defaults

    def handlers(self) -> Mapping[ApiKey, Handler]:
        relay = self.forwarder.relay
        return {
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: relay,
            ApiKey.ELECT_LEADERS: relay,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: relay,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: relay,
        }

    async def create_topics(
        self, request: CreateTopicsRequest, conn: ConnectionInfo
    ) -> CreateTopicsResponse:
        counts = Counter(t.name for t in request.topics)
        results: dict[str, CreatableTopicResult] = {}
        forward = []
        for topic in request.topics:
            if counts[topic.name] > 1:
                results[topic.name] = CreatableTopicResult(
                    name=topic.name,
                    error_code=int(ErrorCode.INVALID_REQUEST),
                    error_message=f"topic {topic.name!r} appears more than once in the request",
                )
                continue
            forward.append(self._with_defaults(topic))
        if forward:
            try:
                response = await self.forwarder.forward(replace(request, topics=tuple(forward)))
                for r in response.topics:  # type: ignore[attr-defined]
                    results[r.name] = r
            except KafkaError as exc:
                for t in forward:
                    results[t.name] = CreatableTopicResult(
                        name=t.name, error_code=int(exc.code), error_message=exc.message
                    )
        ordered = [results[name] for name in dict.fromkeys(t.name for t in request.topics)]
        return CreateTopicsResponse(topics=tuple(ordered))

    def _with_defaults(self, topic: CreatableTopic) -> CreatableTopic:
        """The broker's defaults for what the topic leaves at -1 (the controller has none of
        its own); explicit assignments say it all."""
        if topic.assignments:
            return topic
        return replace(
            topic,
            num_partitions=topic.num_partitions
            if topic.num_partitions != -1
            else self.defaults.num_partitions,
            replication_factor=topic.replication_factor
            if topic.replication_factor != -1
            else self.defaults.replication_factor,
        )

    async def delete_topics(
        self, request: DeleteTopicsRequest, conn: ConnectionInfo
    ) -> DeleteTopicsResponse:
        if not self.defaults.delete_topic_enable:
            return _every_topic_failed(
                request,
                ErrorCode.TOPIC_DELETION_DISABLED,
                "topic deletion is disabled (delete.topic.enable=false)",
            )
        try:
            response = await self.forwarder.forward(request)
        except KafkaError as exc:
            return _every_topic_failed(request, exc.code, exc.message)
        assert isinstance(response, DeleteTopicsResponse)
        return response


def _every_topic_failed(
    request: DeleteTopicsRequest, code: ErrorCode, message: str
) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(
        responses=tuple(
            DeletableTopicResult(name=n, error_code=int(code), error_message=message)
            for n in request.topic_names
        )
    )
