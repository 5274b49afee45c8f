"""Request dispatch (Kafka's KafkaApis): one method per API."""

from __future__ import annotations

from broker.server import ConnectionInfo, api_versions
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import Response, error_response
from protocol.messages.api_versions import ApiVersionsResponse


class ApiVersionsOnly:
    """The smallest handler: ApiVersions, and UNSUPPORTED_VERSION for the rest."""

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        if isinstance(request.body, object) and request.api_key.name == "API_VERSIONS":
            return ApiVersionsResponse(api_keys=api_versions())
        return error_response(type(request.body), ErrorCode.UNSUPPORTED_VERSION, "not served yet")
