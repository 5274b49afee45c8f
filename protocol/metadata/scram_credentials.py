"""SCRAM credentials in the metadata: AlterUserScramCredentials turned into records (the
controller's, as Kafka's ScramControlManager) and DescribeUserScramCredentials answered from an
image (a broker's, as Kafka's KRaft broker does).

Validation as Kafka's: an empty user name or an iteration count outside 4096..16384 is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, a user and mechanism
named twice DUPLICATE_RESOURCE, a deletion of a credential that does not exist
RESOURCE_NOT_FOUND; a salt under 12 bytes is UNACCEPTABLE_CREDENTIAL too. A user's changes in one request succeed or fail together.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from protocol.errors import ErrorCode
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from protocol.metadata.image import ScramImage
from protocol.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from protocol.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    MIN_SALT_BYTES,
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
)

Change = ScramCredentialDeletion | ScramCredentialUpsertion


def _check(change: Change, image: ScramImage) -> tuple[ErrorCode, str] | None:
    if not change.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if change.mechanism not in SCRAM_MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {change.mechanism}"
    mechanism = ScramMechanism(change.mechanism)
    if isinstance(change, ScramCredentialDeletion):
        if image.credential(mechanism, change.name) is None:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return None
    if change.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations (minimum {MIN_ITERATIONS})"
    if change.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations (maximum {MAX_ITERATIONS})"
    if len(change.salt) < MIN_SALT_BYTES:
        # scramp's clients refuse shorter salts: such a credential could never log in.
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salt must be at least {MIN_SALT_BYTES} bytes"
    if len(change.salted_password) != hashlib.new(mechanism.hash_name).digest_size:
        return (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Salted password must be a {mechanism.hash_name} digest",
        )
    return None


def _record(change: Change) -> MetadataRecord:
    if isinstance(change, ScramCredentialDeletion):
        return RemoveUserScramCredentialRecord(name=change.name, mechanism=change.mechanism)
    credential = credential_from_salted(
        ScramMechanism(change.mechanism), change.salt, change.salted_password, change.iterations
    )
    return UserScramCredentialRecord(
        name=change.name,
        mechanism=change.mechanism,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


def alter_scram_credentials(
    image: ScramImage, request: AlterUserScramCredentialsRequest
) -> tuple[list[MetadataRecord], AlterUserScramCredentialsResponse]:
    """The records for the valid users' changes, and one result per user named."""
    changes: list[Change] = [*request.deletions, *request.upsertions]
    twice = Counter((c.name, c.mechanism) for c in changes)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for change in changes:
        if change.name in errors:
            continue
        if twice[change.name, change.mechanism] > 1:
            errors[change.name] = (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
            continue
        error = _check(change, image)
        if error is not None:
            errors[change.name] = error
    records = [_record(c) for c in changes if c.name not in errors]
    results = []
    for user in dict.fromkeys(c.name for c in changes):
        code, message = errors.get(user, (ErrorCode.NONE, None))
        results.append(
            AlterUserScramCredentialsResult(user=user, error_code=int(code), error_message=message)
        )
    return records, AlterUserScramCredentialsResponse(results=tuple(results))


def describe_scram_credentials(
    image: ScramImage, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    """Each named user's mechanisms and iteration counts (every user's when none is named);
    never a salt or a key."""
    users = image.users()
    if not request.users:
        return DescribeUserScramCredentialsResponse(
            results=tuple(_described(name, users[name]) for name in sorted(users))
        )
    names = [u.name for u in request.users]
    twice = {name for name, n in Counter(names).items() if n > 1}
    results = []
    for name in dict.fromkeys(names):
        if name in twice:
            results.append(_failed(name, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe "
                                   "the same user twice in one request"))  # fmt: skip
        elif name not in users:
            results.append(_failed(name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe "
                                   "a user credential that does not exist"))  # fmt: skip
        else:
            results.append(_described(name, users[name]))
    return DescribeUserScramCredentialsResponse(results=tuple(results))


def _described(
    name: str, by_mechanism: dict[int, ScramCredential]
) -> DescribeUserScramCredentialsResult:
    infos = (
        CredentialInfo(mechanism=m, iterations=c.iterations)
        for m, c in sorted(by_mechanism.items())
    )
    return DescribeUserScramCredentialsResult(user=name, credential_infos=tuple(infos))


def _failed(name: str, code: ErrorCode, message: str) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(
        user=name, error_code=int(code), error_message=message
    )
