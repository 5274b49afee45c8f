"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

A credential is salted on the client: an upsertion carries the salt, the iteration count and
the salted password (Hi(password, salt, i), RFC 5802), never the password; the controller keeps
only the stored and server keys derived from it.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class UserName:
    name: str
    """The user name."""


@message
class CredentialInfo:
    mechanism: int
    """ScramMechanism id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512."""
    iterations: int
    """The iteration count its keys were salted with."""


@message
class DescribeUserScramCredentialsResult:
    user: str
    """The user name."""
    error_code: int = 0
    """RESOURCE_NOT_FOUND when the user has no credential; DUPLICATE_RESOURCE."""
    error_message: str | None = None
    """What went wrong, for a person."""
    credential_infos: tuple[CredentialInfo, ...] = ()
    """One per mechanism the user has a credential for."""


@message
class DescribeUserScramCredentialsResponse(Response):
    results: tuple[DescribeUserScramCredentialsResult, ...] = ()
    """One per user asked for (every user with a credential when none was named)."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DescribeUserScramCredentialsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    MAX_VERSION = 0
    RESPONSE = DescribeUserScramCredentialsResponse

    users: tuple[UserName, ...] | None = None
    """The users to describe; null (or empty) for all."""


@message
class ScramCredentialDeletion:
    name: str
    """The user name."""
    mechanism: int
    """ScramMechanism id of the credential to delete."""


@message
class ScramCredentialUpsertion:
    name: str
    """The user name."""
    mechanism: int
    """ScramMechanism id."""
    iterations: int
    """Iteration count (4096 to 16384, as Kafka)."""
    salt: bytes
    """A random salt."""
    salted_password: bytes
    """Hi(password, salt, iterations) for the mechanism's hash."""


@message
class AlterUserScramCredentialsResult:
    user: str
    """The user name."""
    error_code: int = 0
    """UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND,
    DUPLICATE_RESOURCE."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class AlterUserScramCredentialsResponse(Response):
    results: tuple[AlterUserScramCredentialsResult, ...] = ()
    """One per user named in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class AlterUserScramCredentialsRequest(Request):
    API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    MAX_VERSION = 0
    RESPONSE = AlterUserScramCredentialsResponse

    deletions: tuple[ScramCredentialDeletion, ...] = ()
    """Credentials to delete."""
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()
    """Credentials to add or replace."""
