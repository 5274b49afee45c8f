"""protocol.scram and the SCRAM exchange scramp runs with its credentials: RFC 7677's test
vector (SCRAM-SHA-256), a SHA-512 round trip, wrong passwords, and the stored text form."""

from __future__ import annotations

import base64

import pytest
import scramp

from protocol.scram import (
    CredentialFormatError,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
    salted_password,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _credential(mechanism: ScramMechanism, password: str, salt: bytes) -> ScramCredential:
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password, salt, 4096), 4096
    )


def _exchange(
    credential: ScramCredential, mechanism: ScramMechanism, password: str, **nonces: str
) -> list[str]:
    name = mechanism.mechanism_name
    server = scramp.ScramMechanism(name).make_server(
        lambda user: credential.auth_info(), s_nonce=nonces.get("s_nonce")
    )
    client = scramp.ScramClient([name], "user", password, c_nonce=nonces.get("c_nonce"))
    messages = [client.get_client_first()]
    server.set_client_first(messages[-1])
    messages.append(server.get_server_first())
    client.set_server_first(messages[-1])
    messages.append(client.get_client_final())
    server.set_client_final(messages[-1])
    messages.append(server.get_server_final())
    client.set_server_final(messages[-1])
    return messages


def test_rfc7677_vector() -> None:
    credential = _credential(ScramMechanism.SCRAM_SHA_256, "pencil", RFC7677_SALT)
    messages = _exchange(
        credential,
        ScramMechanism.SCRAM_SHA_256,
        "pencil",
        c_nonce=RFC7677_CLIENT_NONCE,
        s_nonce=RFC7677_SERVER_NONCE,
    )
    assert messages == [
        "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ]


def test_sha512_round_trip() -> None:
    credential = _credential(ScramMechanism.SCRAM_SHA_512, "secret", b"salt-of-sha-512")
    assert len(credential.stored_key) == len(credential.server_key) == 64
    _exchange(credential, ScramMechanism.SCRAM_SHA_512, "secret")


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_wrong_password_is_refused(mechanism: ScramMechanism) -> None:
    credential = _credential(mechanism, "right", b"twelve-bytes")
    with pytest.raises(scramp.ScramException):
        _exchange(credential, mechanism, "wrong")


def test_credential_text_round_trip() -> None:
    credential = _credential(ScramMechanism.SCRAM_SHA_256, "pencil", RFC7677_SALT)
    text = credential.to_text()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("salt=AA==,stored_key=AA==,server_key=AA==", "lacks iterations"),
        ("salt=***,stored_key=AA==,server_key=AA==,iterations=1", "not base64"),
        ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=many", "not base64"),
    ],
)
def test_bad_credential_text_says_what(text: str, says: str) -> None:
    with pytest.raises(CredentialFormatError, match=says):
        ScramCredential.from_text(text)


def test_mechanism_names() -> None:
    assert ScramMechanism.from_name("scram-sha-512") is ScramMechanism.SCRAM_SHA_512
    assert ScramMechanism.from_name("PLAIN") is ScramMechanism.UNKNOWN
    assert ScramMechanism.SCRAM_SHA_256.mechanism_name == "SCRAM-SHA-256"
