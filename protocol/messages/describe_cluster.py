"""DescribeCluster: the cluster id, the active controller and the live brokers (KIP-700)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Kafka's Integer.MIN_VALUE: authorized operations were not requested (or not known)."""


@message
class DescribeClusterBroker:
    broker_id: int
    """Broker id."""
    host: str
    """Advertised host of the listener the request came in on."""
    port: int
    """Advertised port."""
    rack: str | None = None
    """broker.rack, if set."""


@message
class DescribeClusterResponse(Response):
    brokers: tuple[DescribeClusterBroker, ...] = ()
    """Live brokers."""
    cluster_id: str = ""
    """The cluster id."""
    controller_id: int = -1
    """Active controller's broker id, -1 when unknown."""
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    """Bit field of the operations the caller may perform on the cluster; trioka has no ACLs,
    so always AUTHORIZED_OPERATIONS_OMITTED."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DescribeClusterRequest(Request):
    API_KEY = ApiKey.DESCRIBE_CLUSTER
    MAX_VERSION = 0
    RESPONSE = DescribeClusterResponse

    include_cluster_authorized_operations: bool = False
    """Ask for cluster_authorized_operations."""
