"""DescribeConfigs (answered from this broker's metadata image and its own config) and
IncrementalAlterConfigs (topic configs forwarded to the controller; dynamic broker configs are
not served)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from broker.config import BROKER_CONFIGS, BrokerConfig
from broker.handlers.router import Handler
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey, Request, Response
from protocol.messages.configs import (
    AlterConfigsResourceResponse,
    ConfigSource,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ResourceType,
)
from protocol.metadata.describe import describe_topic_config_entries
from protocol.metadata.image import MetadataImage


class ConfigsHandler:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        image: Callable[[], MetadataImage],
        forward: Callable[[Request], Awaitable[Response]],
    ) -> None:
        self.config = config
        """This broker's config: DescribeConfigs of the broker, and the topic defaults."""
        self.image = image
        """The current metadata image: topics and their dynamic configs."""
        self.forward = forward
        """To the controller, answered once the image has the effect (ControllerForwarder)."""

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
        }

    # -- IncrementalAlterConfigs ----------------------------------------------------------

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, conn: ConnectionInfo
    ) -> IncrementalAlterConfigsResponse:
        results: dict[int, AlterConfigsResourceResponse] = {}
        forward = []
        for i, resource in enumerate(request.resources):
            if resource.resource_type == ResourceType.TOPIC:
                forward.append((i, resource))
                continue
            if resource.resource_type == ResourceType.BROKER:
                message = (
                    "dynamic broker configs are not supported yet; set them in the broker's "
                    "config file"
                )
            else:
                message = f"unknown resource type {resource.resource_type}"
            results[i] = AlterConfigsResourceResponse(
                error_code=int(ErrorCode.INVALID_REQUEST),
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                error_message=message,
            )
        if forward:
            sub = replace(request, resources=tuple(r for _, r in forward))
            try:
                response = await self.forward(sub)
                answers = list(response.responses)  # type: ignore[attr-defined]
            except KafkaError as exc:
                answers = [
                    AlterConfigsResourceResponse(
                        error_code=int(exc.code),
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_message=exc.message,
                    )
                    for _, r in forward
                ]
            for (i, _), answer in zip(forward, answers, strict=False):
                results[i] = answer
        return IncrementalAlterConfigsResponse(responses=tuple(results[i] for i in sorted(results)))

    # -- DescribeConfigs ------------------------------------------------------------------

    async def describe_configs(
        self, request: DescribeConfigsRequest, conn: ConnectionInfo
    ) -> DescribeConfigsResponse:
        results = []
        for resource in request.resources:
            try:
                if resource.resource_type == ResourceType.TOPIC:
                    entries = self._describe_topic(resource.resource_name, request)
                elif resource.resource_type == ResourceType.BROKER:
                    entries = self._describe_broker(resource.resource_name, request)
                else:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        f"unknown resource type {resource.resource_type}",
                    )
                wanted = resource.configuration_keys
                if wanted is not None:
                    entries = [e for e in entries if e.name in set(wanted)]
                results.append(
                    DescribeConfigsResult(
                        error_code=0,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        configs=tuple(entries),
                    )
                )
            except KafkaError as exc:
                results.append(
                    DescribeConfigsResult(
                        error_code=int(exc.code),
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        error_message=exc.message,
                    )
                )
        return DescribeConfigsResponse(results=tuple(results))

    def _describe_topic(
        self, name: str, request: DescribeConfigsRequest
    ) -> list[DescribeConfigsEntry]:
        image = self.image()
        if image.topics.get_topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return list(
            describe_topic_config_entries(
                image.configs.topic_configs(name),
                self.config.static_topic_defaults(),
                include_documentation=request.include_documentation,
            )
        )

    def _describe_broker(
        self, name: str, request: DescribeConfigsRequest
    ) -> list[DescribeConfigsEntry]:
        node_id = self.config.node_id
        if name not in ("", str(node_id)):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"this is broker {node_id}; ask broker {name} for its configs",
            )
        entries = []
        for key, definition in sorted(BROKER_CONFIGS.defs.items()):
            source = (
                ConfigSource.STATIC_BROKER_CONFIG
                if key in self.config.explicit
                else ConfigSource.DEFAULT_CONFIG
            )
            sensitive = definition.type == "password"
            entries.append(
                DescribeConfigsEntry(
                    name=key,
                    value=None if sensitive else self.config.describe_value(key),
                    read_only=True,
                    config_source=int(source),
                    is_sensitive=sensitive,
                    documentation=definition.doc if request.include_documentation else None,
                )
            )
        return entries
