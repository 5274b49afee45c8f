"""Which pure operation answers which request."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from controller.acls import create_acls, delete_acls
from controller.alter_partition import alter_partition
from controller.broker_lifecycle import (
    BrokerChange,
    BrokerChangeResponse,
    broker_change,
    controlled_shutdown,
)
from controller.brokers import RegisterBroker, RegisterBrokerResponse, register_broker
from controller.configs import describe_configs
from controller.context import ControllerContext
from controller.create_partitions import create_partitions
from controller.dead_brokers import FenceDeadBroker, FenceDeadBrokerResponse, fence_dead_broker
from controller.elect_leaders import AutoLeaderRebalance, auto_leader_rebalance, elect_leaders
from controller.producer_ids import allocate_producer_ids
from controller.raft_lifecycle import (
    FenceStaleBrokers,
    FenceStaleBrokersResponse,
    WriteNoOp,
    WriteNoOpResponse,
    broker_heartbeat,
    broker_registration,
    fence_stale_brokers,
    unregister_broker,
    write_noop,
)
from controller.reassignment import (
    alter_partition_reassignments,
    list_partition_reassignments,
)
from controller.result import ControllerResult
from controller.scram_credentials import alter_user_scram_credentials
from controller.state import ControllerState
from controller.topics import create_topics, delete_topics
from controller.unclean_enable import alter_configs_and_elect
from protocol.errors import ErrorCode
from protocol.messages.acls import (
    AclCreationResult,
    CreateAclsRequest,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
)
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.base import response_with_error
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    UnregisterBrokerRequest,
)
from protocol.messages.configs import (
    AlterConfigsResourceResponse,
    DescribeConfigsRequest,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsTopicResult,
)
from protocol.messages.elect_leaders import (
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReplicaElectionResult,
)
from protocol.messages.producer_ids import AllocateProducerIdsRequest
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResult,
)
from protocol.messages.topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    DeletableTopicResult,
    DeleteTopicsRequest,
)

Operation = Callable[[ControllerState, Any, ControllerContext], ControllerResult[Any]]

OPERATIONS: dict[type, Operation] = {
    CreateTopicsRequest: create_topics,
    DeleteTopicsRequest: delete_topics,
    IncrementalAlterConfigsRequest: alter_configs_and_elect,
    DescribeConfigsRequest: describe_configs,
    RegisterBroker: register_broker,
    BrokerChange: broker_change,
    ControlledShutdownRequest: controlled_shutdown,
    AlterPartitionRequest: alter_partition,
    ElectLeadersRequest: elect_leaders,
    AutoLeaderRebalance: auto_leader_rebalance,
    CreatePartitionsRequest: create_partitions,
    AlterPartitionReassignmentsRequest: alter_partition_reassignments,
    ListPartitionReassignmentsRequest: list_partition_reassignments,
    # Raft mode (controller.raft_lifecycle): the term's ClusterControl through the context.
    BrokerRegistrationRequest: broker_registration,
    BrokerHeartbeatRequest: broker_heartbeat,
    UnregisterBrokerRequest: unregister_broker,
    FenceStaleBrokers: fence_stale_brokers,
    FenceDeadBroker: fence_dead_broker,
    WriteNoOp: write_noop,
    # Both modes: the record is /latest_producer_id_block in ZK mode (zkstore.record_writes).
    AllocateProducerIdsRequest: allocate_producer_ids,
    # Both modes: /config/users/<name> in ZK mode (zkstore.record_writes).
    AlterUserScramCredentialsRequest: alter_user_scram_credentials,
    # Both modes: /kafka-acl and /kafka-acl-extended in ZK mode (zkstore.record_writes).
    CreateAclsRequest: create_acls,
    DeleteAclsRequest: delete_acls,
}


def _handled(request: object) -> type:
    """The request's type; TypeError for a request the controller does not handle."""
    if type(request) not in OPERATIONS:
        raise TypeError(f"the controller does not handle {type(request).__name__}")
    return type(request)


def operation_for(request: object) -> Operation:
    """The operation for a request; TypeError for a request the controller does not handle."""
    return OPERATIONS[_handled(request)]


def run_operation(
    state: ControllerState, request: object, ctx: ControllerContext
) -> ControllerResult[Any]:
    return operation_for(request)(state, request, ctx)


# -- failed requests --------------------------------------------------------------------------
# A failed request's response is protocol's generic error response (response_with_error), plus
# the error on each entry the request names where clients read it (EntryErrors below).

# The controller's own requests are no wire messages (no Request.RESPONSE): what answers them.
_INTERNAL_RESPONSES: dict[type, type] = {
    RegisterBroker: RegisterBrokerResponse,
    BrokerChange: BrokerChangeResponse,
    AutoLeaderRebalance: ElectLeadersResponse,
    FenceStaleBrokers: FenceStaleBrokersResponse,
    FenceDeadBroker: FenceDeadBrokerResponse,
    WriteNoOp: WriteNoOpResponse,
}

EntryErrors = Callable[[Any, int, str], dict[str, Any]]
"""(request, code, message) -> the response fields that carry the error per entry."""


def _by_name(
    field: str, result: Callable[..., Any], names: Callable[[Any], Iterable[str]]
) -> EntryErrors:
    """One `result` per topic the request names, in the response's `field`."""

    def errors(request: Any, code: int, message: str) -> dict[str, Any]:
        return {
            field: tuple(
                result(name=n, error_code=code, error_message=message) for n in names(request)
            )
        }

    return errors


def _by_resource(field: str, result: Callable[..., Any]) -> EntryErrors:
    """One `result` per config resource the request names, in the response's `field`."""

    def errors(request: Any, code: int, message: str) -> dict[str, Any]:
        return {
            field: tuple(
                result(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    error_code=code,
                    error_message=message,
                )
                for r in request.resources
            )
        }

    return errors


def _election_errors(request: ElectLeadersRequest, code: int, message: str) -> dict[str, Any]:
    def partition(p: int) -> ElectLeadersPartitionResult:
        return ElectLeadersPartitionResult(partition_id=p, error_code=code, error_message=message)

    topics = request.topic_partitions or ()
    return {
        "replica_election_results": tuple(
            ReplicaElectionResult(
                topic=t.topic, partition_result=tuple(map(partition, t.partitions))
            )
            for t in topics
        )
    }


def _reassignment_errors(
    request: AlterPartitionReassignmentsRequest, code: int, message: str
) -> dict[str, Any]:
    def partition(p: Any) -> ReassignablePartitionResponse:
        return ReassignablePartitionResponse(
            partition_index=p.partition_index, error_code=code, error_message=message
        )

    return {
        "responses": tuple(
            ReassignableTopicResponse(name=t.name, partitions=tuple(map(partition, t.partitions)))
            for t in request.topics
        )
    }


def _topic_names(request: CreateTopicsRequest | CreatePartitionsRequest) -> Iterator[str]:
    return (t.name for t in request.topics)


def _broker_id(request: RegisterBroker, code: int, message: str) -> dict[str, Any]:
    # Not an entry: the answer names the broker that asked (its epoch stays -1, unknown).
    return {"broker_id": request.broker_id}


def _by_user(request: AlterUserScramCredentialsRequest, code: int, message: str) -> dict[str, Any]:
    users = dict.fromkeys(c.name for c in (*request.deletions, *request.upsertions))
    return {
        "results": tuple(
            AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
            for u in users
        )
    }


def _one_each(
    field: str, result: Callable[..., Any], items: Callable[[Any], Iterable[Any]]
) -> EntryErrors:
    """One `result` per item of the request, in order (results carry no name)."""

    def errors(request: Any, code: int, message: str) -> dict[str, Any]:
        return {
            field: tuple(result(error_code=code, error_message=message) for _ in items(request))
        }

    return errors


_ENTRY_ERRORS: dict[type, EntryErrors] = {
    CreateTopicsRequest: _by_name("topics", CreatableTopicResult, _topic_names),
    DeleteTopicsRequest: _by_name("responses", DeletableTopicResult, lambda r: r.topic_names),
    IncrementalAlterConfigsRequest: _by_resource("responses", AlterConfigsResourceResponse),
    DescribeConfigsRequest: _by_resource("results", DescribeConfigsResult),
    RegisterBroker: _broker_id,
    ElectLeadersRequest: _election_errors,
    CreatePartitionsRequest: _by_name("results", CreatePartitionsTopicResult, _topic_names),
    AlterPartitionReassignmentsRequest: _reassignment_errors,
    AlterUserScramCredentialsRequest: _by_user,
    CreateAclsRequest: _one_each("results", AclCreationResult, lambda r: r.creations),
    DeleteAclsRequest: _one_each("filter_results", DeleteAclsFilterResult, lambda r: r.filters),
}


def failed_response(request: object, code: ErrorCode, message: str) -> Any:
    """The response to `request` when it failed as a whole (timeout, storage error, bug): the
    error on every topic or resource it names, so clients see it where they look. TypeError
    for a request the controller does not handle."""
    kind = _handled(request)
    response_type = _INTERNAL_RESPONSES.get(kind) or kind.RESPONSE  # type: ignore[attr-defined]
    response = response_with_error(response_type, code, message)
    entries = _ENTRY_ERRORS.get(kind)
    if entries is None:
        return response
    return dataclasses.replace(response, **entries(request, int(code), message))
