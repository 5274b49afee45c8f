"""Which pure operation answers which request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from controller.state import ControllerState
from controller.topics import create_topics, delete_topics
from controller.unclean_enable import alter_configs_and_elect
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from protocol.messages.configs import (
    AlterConfigsResourceResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from protocol.messages.elect_leaders import (
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReplicaElectionResult,
)
from protocol.messages.producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
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
    WriteNoOp: write_noop,
    # Both modes: the record is /latest_producer_id_block in ZK mode (zkstore.record_writes).
    AllocateProducerIdsRequest: allocate_producer_ids,
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
        case BrokerChange():
            return BrokerChangeResponse(error_code=code_int, error_message=message)
        case ControlledShutdownRequest():
            return ControlledShutdownResponse(error_code=code_int, error_message=message)
        case AlterPartitionRequest():
            return AlterPartitionResponse(error_code=code_int, error_message=message)
        case ElectLeadersRequest():
            return ElectLeadersResponse(
                replica_election_results=tuple(
                    ReplicaElectionResult(
                        topic=t.topic,
                        partition_result=tuple(
                            ElectLeadersPartitionResult(
                                partition_id=p, error_code=code_int, error_message=message
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in request.topic_partitions or ()
                ),
                error_code=code_int,
                error_message=message,
            )
        case CreatePartitionsRequest():
            return CreatePartitionsResponse(
                results=tuple(
                    CreatePartitionsTopicResult(
                        name=t.name, error_code=code_int, error_message=message
                    )
                    for t in request.topics
                ),
                error_code=code_int,
                error_message=message,
            )
        case AlterPartitionReassignmentsRequest():
            return AlterPartitionReassignmentsResponse(
                responses=tuple(
                    ReassignableTopicResponse(
                        name=t.name,
                        partitions=tuple(
                            ReassignablePartitionResponse(
                                partition_index=p.partition_index,
                                error_code=code_int,
                                error_message=message,
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in request.topics
                ),
                error_code=code_int,
                error_message=message,
            )
        case ListPartitionReassignmentsRequest():
            return ListPartitionReassignmentsResponse(error_code=code_int, error_message=message)
        case AutoLeaderRebalance():
            return ElectLeadersResponse(error_code=code_int, error_message=message)
        case BrokerRegistrationRequest():
            return BrokerRegistrationResponse(error_code=code_int, error_message=message)
        case BrokerHeartbeatRequest():
            return BrokerHeartbeatResponse(error_code=code_int, error_message=message)
        case UnregisterBrokerRequest():
            return UnregisterBrokerResponse(error_code=code_int, error_message=message)
        case FenceStaleBrokers():
            return FenceStaleBrokersResponse(error_code=code_int, error_message=message)
        case WriteNoOp():
            return WriteNoOpResponse(error_code=code_int, error_message=message)
        case AllocateProducerIdsRequest():
            return AllocateProducerIdsResponse(error_code=code_int, error_message=message)
    raise TypeError(f"the controller does not handle {type(request).__name__}")
