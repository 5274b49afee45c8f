"""The security APIs KafkaApis serves: SCRAM credentials (DescribeUserScramCredentials from this
broker's image; AlterUserScramCredentials forwarded, answered once the image has the change)
and the SASL APIs after authentication or on a listener without SASL (ILLEGAL_SASL_STATE, as
Kafka answers them: a SASL listener's server handles them before any request gets here)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from broker.handlers.router import Handler
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey, Request, Response
from protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.metadata.image import MetadataImage
from protocol.metadata.scram_credentials import describe_scram_credentials


class SecurityHandler:
    def __init__(
        self,
        *,
        image: Callable[[], MetadataImage],
        forward: Callable[[Request], Awaitable[Response]],
    ) -> None:
        self.image = image
        self.forward = forward

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.alter_user_scram_credentials,
            ApiKey.SASL_HANDSHAKE: self.sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: self.sasl_authenticate,
        }

    async def describe_user_scram_credentials(
        self, request: DescribeUserScramCredentialsRequest, conn: ConnectionInfo
    ) -> DescribeUserScramCredentialsResponse:
        return describe_scram_credentials(self.image().scram, request)

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest, conn: ConnectionInfo
    ) -> AlterUserScramCredentialsResponse:
        try:
            return await self.forward(request)  # type: ignore[return-value]
        except KafkaError as exc:
            users = dict.fromkeys(c.name for c in (*request.deletions, *request.upsertions))
            return AlterUserScramCredentialsResponse(
                results=tuple(
                    AlterUserScramCredentialsResult(
                        user=u, error_code=int(exc.code), error_message=exc.message
                    )
                    for u in users
                )
            )

    async def sasl_handshake(
        self, request: SaslHandshakeRequest, conn: ConnectionInfo
    ) -> SaslHandshakeResponse:
        return SaslHandshakeResponse(
            error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
            error_message=_not_expected(conn, "SaslHandshake"),
        )

    async def sasl_authenticate(
        self, request: SaslAuthenticateRequest, conn: ConnectionInfo
    ) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
            error_message=_not_expected(conn, "SaslAuthenticate"),
        )


def _not_expected(conn: ConnectionInfo, api: str) -> str:
    if conn.security_protocol.startswith("SASL"):
        return f"{api} request received after successful authentication"
    return (
        f"{api} request received on listener {conn.listener}, whose security protocol "
        f"{conn.security_protocol} has no SASL"
    )
