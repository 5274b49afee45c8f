"""Forwarding to the controller (Kafka's ForwardingManager): admin requests go to the active
controller through `ControllerChannel`, and the broker answers the ones that change metadata
only once its own image has the result, so that a client that creates a topic can produce to
it with its next request."""

from __future__ import annotations

from collections.abc import Callable

import trio

from broker.handlers.router import request_forwarded
from broker.metadata_publisher import MetadataPublisher
from broker.metrics import awaiting_remote
from broker.ports import ControllerChannel
from broker.server import ConnectionInfo
from protocol.errors import KafkaError
from protocol.messages import Request, Response, error_response
from protocol.messages.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from protocol.messages.topics import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.metadata.acls import binding_from_creation, binding_of_match


class ControllerForwarder:
    def __init__(
        self,
        *,
        controller: ControllerChannel,
        publisher: MetadataPublisher,
        barrier: Callable[[], int | None],
        effect_timeout_s: float,
        local_controller: ControllerChannel | None = None,
    ) -> None:
        self.controller = controller
        self.publisher = publisher
        self.barrier = barrier
        """Read after the controller answered (MetadataFeed.forward_barrier): the offset the
        image must reach (standalone mode: the local log's commit), or None to wait instead
        until the image shows the request's effect (ZK and Raft mode)."""
        self.effect_timeout_s = effect_timeout_s
        """request.timeout.ms: how long that wait for the effect may take."""
        self.local_controller = local_controller
        """ZK mode: this broker's own controller service, for requests other brokers forwarded
        (client id FORWARDED_CLIENT_ID); None submits them to `controller` as any other."""

    def _channel(self) -> ControllerChannel:
        if request_forwarded() and self.local_controller is not None:
            return self.local_controller
        return self.controller

    async def forward(self, request: Request) -> Response:
        """Send to the controller, then wait until this broker's image has the result. May
        raise KafkaError (the channel's)."""
        awaiting_remote()  # RemoteTimeMs: the controller's answer and its propagation
        response = await self._channel().submit(request)
        offset = self.barrier()
        if offset is not None:
            await self.publisher.wait_for(offset)
        else:
            await self._await_effect(request, response)
        return response

    async def relay(self, request: Request, conn: ConnectionInfo) -> Response:
        """The handler of requests the controller answers as they are (CreatePartitions,
        ElectLeaders, reassignments; in ZK mode also AlterPartition and ControlledShutdown
        that other brokers forward): KafkaError from the channel becomes a request-level
        error."""
        awaiting_remote()  # RemoteTimeMs: the controller's answer
        try:
            return await self._channel().submit(request)
        except KafkaError as exc:
            return error_response(type(request), exc.code, exc.message)

    async def _await_effect(self, request: Request, response: Response) -> None:
        """ZK and Raft mode: the controller answered once its store had the change; wait
        (bounded) until the image here has it too, so that the client's next request finds it,
        as Kafka's DelayedCreatePartitions waits for the leaders."""
        done = self._effect_done(request, response)
        if done is None:
            return
        with trio.move_on_after(self.effect_timeout_s):
            while not done():
                await self.publisher.changed().wait()

    def _effect_done(self, request: Request, response: Response) -> Callable[[], bool] | None:
        """Whether the image shows the request's effect yet; None when there is none to wait
        for."""
        if isinstance(request, CreateTopicsRequest) and isinstance(response, CreateTopicsResponse):
            if request.validate_only:
                return None  # nothing was created: there is no effect to wait for
            created = [t.name for t in response.topics if t.error_code == 0]

            def all_led() -> bool:
                topics = self.publisher.image.topics
                return all(
                    (t := topics.get_topic(n)) is not None
                    and all(p.leader >= 0 for p in t.partitions.values())
                    for n in created
                )

            return all_led
        if isinstance(request, DeleteTopicsRequest) and isinstance(response, DeleteTopicsResponse):
            deleted = [r.name for r in response.responses if r.error_code == 0 and r.name]

            def all_gone() -> bool:
                topics = self.publisher.image.topics
                return all(topics.get_topic(n) is None for n in deleted)

            return all_gone
        if isinstance(request, AlterUserScramCredentialsRequest) and isinstance(
            response, AlterUserScramCredentialsResponse
        ):
            return self._credentials_altered(request, response)
        if isinstance(request, CreateAclsRequest) and isinstance(response, CreateAclsResponse):
            return self._acls_created(request, response)
        if isinstance(request, DeleteAclsRequest) and isinstance(response, DeleteAclsResponse):
            gone = {binding_of_match(m) for r in response.filter_results for m in r.matching_acls}

            def all_deleted() -> bool:
                return not gone & set(self.publisher.image.acls.by_id.values())

            return all_deleted
        return None

    def _acls_created(
        self, request: CreateAclsRequest, response: CreateAclsResponse
    ) -> Callable[[], bool]:
        made = {
            binding_from_creation(c)
            for c, r in zip(request.creations, response.results, strict=False)
            if r.error_code == 0
        }

        def all_there() -> bool:
            return made <= set(self.publisher.image.acls.by_id.values())

        return all_there

    def _credentials_altered(
        self, request: AlterUserScramCredentialsRequest, response: AlterUserScramCredentialsResponse
    ) -> Callable[[], bool]:
        ok = {r.user for r in response.results if r.error_code == 0}
        upserted = [(u.mechanism, u.name, u.salt) for u in request.upsertions if u.name in ok]
        deleted = [(d.mechanism, d.name) for d in request.deletions if d.name in ok]

        def all_there() -> bool:
            scram = self.publisher.image.scram
            return all(
                (c := scram.credential(m, name)) is not None and c.salt == salt
                for m, name, salt in upserted
            ) and all(scram.credential(m, name) is None for m, name in deleted)

        return all_there
