"""Topic configs: IncrementalAlterConfigs and DescribeConfigs for TOPIC resources.

Validation follows Kafka's ConfigurationControlManager: the whole resource succeeds or fails;
an unknown key or a bad value is INVALID_CONFIG naming the key; APPEND/SUBTRACT only for list
configs, starting from the current value (dynamic, else the default); a change that leaves a
value as it was writes no record. Values are stored in canonical form (what the ConfigDef
parses them to, printed back), so describing shows what is in force.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.config_defs import TOPIC_CONFIGS, ConfigDef, ConfigError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.configs import (
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ResourceType,
)
from protocol.metadata.describe import describe_topic_config_entries
from protocol.metadata.records import ConfigRecord

_OP_NAMES = {int(op): op.name for op in AlterConfigOp}


def canonical_topic_config(name: str, value: Any) -> str:
    """The canonical string of a topic config value; ConfigError (INVALID_CONFIG) naming the
    key when the key is unknown or the value bad."""
    definition = TOPIC_CONFIGS[name]
    return definition.to_string(definition.parse(value))


def parse_topic_configs(pairs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """Configs given at topic creation, validated and canonical. A null value means 'not set'.
    Raises KafkaError INVALID_REQUEST for a key given twice, ConfigError for a bad key/value."""
    result: dict[str, str] = {}
    for name, value in pairs:
        if name in result:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate config key {name!r}.")
        if value is None:
            TOPIC_CONFIGS[name]  # an unknown key is still an error
            continue
        result[name] = canonical_topic_config(name, value)
    return result


def _list_value(definition: ConfigDef, current: str | None) -> list[str]:
    if current is None:
        return list(definition.default)
    return list(definition.parse(current))


def _alter_topic(
    state: ControllerState, resource: AlterConfigsResource
) -> tuple[list[ConfigRecord], KafkaError | None]:
    name = resource.resource_name
    topic = state.topic(name)
    if topic is None:
        return [], KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic {name!r} does not exist."
        )
    dupes = sorted(k for k, n in Counter(c.name for c in resource.configs).items() if n > 1)
    if dupes:
        return [], KafkaError(
            ErrorCode.INVALID_REQUEST, f"Duplicate config keys in one resource: {', '.join(dupes)}."
        )
    current = state.image.configs.topic_configs(name)
    records: list[ConfigRecord] = []
    for change in resource.configs:
        key, op = change.name, change.config_operation
        if op not in _OP_NAMES:
            return [], KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op} for {key!r}."
            )
        try:
            definition = TOPIC_CONFIGS[key]
            if op == AlterConfigOp.DELETE:
                new_value: str | None = None
            elif change.value is None:
                raise ConfigError(f"{key}: {_OP_NAMES[op]} needs a value")
            elif op == AlterConfigOp.SET:
                new_value = canonical_topic_config(key, change.value)
            else:
                if definition.type != "list":
                    raise ConfigError(
                        f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST."
                    )
                items = _list_value(definition, current.get(key))
                given = [v for v in definition.parse(change.value)]
                if op == AlterConfigOp.APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                new_value = canonical_topic_config(key, items)
        except ConfigError as exc:
            return [], exc
        if new_value != current.get(key):
            records.append(
                ConfigRecord(
                    resource_type=int(ResourceType.TOPIC),
                    resource_name=name,
                    name=key,
                    value=new_value,
                )
            )
    return records, None


def incremental_alter_configs(
    state: ControllerState, request: IncrementalAlterConfigsRequest, ctx: ControllerContext
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """IncrementalAlterConfigs for TOPIC resources: ConfigRecords for what changes."""
    keys = Counter((r.resource_type, r.resource_name) for r in request.resources)
    records: list[ConfigRecord] = []
    responses = []
    for resource in request.resources:
        error: KafkaError | None
        if keys[(resource.resource_type, resource.resource_name)] > 1:
            resource_records, error = (
                [],
                KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Duplicate resource {resource.resource_name!r} in the request.",
                ),
            )
        elif resource.resource_type != ResourceType.TOPIC:
            resource_records, error = (
                [],
                KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"The controller alters TOPIC (2) resources only, not resource type "
                    f"{resource.resource_type}.",
                ),
            )
        else:
            resource_records, error = _alter_topic(state, resource)
        if error is None:
            records.extend(resource_records)
        responses.append(
            AlterConfigsResourceResponse(
                error_code=int(error.code) if error else 0,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                error_message=error.message if error else None,
            )
        )
    return ControllerResult(
        records=[] if request.validate_only else records,
        response=IncrementalAlterConfigsResponse(responses=tuple(responses)),
    )


def describe_topic_configs(
    state: ControllerState,
    resource: DescribeConfigsResource,
    ctx: ControllerContext,
    *,
    include_documentation: bool = False,
) -> DescribeConfigsResult:
    name = resource.resource_name
    if state.topic(name) is None:
        return DescribeConfigsResult(
            error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            resource_type=resource.resource_type,
            resource_name=name,
            error_message=f"The topic {name!r} does not exist.",
        )
    return DescribeConfigsResult(
        error_code=0,
        resource_type=resource.resource_type,
        resource_name=name,
        configs=describe_topic_config_entries(
            state.image.configs.topic_configs(name),
            ctx.config.topic_defaults,
            resource.configuration_keys,
            include_documentation=include_documentation,
        ),
    )


def describe_configs(
    state: ControllerState, request: DescribeConfigsRequest, ctx: ControllerContext
) -> ControllerResult[DescribeConfigsResponse]:
    """DescribeConfigs for TOPIC resources (read-only: no records)."""
    results = []
    for resource in request.resources:
        if resource.resource_type == ResourceType.TOPIC:
            results.append(
                describe_topic_configs(
                    state, resource, ctx, include_documentation=request.include_documentation
                )
            )
        else:
            results.append(
                DescribeConfigsResult(
                    error_code=int(ErrorCode.INVALID_REQUEST),
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    error_message=f"The controller describes TOPIC (2) resources only, not "
                    f"resource type {resource.resource_type}.",
                )
            )
    return ControllerResult(records=[], response=DescribeConfigsResponse(results=tuple(results)))


def topic_config_value(
    state: ControllerState, topic: str, name: str, ctx: ControllerContext
) -> Any:
    """A topic config in force, parsed: the topic's dynamic value, else the broker's static
    default, else Kafka's default."""
    definition = TOPIC_CONFIGS[name]
    value = state.image.configs.topic_configs(topic).get(name)
    if value is None:
        value = ctx.config.topic_defaults.get(name)
    return definition.default if value is None else definition.parse(value)


def unclean_leader_election_enabled(
    state: ControllerState, topic: str, ctx: ControllerContext
) -> bool:
    """The topic's unclean.leader.election.enable (false by default, as Kafka's)."""
    return bool(topic_config_value(state, topic, "unclean.leader.election.enable", ctx))
