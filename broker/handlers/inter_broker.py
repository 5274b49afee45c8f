"""ZK mode's inter-broker APIs: the controller's LeaderAndIsr, StopReplica and UpdateMetadata
(broker.leader_and_isr applies them), and the broker-to-controller requests (AlterPartition,
ControlledShutdown, AllocateProducerIds) that other brokers send to the controller's broker,
relayed to its controller."""

from __future__ import annotations

from collections.abc import Mapping

from broker.handlers.router import Handler
from broker.leader_and_isr import ControllerRequestHandler
from broker.server import ConnectionInfo
from protocol.messages import ApiKey, Response
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest


class InterBrokerHandler:
    def __init__(self, controller_requests: ControllerRequestHandler, relay: Handler) -> None:
        self.controller_requests = controller_requests
        self.relay = relay
        """To the controller, answered as it is (ControllerForwarder.relay)."""

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {
            ApiKey.LEADER_AND_ISR: self.leader_and_isr,
            ApiKey.STOP_REPLICA: self.stop_replica,
            ApiKey.UPDATE_METADATA: self.update_metadata,
            # Brokers forward these to the controller's broker (ZK mode).
            ApiKey.ALTER_PARTITION: self.relay,
            ApiKey.CONTROLLED_SHUTDOWN: self.relay,
            ApiKey.ALLOCATE_PRODUCER_IDS: self.relay,
        }

    async def leader_and_isr(self, request: LeaderAndIsrRequest, conn: ConnectionInfo) -> Response:
        return self.controller_requests.leader_and_isr(request)

    async def stop_replica(self, request: StopReplicaRequest, conn: ConnectionInfo) -> Response:
        return self.controller_requests.stop_replica(request)

    async def update_metadata(
        self, request: UpdateMetadataRequest, conn: ConnectionInfo
    ) -> Response:
        return self.controller_requests.update_metadata(request)
