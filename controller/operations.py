"""Which pure operation answers which request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.brokers import RegisterBroker, register_broker
from controller.configs import describe_configs, incremental_alter_configs
from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.topics import create_topics, delete_topics
from protocol.messages.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from protocol.messages.topics import CreateTopicsRequest, DeleteTopicsRequest

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
