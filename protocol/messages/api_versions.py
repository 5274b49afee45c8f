"""ApiVersions: the first request a client sends; lists every API and its version range."""

from __future__ import annotations

from protocol.messages.base import REQUESTS, ApiKey, Request, Response, message, register


@message
class ApiVersionRange:
    api_key: int
    """The API's key (Kafka's numbering)."""
    min_version: int
    """Oldest version this broker accepts."""
    max_version: int
    """Newest version this broker accepts."""


@message
class ApiVersionsResponse(Response):
    api_keys: tuple[ApiVersionRange, ...] = ()
    """Every API this broker serves."""
    throttle_time_ms: int = 0
    """Always 0: trioka has no quotas yet."""
    error_code: int = 0
    """Kafka error code; UNSUPPORTED_VERSION when the request's version was too new."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_id: int = -1
    """trioka: the broker answering (-1: not a broker). With `broker_epoch`, what the
    controller's identity probe checks before fencing a broker whose connection ended."""
    broker_epoch: int = -1
    """trioka: the answering broker's epoch (-1 until it is registered)."""


@register
@message
class ApiVersionsRequest(Request):
    API_KEY = ApiKey.API_VERSIONS
    MAX_VERSION = 0
    RESPONSE = ApiVersionsResponse

    client_software_name: str = ""
    """Name of the client library, for the broker's logs."""
    client_software_version: str = ""
    """Version of the client library."""


def supported_versions() -> tuple[ApiVersionRange, ...]:
    """Every registered API with its version range, by api key: the body of ApiVersions."""
    return tuple(
        ApiVersionRange(api_key=int(key), min_version=cls.MIN_VERSION, max_version=cls.MAX_VERSION)
        for key, cls in sorted(REQUESTS.items())
    )
