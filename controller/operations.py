"""Which pure operation answers which request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.brokers import RegisterBroker, RegisterBrokerResponse, register_broker
from controller.configs import describe_configs, incremental_alter_configs
from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.topics import create_topics, delete_topics
from protocol.errors import ErrorCode
from protocol.messages.configs import (
    AlterConfigsResourceResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

Operation = Callable[[ControllerState, Any, ControllerContext], ControllerResult[Any]]

OPERATIONS: dict[type, Operation] = {
    CreateTopicsRequest: create_topics,
    DeleteTopicsRequest: delete_topics,
    IncrementalAlterConfigsRequest: incremental_alter_configs,
    DescribeConfigsRequest: describe_configs,
    RegisterBroker: register_broker,
}


def operation_for(request: object) -> Operation:
    """The operation for a request; TypeError for a request the controller does not handle."""
    try:
        return OPERATIONS[type(request)]
    except KeyError:
        raise TypeError(f"the controller does not handle {type(request).__name__}") from None


def run_operation(
    state: ControllerState, request: object, ctx: ControllerContext
) -> ControllerResult[Any]:
    return operation_for(request)(state, request, ctx)


def failed_response(request: object, code: ErrorCode, message: str) -> Any:
    """The response to `request` when it failed as a whole (timeout, storage error, bug): the
    error on every topic or resource it names, so clients see it where they look."""
    code_int = int(code)
    match request:
        case CreateTopicsRequest():
            return CreateTopicsResponse(
                topics=tuple(
                    CreatableTopicResult(name=t.name, error_code=code_int, error_message=message)
                    for t in request.topics
                ),
                error_code=code_int,
                error_message=message,
            )
        case DeleteTopicsRequest():
            return DeleteTopicsResponse(
                responses=tuple(
                    DeletableTopicResult(name=n, error_code=code_int, error_message=message)
                    for n in request.topic_names
                ),
                error_code=code_int,
                error_message=message,
            )
        case IncrementalAlterConfigsRequest():
            return IncrementalAlterConfigsResponse(
                responses=tuple(
                    AlterConfigsResourceResponse(
                        error_code=code_int,
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_message=message,
                    )
                    for r in request.resources
                ),
                error_code=code_int,
                error_message=message,
            )
        case DescribeConfigsRequest():
            return DescribeConfigsResponse(
                results=tuple(
                    DescribeConfigsResult(
                        error_code=code_int,
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_message=message,
                    )
                    for r in request.resources
                ),
                error_code=code_int,
                error_message=message,
            )
        case RegisterBroker():
            return RegisterBrokerResponse(
                broker_id=request.broker_id,
                broker_epoch=-1,
                error_code=code_int,
                error_message=message,
            )
    raise TypeError(f"the controller does not handle {type(request).__name__}")
