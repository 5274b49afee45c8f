"""ApiRouter: dispatch by ApiKey, UNSUPPORTED_VERSION for an API nobody registered, ApiVersions
listing what is registered, and the request's client id in context while its handler runs."""

from __future__ import annotations

from typing import Any

from broker.handlers.router import (
    FORWARDED_CLIENT_ID,
    ApiRouter,
    request_client_id,
    request_forwarded,
)
from broker.server import ConnectionInfo
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.topics import DeleteTopicsRequest, DeleteTopicsResponse

CONN = ConnectionInfo(peer="127.0.0.1:1", listener="PLAINTEXT")


def envelope(body: Any, client_id: str | None = "c1") -> RequestEnvelope:
    return RequestEnvelope(body.API_KEY, 0, 7, client_id, body)


async def test_an_unregistered_api_is_unsupported() -> None:
    response = await ApiRouter().handle(envelope(DeleteTopicsRequest(topic_names=("t",))), CONN)
    assert isinstance(response, DeleteTopicsResponse)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert response.error_message == "DELETE_TOPICS is not served by this broker"


async def test_api_versions_lists_the_registered_apis_and_itself() -> None:
    router = ApiRouter()

    async def metadata(request: MetadataRequest, conn: ConnectionInfo) -> MetadataResponse:
        return MetadataResponse()

    router.add_handlers({ApiKey.METADATA: metadata})
    response = await router.handle(envelope(ApiVersionsRequest()), CONN)
    assert isinstance(response, ApiVersionsResponse)
    assert {r.api_key for r in response.api_keys} == {ApiKey.API_VERSIONS, ApiKey.METADATA}


async def test_the_handler_sees_the_client_id_and_whether_a_broker_forwarded_it() -> None:
    router = ApiRouter()
    seen: list[tuple[str, bool]] = []

    async def metadata(request: MetadataRequest, conn: ConnectionInfo) -> MetadataResponse:
        seen.append((request_client_id(), request_forwarded()))
        return MetadataResponse()

    router.add_handlers({ApiKey.METADATA: metadata})
    await router.handle(envelope(MetadataRequest(), "app"), CONN)
    await router.handle(envelope(MetadataRequest(), FORWARDED_CLIENT_ID), CONN)
    await router.handle(envelope(MetadataRequest(), None), CONN)
    assert seen == [("app", False), (FORWARDED_CLIENT_ID, True), ("", False)]
    assert (request_client_id(), request_forwarded()) == ("", False)  # reset after each


async def test_inter_broker_apis_only_on_the_inter_broker_listener() -> None:
    """With a listener of its own for clients, a broker refuses there what only brokers and
    controllers send (CLUSTER_AUTHORIZATION_FAILED) and names no epoch in ApiVersions: an
    independent probe's forged LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
    and follower Fetches all came in on the one listener everything shared."""
    router = ApiRouter(identity=lambda: (1, 4242), internal_listeners=frozenset({"INTERNAL"}))
    served: list[str] = []

    async def answer(request: Any, conn: ConnectionInfo) -> Any:
        served.append(type(request).__name__)
        return request.RESPONSE()

    router.add_handlers({ApiKey.CONTROLLED_SHUTDOWN: answer, ApiKey.FETCH: answer})
    client = ConnectionInfo(peer="127.0.0.1:2", listener="CLIENT")
    internal = ConnectionInfo(peer="127.0.0.1:3", listener="INTERNAL")
    shutdown = ControlledShutdownRequest(broker_id=1, broker_epoch=4242)
    refused = await router.handle(envelope(shutdown), client)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "refused on listener CLIENT" in refused.error_message
    follower = FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=0, topics=())
    assert (await router.handle(envelope(follower), client)).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    consumer = FetchRequest(max_wait_ms=0, min_bytes=0, topics=())
    await router.handle(envelope(consumer), client)
    await router.handle(envelope(shutdown), internal)
    await router.handle(envelope(follower), internal)
    assert served == ["FetchRequest", "ControlledShutdownRequest", "FetchRequest"]
    on_client = await router.handle(envelope(ApiVersionsRequest()), client)
    on_internal = await router.handle(envelope(ApiVersionsRequest()), internal)
    assert (on_internal.node_id, on_internal.broker_epoch) == (1, 4242)
    assert on_client.broker_epoch != 4242


async def test_one_listener_for_everything_serves_everything() -> None:
    router = ApiRouter(identity=lambda: (1, 4242))

    async def answer(request: Any, conn: ConnectionInfo) -> Any:
        return request.RESPONSE()

    router.add_handlers({ApiKey.CONTROLLED_SHUTDOWN: answer})
    shutdown = ControlledShutdownRequest(broker_id=1, broker_epoch=4242)
    assert (await router.handle(envelope(shutdown), CONN)).error_code == 0


async def test_a_client_listener_does_not_take_the_forwarded_client_id_at_its_word() -> None:
    router = ApiRouter(internal_listeners=frozenset({"INTERNAL"}))
    seen: list[bool] = []

    async def metadata(request: MetadataRequest, conn: ConnectionInfo) -> MetadataResponse:
        seen.append(request_forwarded())
        return MetadataResponse()

    router.add_handlers({ApiKey.METADATA: metadata})
    forwarded = envelope(MetadataRequest(), FORWARDED_CLIENT_ID)
    await router.handle(forwarded, ConnectionInfo(peer="127.0.0.1:2", listener="CLIENT"))
    await router.handle(forwarded, ConnectionInfo(peer="127.0.0.1:3", listener="INTERNAL"))
    assert seen == [False, True]
