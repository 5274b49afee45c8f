"""SaslHandshake and SaslAuthenticate: a SASL listener's authentication exchange (KIP-43, KIP-152).

On a SASL_PLAINTEXT or SASL_SSL listener a client sends ApiVersions (optional), SaslHandshake
naming a mechanism, then SaslAuthenticate requests carrying the mechanism's tokens until the
broker says it is done; nothing else is served before that.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class SaslHandshakeResponse(Response):
    mechanisms: tuple[str, ...] = ()
    """The mechanisms this listener enables (sasl.enabled.mechanisms)."""
    error_code: int = 0
    """UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE."""
    error_message: str | None = None
    """What went wrong, for a person (not in Kafka's schema; null on success)."""


@register
@message
class SaslHandshakeRequest(Request):
    API_KEY = ApiKey.SASL_HANDSHAKE
    MIN_VERSION = 1
    MAX_VERSION = 1
    RESPONSE = SaslHandshakeResponse

    mechanism: str
    """PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."""


@message
class SaslAuthenticateResponse(Response):
    auth_bytes: bytes = b""
    """The mechanism's next server token (SCRAM's server-first and server-final messages)."""
    session_lifetime_ms: int = 0
    """0: the session does not expire (connections.max.reauth.ms is not served)."""
    error_code: int = 0
    """SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE."""
    error_message: str | None = None
    """What went wrong, for a person: never says whether the user exists."""


@register
@message
class SaslAuthenticateRequest(Request):
    API_KEY = ApiKey.SASL_AUTHENTICATE
    MAX_VERSION = 1
    RESPONSE = SaslAuthenticateResponse

    auth_bytes: bytes
    """The mechanism's next client token."""
