"""The cluster APIs' messages (issue 3): realistic round trips, old-shaped bodies, bad fields.

The registry-wide suites (test_protocol_messages, test_protocol_fuzz_messages) already check
every new API's shape and fuzz it; these are the table tests for what those cannot know.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.codec import (
    decode_request,
    decode_response_body,
    decode_response_header,
    encode_request,
    encode_response,
)
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder
from protocol.messages import REQUESTS, ApiKey, Request, Response
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    AlterPartitionTopicResult,
)
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from protocol.messages.describe_cluster import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    ReplicaElectionResult,
)
from protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
    LeaderAndIsrType,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopic,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)
from protocol.schema import InvalidMessageError, from_wire, to_wire

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def payload_of(frame: bytes) -> bytes:
    dec = FrameDecoder()
    dec.feed(frame)
    (payload,) = dec.frames()
    return payload


def _state(partition: int, leader: int, **changes: Any) -> LeaderAndIsrPartitionState:
    fields: dict[str, Any] = {
        "partition_index": partition,
        "controller_epoch": 3,
        "leader": leader,
        "leader_epoch": 7,
        "isr": (1, 2, 3),
        "partition_epoch": 12,
        "replicas": (1, 2, 3),
    }
    return LeaderAndIsrPartitionState(**(fields | changes))


REQUEST_EXAMPLES: list[Request] = [
    LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=4294967301,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_states=(
                    _state(0, 1),
                    _state(1, 2, adding_replicas=(4,), removing_replicas=(1,), is_new=True),
                    _state(2, -1, isr=(3,), leader_recovery_state=1),
                ),
            ),
        ),
        live_leaders=(
            LeaderAndIsrLiveLeader(broker_id=1, host_name="b1.internal", port=9093),
            LeaderAndIsrLiveLeader(broker_id=2, host_name="b2.internal", port=9093),
        ),
        type=LeaderAndIsrType.FULL,
    ),
    StopReplicaRequest(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=99,
        topic_states=(
            StopReplicaTopicState(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_states=(
                    StopReplicaPartitionState(partition_index=0, leader_epoch=-2),
                    StopReplicaPartitionState(
                        partition_index=1, leader_epoch=8, delete_partition=True
                    ),
                ),
            ),
        ),
    ),
    UpdateMetadataRequest(
        controller_id=2,
        controller_epoch=4,
        broker_epoch=100,
        topic_states=(
            UpdateMetadataTopicState(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_states=(
                    UpdateMetadataPartitionState(
                        partition_index=0,
                        controller_epoch=4,
                        leader=2,
                        leader_epoch=9,
                        isr=(2, 3),
                        partition_epoch=13,
                        replicas=(1, 2, 3),
                        offline_replicas=(1,),
                    ),
                ),
            ),
        ),
        live_brokers=(
            UpdateMetadataBroker(
                id=2,
                endpoints=(
                    UpdateMetadataEndpoint(port=9093, host="b2.internal", listener="INTERNAL"),
                    UpdateMetadataEndpoint(port=19092, host="localhost", listener="EXTERNAL"),
                ),
                rack="r2",
            ),
            UpdateMetadataBroker(id=3, endpoints=()),
        ),
    ),
    ControlledShutdownRequest(broker_id=3, broker_epoch=4294967310),
    AlterPartitionRequest(
        broker_id=1,
        broker_epoch=77,
        topics=(
            AlterPartitionTopic(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partitions=(
                    AlterPartitionPartition(
                        partition_index=0, leader_epoch=7, new_isr=(1, 2), partition_epoch=12
                    ),
                ),
            ),
        ),
    ),
    FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        topics=(
            FetchTopic(
                name="orders",
                partitions=(FetchPartition(index=1, fetch_offset=5),),
            ),
        ),
        replica_id=2,
        session_id=123456,
        session_epoch=7,
        forgotten_topics_data=(ForgottenTopic(topic="orders", partitions=(0, 2)),),
    ),
    ElectLeadersRequest(
        election_type=ElectionType.UNCLEAN,
        topic_partitions=(ElectLeadersTopicPartitions(topic="orders", partitions=(0, 1)),),
        timeout_ms=5000,
    ),
    ElectLeadersRequest(election_type=ElectionType.PREFERRED),
    AlterPartitionReassignmentsRequest(
        topics=(
            ReassignableTopic(
                name="orders",
                partitions=(
                    ReassignablePartition(partition_index=0, replicas=(4, 2, 3)),
                    ReassignablePartition(partition_index=1),
                ),
            ),
        )
    ),
    ListPartitionReassignmentsRequest(),
    ListPartitionReassignmentsRequest(
        topics=(ListPartitionReassignmentsTopic(name="orders", partition_indexes=(0,)),)
    ),
    CreatePartitionsRequest(
        topics=(
            CreatePartitionsTopic(name="orders", count=6),
            CreatePartitionsTopic(
                name="audit",
                count=3,
                assignments=(CreatePartitionsAssignment(broker_ids=(2, 3, 1)),),
            ),
        ),
        validate_only=True,
    ),
    OffsetForLeaderEpochRequest(
        replica_id=2,
        topics=(
            OffsetForLeaderTopic(
                topic="orders",
                partitions=(
                    OffsetForLeaderPartition(partition=0, leader_epoch=6, current_leader_epoch=7),
                ),
            ),
        ),
    ),
    DescribeClusterRequest(include_cluster_authorized_operations=True),
]

RESPONSE_EXAMPLES: list[Response] = [
    LeaderAndIsrResponse(
        topics=(
            LeaderAndIsrTopicError(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_errors=(
                    LeaderAndIsrPartitionError(partition_index=0, error_code=ErrorCode.NONE),
                    LeaderAndIsrPartitionError(
                        partition_index=1, error_code=ErrorCode.FENCED_LEADER_EPOCH
                    ),
                ),
            ),
        )
    ),
    LeaderAndIsrResponse(
        error_code=ErrorCode.STALE_CONTROLLER_EPOCH,
        error_message="controller epoch 2 is older than 3",
    ),
    StopReplicaResponse(
        partition_errors=(
            StopReplicaPartitionError(topic_name="orders", partition_index=0, error_code=0),
        )
    ),
    UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH, error_message="stale"),
    ControlledShutdownResponse(
        remaining_partitions=(RemainingPartition(topic_name="orders", partition_index=2),)
    ),
    AlterPartitionResponse(
        topics=(
            AlterPartitionTopicResult(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partitions=(
                    AlterPartitionPartitionResult(
                        partition_index=0,
                        error_code=0,
                        leader_id=1,
                        leader_epoch=7,
                        isr=(1, 2),
                        partition_epoch=13,
                    ),
                    AlterPartitionPartitionResult(
                        partition_index=1, error_code=ErrorCode.INVALID_UPDATE_VERSION
                    ),
                ),
            ),
        )
    ),
    FetchResponse(session_id=123456),
    ElectLeadersResponse(
        replica_election_results=(
            ReplicaElectionResult(
                topic="orders",
                partition_result=(
                    ElectLeadersPartitionResult(partition_id=0, error_code=0),
                    ElectLeadersPartitionResult(
                        partition_id=1,
                        error_code=ErrorCode.ELECTION_NOT_NEEDED,
                        error_message="leader 1 is already the preferred replica",
                    ),
                ),
            ),
        )
    ),
    AlterPartitionReassignmentsResponse(
        responses=(
            ReassignableTopicResponse(
                name="orders",
                partitions=(
                    ReassignablePartitionResponse(
                        partition_index=1, error_code=ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                    ),
                ),
            ),
        )
    ),
    ListPartitionReassignmentsResponse(
        topics=(
            OngoingTopicReassignment(
                name="orders",
                partitions=(
                    OngoingPartitionReassignment(
                        partition_index=0,
                        replicas=(4, 2, 3, 1),
                        adding_replicas=(4,),
                        removing_replicas=(1,),
                    ),
                ),
            ),
        )
    ),
    CreatePartitionsResponse(
        results=(
            CreatePartitionsTopicResult(
                name="orders",
                error_code=ErrorCode.INVALID_PARTITIONS,
                error_message="topic orders has 6 partitions; cannot shrink to 3",
            ),
        )
    ),
    OffsetForLeaderEpochResponse(
        topics=(
            OffsetForLeaderTopicResult(
                topic="orders",
                partitions=(
                    OffsetForLeaderPartitionResult(
                        error_code=0, partition=0, leader_epoch=6, end_offset=1200
                    ),
                    OffsetForLeaderPartitionResult(
                        error_code=ErrorCode.FENCED_LEADER_EPOCH, partition=1
                    ),
                ),
            ),
        )
    ),
    DescribeClusterResponse(
        brokers=(DescribeClusterBroker(broker_id=1, host="localhost", port=9092, rack="r1"),),
        cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
        controller_id=1,
    ),
]


def _name(obj: object) -> str:
    return type(obj).__name__


@pytest.mark.parametrize("body", REQUEST_EXAMPLES, ids=_name)
def test_request_round_trip(body: Request) -> None:
    env = decode_request(payload_of(encode_request(41, "controller-1", body)))
    assert env.body == body
    assert env.api_key == type(body).API_KEY
    assert REQUESTS[env.api_key] is type(body)


@pytest.mark.parametrize("body", RESPONSE_EXAMPLES, ids=_name)
def test_response_round_trip(body: Response) -> None:
    corr, raw = decode_response_header(payload_of(encode_response(41, body)))
    assert corr == 41
    assert decode_response_body(type(body), raw) == body


@pytest.mark.parametrize(
    ("key", "name"),
    [
        (ApiKey.LEADER_AND_ISR, "LeaderAndIsrRequest"),
        (ApiKey.STOP_REPLICA, "StopReplicaRequest"),
        (ApiKey.UPDATE_METADATA, "UpdateMetadataRequest"),
        (ApiKey.CONTROLLED_SHUTDOWN, "ControlledShutdownRequest"),
        (ApiKey.ALTER_PARTITION, "AlterPartitionRequest"),
        (ApiKey.ELECT_LEADERS, "ElectLeadersRequest"),
        (ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignmentsRequest"),
        (ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignmentsRequest"),
        (ApiKey.CREATE_PARTITIONS, "CreatePartitionsRequest"),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpochRequest"),
        (ApiKey.DESCRIBE_CLUSTER, "DescribeClusterRequest"),
    ],
)
def test_cluster_apis_are_registered_under_kafkas_keys(key: ApiKey, name: str) -> None:
    assert REQUESTS[key].__name__ == name


def test_old_shaped_fetch_request_gets_sessionless_defaults() -> None:
    """A peer from before KIP-227 sends the first 7 fields: a full fetch with no session."""
    old = [500, 1, [["orders", [[0, 42, 1048576, -1, -1, -1]]]], 1024, -1, 0, ""]
    req = from_wire(FetchRequest, old)
    assert (req.session_id, req.session_epoch, req.forgotten_topics_data) == (0, -1, ())
    assert req.topics[0].partitions[0].fetch_offset == 42
    # Appended, not inserted: the old fields keep their positions.
    assert to_wire(req)[:7] == old


def test_old_shaped_fetch_response_has_no_session() -> None:
    old = [[["orders", [[0, 0, 10, 10, 0, b"", None, None]]]], 0, 0, None]
    resp = from_wire(FetchResponse, old)
    assert resp.session_id == 0
    wire = to_wire(resp)
    assert wire[1:4] == old[1:4]
    assert wire[4] == 0
    # The KRaft fields (current_leader, snapshot_id) were appended to each partition.
    assert wire[0][0][1][0][:8] == old[0][0][1][0]
    assert wire[0][0][1][0][8:] == [None, None]


def test_leader_and_isr_partition_state_defaults() -> None:
    """Only what a plain (no reassignment, clean) state needs is required on the wire."""
    state = from_wire(LeaderAndIsrPartitionState, [0, 3, 1, 7, [1, 2], 12, [1, 2, 3]])
    assert state.adding_replicas == state.removing_replicas == ()
    assert state.is_new is False
    assert state.leader_recovery_state == 0


@pytest.mark.parametrize(
    ("cls", "wire", "expected"),
    [
        # null means "every partition" / "cancel": it must survive as None, not become ().
        (ElectLeadersRequest, [1], ElectLeadersRequest(election_type=1)),
        (ElectLeadersRequest, [0, None, 60000], ElectLeadersRequest(election_type=0)),
        (
            AlterPartitionReassignmentsRequest,
            [[["t", [[0, None]]]]],
            AlterPartitionReassignmentsRequest(
                topics=(ReassignableTopic(name="t", partitions=(ReassignablePartition(
                    partition_index=0, replicas=None),)),)
            ),
        ),
        (ListPartitionReassignmentsRequest, [], ListPartitionReassignmentsRequest()),
        (
            CreatePartitionsRequest,
            [[["t", 4]]],
            CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=4),)),
        ),
        (DescribeClusterRequest, [], DescribeClusterRequest()),
        (StopReplicaRequest, [1, 3, 5, [["t", [[0]]]]], StopReplicaRequest(
            controller_id=1, controller_epoch=3, broker_epoch=5, topic_states=(
                StopReplicaTopicState(topic_name="t", partition_states=(
                    StopReplicaPartitionState(partition_index=0),)),))),
    ],
)  # fmt: skip
def test_short_bodies_take_kafkas_defaults(cls: type, wire: list[Any], expected: object) -> None:
    assert from_wire(cls, wire) == expected


def test_null_and_empty_lists_differ_on_the_wire() -> None:
    every = ElectLeadersRequest(election_type=0)
    none = ElectLeadersRequest(election_type=0, topic_partitions=())
    assert to_wire(every)[1] is None and to_wire(none)[1] == []
    assert from_wire(ElectLeadersRequest, to_wire(none)) == none


def test_describe_cluster_defaults_say_no_controller_and_no_acls() -> None:
    resp = DescribeClusterResponse()
    assert resp.controller_id == -1
    assert resp.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED == -(2**31)


@pytest.mark.parametrize(
    ("cls", "wire", "fragment"),
    [
        (LeaderAndIsrRequest, [1, 3], "missing 'broker_epoch'"),
        (LeaderAndIsrRequest, [1, 3, 5, [["t", TOPIC_ID, [[0, 3, 1, 7, "1", 1, []]]]], []],
         "topic_states[0].partition_states[0].isr: expected an array"),
        (UpdateMetadataRequest, [1, 3, 5, [], [[1, [[9092, "h"]]]]],
         "live_brokers[0].endpoints[0]: UpdateMetadataEndpoint has 2 fields"),
        (AlterPartitionRequest, [1, 2, [["t", TOPIC_ID, [[0, 7, [1], None]]]]],
         "topics[0].partitions[0].partition_epoch: expected an integer"),
        (StopReplicaRequest, [1, 3, 5, [["t", [[0, -1, "yes"]]]]],
         "partition_states[0].delete_partition: expected a boolean"),
        (FetchRequest, [500, 1, [], 1024, -1, 0, "", 0, -1, [["t", [1.5]]]],
         "forgotten_topics_data[0].partitions[0]: expected an integer"),
        (ElectLeadersRequest, [], "missing 'election_type'"),
        (ElectLeadersRequest, [0, [["t", None]]], "topic_partitions[0].partitions: expected an"),
        (CreatePartitionsRequest, [[["t", "4"]]], "topics[0].count: expected an integer"),
        (OffsetForLeaderEpochRequest, [-1, [["t", [[0]]]]],
         "topics[0].partitions[0]: OffsetForLeaderPartition has 1 fields"),
        (ListPartitionReassignmentsRequest, [60000, [["t", [0, "1"]]]],
         "topics[0].partition_indexes[1]: expected an integer"),
        (DescribeClusterRequest, [1], "include_cluster_authorized_operations: expected a boolean"),
    ],
)  # fmt: skip
def test_bad_fields_are_named(cls: type, wire: list[Any], fragment: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_wire(cls, wire)
    assert fragment in str(info.value)
