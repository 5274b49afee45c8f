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
