"""The Admin client's SCRAM user credentials (Kafka's Admin.alterUserScramCredentials and
describeUserScramCredentials): the password is salted here, so only the salted password (and
the keys the controller derives from it) ever leave this process."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UserName,
)
from protocol.scram import DEFAULT_ITERATIONS, ScramMechanism, salted_password

SALT_BYTES = 32


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    """A user's credentials as described: mechanism -> iterations (never a key)."""

    user: str
    iterations: dict[ScramMechanism, int]


class _Calls(Protocol):
    def _call(
        self, request: Request, *, to_controller: bool = False, deadline: float | None = None
    ) -> Awaitable[Any]: ...


def upsertion(
    user: str,
    password: str,
    mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_256,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredentialUpsertion:
    """Kafka's UserScramCredentialUpsertion: a random salt and the salted password."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return ScramCredentialUpsertion(
        name=user,
        mechanism=int(mechanism),
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations),
    )


class UserAdmin:
    """Mixed into Admin: needs `_call`."""

    async def alter_user_scram_credentials(
        self: _Calls,
        upsertions: Iterable[ScramCredentialUpsertion] = (),
        deletions: Iterable[tuple[str, ScramMechanism]] = (),
    ) -> None:
        """Add, replace or delete credentials; KafkaError naming the user that failed."""
        request = AlterUserScramCredentialsRequest(
            deletions=tuple(
                ScramCredentialDeletion(name=u, mechanism=int(m)) for u, m in deletions
            ),
            upsertions=tuple(upsertions),
        )
        response: AlterUserScramCredentialsResponse = await self._call(request, to_controller=True)
        for result in response.results:
            if result.error_code:
                code = ErrorCode.from_wire(result.error_code)
                raise KafkaError(code, f"user {result.user!r}: {result.error_message or code.name}")

    async def describe_user_scram_credentials(
        self: _Calls, users: Iterable[str] | None = None
    ) -> list[UserScramCredentials]:
        """Each user's mechanisms and iteration counts (every user's when `users` is None);
        KafkaError RESOURCE_NOT_FOUND for a named user without any."""
        names = None if users is None else tuple(UserName(name=u) for u in users)
        response: DescribeUserScramCredentialsResponse = await self._call(
            DescribeUserScramCredentialsRequest(users=names)
        )
        out = []
        for result in response.results:
            if result.error_code:
                code = ErrorCode.from_wire(result.error_code)
                raise KafkaError(code, f"user {result.user!r}: {result.error_message or code.name}")
            out.append(
                UserScramCredentials(
                    result.user,
                    {ScramMechanism(c.mechanism): c.iterations for c in result.credential_infos},
                )
            )
        return out
