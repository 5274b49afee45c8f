"""A KRaft-mode broker's lifecycle with the active controller (KIP-631): BrokerRegistration at
start-up (the answer's broker epoch fences messages from older runs), BrokerHeartbeat every
broker.heartbeat.interval.ms (it carries how far the broker has read the metadata log, and its
wish to be fenced or to shut down; the answer says whether it is fenced, caught up, and may
finish shutting down), and UnregisterBroker to remove a broker for good.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class BrokerRegistrationListener:
    name: str
    """The listener name."""
    host: str
    """Advertised host."""
    port: int
    """Advertised port."""
    security_protocol: int = 0
    """Kafka's SecurityProtocol id; 0 = PLAINTEXT."""


@message
class BrokerRegistrationFeature:
    name: str
    """The feature name (metadata.version, ...)."""
    min_supported_version: int
    """The oldest feature level this broker supports."""
    max_supported_version: int
    """The newest feature level this broker supports."""


@message
class BrokerRegistrationResponse(Response):
    broker_epoch: int = -1
    """The broker epoch the controller assigned (the registration record's offset), -1 if
    none."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, NOT_CONTROLLER, INCONSISTENT_CLUSTER_ID, DUPLICATE_BROKER_REGISTRATION, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class BrokerRegistrationRequest(Request):
    API_KEY = ApiKey.BROKER_REGISTRATION
    MAX_VERSION = 0
    RESPONSE = BrokerRegistrationResponse

    broker_id: int
    """The broker id (node.id)."""
    cluster_id: str
    """The cluster id in the broker's meta.properties; another -> INCONSISTENT_CLUSTER_ID."""
    incarnation_id: str
    """A Uuid (base64) the broker process chose at start-up: tells restarts apart."""
    listeners: tuple[BrokerRegistrationListener, ...]
    """The broker's advertised listeners."""
    features: tuple[BrokerRegistrationFeature, ...] = ()
    """The feature levels the broker supports."""
    rack: str | None = None
    """broker.rack, if set."""
    previous_broker_epoch: int = -1
    """The broker epoch before a clean shutdown (-1 when there was none), so the controller can
    keep the old registration's state (KIP-966)."""


@message
class BrokerHeartbeatResponse(Response):
    is_caught_up: bool = False
    """True once the broker has (about) caught up with the metadata log."""
    is_fenced: bool = True
    """True while the broker is fenced: it must not lead or serve partitions."""
    should_shut_down: bool = False
    """True when a broker that asked to shut down may proceed (its leaderships have moved)."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, NOT_CONTROLLER, STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class BrokerHeartbeatRequest(Request):
    API_KEY = ApiKey.BROKER_HEARTBEAT
    MAX_VERSION = 0
    RESPONSE = BrokerHeartbeatResponse

    broker_id: int
    """The broker id."""
    broker_epoch: int
    """The broker epoch from BrokerRegistration; another -> STALE_BROKER_EPOCH."""
    current_metadata_offset: int
    """The highest metadata log offset the broker has applied."""
    want_fence: bool
    """True if the broker wants to be fenced (it is not ready to serve)."""
    want_shut_down: bool
    """True if the broker wants to shut down: the controller moves its leaderships away
    (controlled shutdown) and answers should_shut_down when that is done."""


@message
class UnregisterBrokerResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, NOT_CONTROLLER, BROKER_ID_NOT_REGISTERED."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class UnregisterBrokerRequest(Request):
    API_KEY = ApiKey.UNREGISTER_BROKER
    MAX_VERSION = 0
    RESPONSE = UnregisterBrokerResponse

    broker_id: int
    """The broker to remove from the cluster's registrations."""
