"""protocol.metadata.scram_credentials: AlterUserScramCredentials as records (Kafka's
validation) and DescribeUserScramCredentials from an image."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UserName,
)
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage, ScramImage
from protocol.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from protocol.metadata.scram_credentials import alter_scram_credentials, describe_scram_credentials
from protocol.scram import ScramMechanism, credential_from_salted, salted_password

SHA256 = int(ScramMechanism.SCRAM_SHA_256)
SHA512 = int(ScramMechanism.SCRAM_SHA_512)


def _up(name: str, mechanism: int = SHA256, iterations: int = 4096, password: str = "p"):
    salted = b""
    if mechanism in (SHA256, SHA512):
        salted = salted_password(ScramMechanism(mechanism), password, b"twelve-bytes", iterations)
    return ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=b"twelve-bytes",
        salted_password=salted,
    )


def _alter(image: ScramImage, *changes):
    request = AlterUserScramCredentialsRequest(
        deletions=tuple(c for c in changes if isinstance(c, ScramCredentialDeletion)),
        upsertions=tuple(c for c in changes if isinstance(c, ScramCredentialUpsertion)),
    )
    records, response = alter_scram_credentials(image, request)
    return records, {r.user: (ErrorCode(r.error_code), r.error_message) for r in response.results}


def _image(*records) -> ScramImage:
    return MetadataDelta(MetadataImage.empty()).replay_all(records).apply().scram


def test_an_upsertion_stores_keys_never_the_password() -> None:
    records, results = _alter(ScramImage(), _up("alice", password="pencil"))
    assert results == {"alice": (ErrorCode.NONE, None)}
    (record,) = records
    assert isinstance(record, UserScramCredentialRecord)
    expected = credential_from_salted(
        ScramMechanism.SCRAM_SHA_256,
        b"twelve-bytes",
        salted_password(ScramMechanism.SCRAM_SHA_256, "pencil", b"twelve-bytes", 4096),
        4096,
    )
    assert (record.stored_key, record.server_key) == (expected.stored_key, expected.server_key)
    assert b"pencil" not in repr(record).encode()
    assert _image(record).credential(SHA256, "alice") == expected


def test_kafkas_validation_rules() -> None:
    existing = _image(*_alter(ScramImage(), _up("bob"))[0])
    records, results = _alter(
        existing,
        _up(""),
        _up("few", iterations=4095),
        _up("many", iterations=16385),
        _up("mech", mechanism=7),
        _up("twice"),
        _up("twice"),
        ScramCredentialDeletion(name="ghost", mechanism=SHA256),
        ScramCredentialDeletion(name="bob", mechanism=SHA512),
        ScramCredentialDeletion(name="bob", mechanism=SHA256),
        _up("ok", mechanism=SHA512),
    )
    assert {u: code for u, (code, _) in results.items()} == {
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "mech": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "twice": ErrorCode.DUPLICATE_RESOURCE,
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
        # one of bob's changes fails: none of them is made
        "bob": ErrorCode.RESOURCE_NOT_FOUND,
        "ok": ErrorCode.NONE,
    }
    assert [(type(r).__name__, r.name) for r in records] == [("UserScramCredentialRecord", "ok")]


def test_a_salted_password_of_the_wrong_size_is_refused() -> None:
    bad = ScramCredentialUpsertion(
        name="x", mechanism=SHA512, iterations=4096, salt=b"s" * 12, salted_password=b"\0" * 32
    )
    records, results = _alter(ScramImage(), bad)
    assert records == []
    assert results["x"][0] is ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_removal_and_describe() -> None:
    image = _image(
        *_alter(ScramImage(), _up("alice"), _up("alice", SHA512, 8192), _up("bob"))[0],
        RemoveUserScramCredentialRecord(name="bob", mechanism=SHA256),
    )
    everyone = describe_scram_credentials(image, DescribeUserScramCredentialsRequest())
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in everyone.results] == [("alice", [(SHA256, 4096), (SHA512, 8192)])]  # fmt: skip
    named = describe_scram_credentials(
        image,
        DescribeUserScramCredentialsRequest(
            users=(UserName(name="bob"), UserName(name="alice"), UserName(name="alice"))
        ),
    )
    assert [(r.user, ErrorCode(r.error_code)) for r in named.results] == [
        ("bob", ErrorCode.RESOURCE_NOT_FOUND),
        ("alice", ErrorCode.DUPLICATE_RESOURCE),
    ]


def test_a_short_salt_is_refused() -> None:
    short = ScramCredentialUpsertion(
        name="x", mechanism=SHA256, iterations=4096, salt=b"s" * 11, salted_password=b"\0" * 32
    )
    assert _alter(ScramImage(), short)[1]["x"][0] is ErrorCode.UNACCEPTABLE_CREDENTIAL
