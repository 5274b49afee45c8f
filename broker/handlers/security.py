"""The security APIs KafkaApis serves: ACLs and SCRAM credentials (DescribeAcls and
DescribeUserScramCredentials from this broker's image; CreateAcls, DeleteAcls and
AlterUserScramCredentials forwarded, answered once the image has the change)
and the SASL APIs after authentication or on a listener without SASL (ILLEGAL_SASL_STATE, as
Kafka answers them: a SASL listener's server handles them before any request gets here)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from broker.handlers.router import Handler
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey, Request, Response
from protocol.messages.acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
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
from protocol.metadata.acls import describe_acls
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
            ApiKey.DESCRIBE_ACLS: self.describe_acls,
            ApiKey.CREATE_ACLS: self.forward_or_fail,
            ApiKey.DELETE_ACLS: self.forward_or_fail,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.alter_user_scram_credentials,
            ApiKey.SASL_HANDSHAKE: self.sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: self.sasl_authenticate,
        }

    async def describe_acls(
        self, request: DescribeAclsRequest, conn: ConnectionInfo
    ) -> DescribeAclsResponse:
        return describe_acls(self.image().acls, request)

    async def forward_or_fail(self, request: Request, conn: ConnectionInfo) -> Response:
        """To the controller; its channel's error on every entry the request names."""
        try:
            return await self.forward(request)
        except KafkaError as exc:
            code, message = int(exc.code), exc.message
            if isinstance(request, CreateAclsRequest):
                return CreateAclsResponse(results=tuple(
                    AclCreationResult(error_code=code, error_message=message)
                    for _ in request.creations
                ))  # fmt: skip
            assert isinstance(request, DeleteAclsRequest)
            return DeleteAclsResponse(filter_results=tuple(
                DeleteAclsFilterResult(error_code=code, error_message=message)
                for _ in request.filters
            ))  # fmt: skip

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
