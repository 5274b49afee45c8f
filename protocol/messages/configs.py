"""DescribeConfigs and IncrementalAlterConfigs (topic and broker configs)."""

from __future__ import annotations

from enum import IntEnum

from protocol.messages.base import ApiKey, Request, Response, message, register


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class AlterConfigOp(IntEnum):
    """Kafka's AlterConfigOp.OpType ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@message
class DescribeConfigsResource:
    resource_type: int
    """ResourceType: TOPIC (2) or BROKER (4)."""
    resource_name: str
    """Topic name, or broker id as a string."""
    configuration_keys: tuple[str, ...] | None = None
    """Configs to describe; null for all."""


@message
class DescribeConfigsEntry:
    name: str
    """Config name."""
    value: str | None
    """Value as a string; null when sensitive."""
    read_only: bool = False
    """True when it cannot be altered dynamically."""
    config_source: int = 0
    """ConfigSource of the value in force."""
    is_sensitive: bool = False
    """True for secrets (value is then null)."""
    documentation: str | None = None
    """Kafka's documentation line, when asked for."""


@message
class DescribeConfigsResult:
    error_code: int
    """UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, ..."""
    resource_type: int
    """As in the request."""
    resource_name: str
    """As in the request."""
    configs: tuple[DescribeConfigsEntry, ...] = ()
    """The configs."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class DescribeConfigsResponse(Response):
    results: tuple[DescribeConfigsResult, ...] = ()
    """One result per resource in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DescribeConfigsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_CONFIGS
    MAX_VERSION = 0
    RESPONSE = DescribeConfigsResponse

    resources: tuple[DescribeConfigsResource, ...]
    """Resources to describe."""
    include_synonyms: bool = False
    """Unused."""
    include_documentation: bool = False
    """Fill in each config's documentation."""


@message
class AlterableConfig:
    name: str
    """Config name."""
    config_operation: int
    """AlterConfigOp: SET, DELETE, APPEND, SUBTRACT."""
    value: str | None = None
    """New value for SET/APPEND/SUBTRACT."""


@message
class AlterConfigsResource:
    resource_type: int
    """ResourceType: TOPIC (2) or BROKER (4)."""
    resource_name: str
    """Topic name, or broker id."""
    configs: tuple[AlterableConfig, ...]
    """Changes to make, all or nothing per resource."""


@message
class AlterConfigsResourceResponse:
    error_code: int
    """INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, ..."""
    resource_type: int
    """As in the request."""
    resource_name: str
    """As in the request."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class IncrementalAlterConfigsResponse(Response):
    responses: tuple[AlterConfigsResourceResponse, ...] = ()
    """One result per resource in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class IncrementalAlterConfigsRequest(Request):
    API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
    MAX_VERSION = 0
    RESPONSE = IncrementalAlterConfigsResponse

    resources: tuple[AlterConfigsResource, ...]
    """Resources to change."""
    validate_only: bool = False
    """Check the changes without applying them."""
