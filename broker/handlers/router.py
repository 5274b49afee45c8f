"""Request dispatch by ApiKey (Kafka's KafkaApis.handle): each API family registers its
handlers here (`add_handlers`), and the router calls the one a request names with the
request's client id (and whether another broker forwarded it) in context.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from broker.authorization import Narrowed, RequestAuthorization
from broker.server import ConnectionInfo
from protocol.codec import RequestEnvelope, api_versions_response
from protocol.errors import ErrorCode
from protocol.messages import INTER_BROKER_APIS, ApiKey, Response, error_response
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

Handler = Callable[[Any, ConnectionInfo], Awaitable[Any]]
"""One API's handler: (request body, connection) -> response body, None for no response."""


class ApiFamily(Protocol):
    """A family of APIs (produce, fetch, metadata, ...): the handlers it registers."""

    def handlers(self) -> Mapping[ApiKey, Handler]: ...


FORWARDED_CLIENT_ID = "trioka-forwarded"
"""The client id of a request one broker forwarded to the controller's broker (one hop only:
the receiver submits it to its own controller, which answers NOT_CONTROLLER if not active)."""

_forwarded: contextvars.ContextVar[bool] = contextvars.ContextVar("forwarded", default=False)
_client_id: contextvars.ContextVar[str] = contextvars.ContextVar("client_id", default="")


def request_client_id() -> str:
    """The client id of the request being handled (DescribeGroups reports members' ids)."""
    return _client_id.get()


def request_forwarded() -> bool:
    """Whether the request being handled came from another broker (FORWARDED_CLIENT_ID)."""
    return _forwarded.get()


class ApiRouter:
    """The RequestHandler the server calls (see broker.server.RequestHandler). It serves
    ApiVersions itself: only the router knows which APIs are registered."""

    def __init__(
        self,
        identity: Callable[[], tuple[int, int]] | None = None,
        internal_listeners: frozenset[str] | None = None,
        authorization: RequestAuthorization | None = None,
    ) -> None:
        self.authorization = authorization
        """`authorizer.class.name` set: every request checked against the ACLs first."""
        self._handlers: dict[ApiKey, Handler] = {ApiKey.API_VERSIONS: self.api_versions}
        self._identity = identity
        """(node id, broker epoch) that ApiVersions names: the controller's identity probe."""
        self.internal_listeners = internal_listeners
        """Where the inter-broker APIs (and the identity) are served: the inter-broker
        listener; None: everywhere. A broker with a listener of its own for clients refuses
        LeaderAndIsr, AlterPartition, follower Fetches, ... there, and names no epoch."""

    def add_handlers(self, handlers: Mapping[ApiKey, Handler]) -> None:
        """Serve more APIs (each family's `handlers()`, wired by broker.node)."""
        self._handlers.update(handlers)

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        refused = self._internal_only(request, conn)
        if refused is not None:
            return refused
        forwarded = request.client_id == FORWARDED_CLIENT_ID and self._internal(conn)
        checked = self.authorization
        if checked is not None and forwarded:
            # Trusted only from a node (CLUSTER_ACTION) and for what brokers forward: a client
            # naming that client id otherwise skipped every ACL (Kafka's envelope rule).
            forwarded = checked.trusts_forwarding(request, conn)
        if forwarded:
            checked = None
        narrowed: Narrowed | None = None
        if checked is not None:
            refused = checked.refuse(request, conn)
            if refused is not None:
                return refused
            # The items the principal may not use are answered refused, the rest served.
            asked, narrowed = request, checked.narrow(request, conn)
            request = narrowed.request
        handler = self._handlers.get(request.api_key)
        if handler is None:
            return error_response(
                type(request.body),
                ErrorCode.UNSUPPORTED_VERSION,
                f"{request.api_key.name} is not served by this broker",
            )
        if checked is not None and narrowed is not None and not narrowed.left:
            return checked.refusals(asked, narrowed)  # every item refused: no handler
        # Only a broker forwards: the client id counts where brokers connect.
        token = _forwarded.set(forwarded)
        client = _client_id.set(request.client_id or "")
        try:
            response = await handler(request.body, conn)
            if checked is not None and response is not None:
                response = checked.trim(asked, conn, response, narrowed)
            return response
        finally:
            _client_id.reset(client)
            _forwarded.reset(token)

    def _internal(self, conn: ConnectionInfo) -> bool:
        return self.internal_listeners is None or conn.listener in self.internal_listeners

    def _internal_only(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        """CLUSTER_AUTHORIZATION_FAILED for an inter-broker API on a client listener."""
        if self._internal(conn):
            return None
        api = request.api_key
        follower_fetch = api is ApiKey.FETCH and getattr(request.body, "replica_id", -1) >= 0
        if api not in INTER_BROKER_APIS and not follower_fetch:
            return None
        what = "a follower's Fetch" if follower_fetch else api.name
        return error_response(
            type(request.body),
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{what} is for brokers and controllers only: refused on listener {conn.listener}",
        )

    async def api_versions(
        self, request: ApiVersionsRequest, conn: ConnectionInfo
    ) -> ApiVersionsResponse:
        full = api_versions_response()
        served = tuple(r for r in full.api_keys if r.api_key in self._handlers)
        if self._identity is None or not self._internal(conn):
            # The epoch is what forged inter-broker requests need: only where brokers ask.
            return replace(full, api_keys=served)
        node_id, epoch = self._identity()
        return replace(full, api_keys=served, node_id=node_id, broker_epoch=epoch)
