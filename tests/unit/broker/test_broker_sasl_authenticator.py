"""broker.sasl.SaslAuthenticator, sans I/O, with scramp's client on the other side: the order of
the exchange, PLAIN's checks, SCRAM with escaped names and SASLprep'd passwords, and an unknown
user that looks like a known one in the server's first message."""

from __future__ import annotations

import pytest
import scramp

from broker.sasl import MECHANISMS, SaslAuthenticator, SaslProtocolError
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.scram import ScramCredential, ScramMechanism, credential_from_salted, salted_password

SHA256 = ScramMechanism.SCRAM_SHA_256


def credential(password: str, iterations: int = 4096) -> ScramCredential:
    salt = b"s" * 32
    return credential_from_salted(
        SHA256, salt, salted_password(SHA256, password, salt, iterations), iterations
    )


def authenticator(users: dict[str, ScramCredential]) -> SaslAuthenticator:
    return SaslAuthenticator(
        MECHANISMS, {"admin": "admin-secret"}, lambda m, u: users.get(u), secret=b"k" * 32
    )


def scram_login(auth: SaslAuthenticator, user: str, password: str) -> tuple[bool, str]:
    """(authenticated, the server's first message)."""
    assert auth.handshake(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    first = auth.authenticate(
        SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode())
    )
    server_first = first.auth_bytes.decode()
    client.set_server_first(server_first)
    final = auth.authenticate(
        SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode())
    )
    if final.error_code:
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        return False, server_first
    client.set_server_final(final.auth_bytes.decode())
    return auth.complete, server_first


def test_only_the_exchange_comes_before_authentication() -> None:
    auth = authenticator({})
    auth.check_allowed(ApiKey.API_VERSIONS)
    with pytest.raises(SaslProtocolError, match="METADATA"):
        auth.check_allowed(ApiKey.METADATA)
    with pytest.raises(SaslProtocolError):
        auth.check_allowed(ApiKey.SASL_AUTHENTICATE)  # before the handshake
    refused = auth.handshake(SaslHandshakeRequest(mechanism="GSSAPI"))
    assert refused.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert refused.mechanisms == MECHANISMS and auth.closing


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        (b"\0admin\0admin-secret", True),
        (b"admin\0admin\0admin-secret", True),  # authzid = username
        (b"bob\0admin\0admin-secret", False),  # another authzid
        (b"\0admin\0wrong", False),
        (b"\0nobody\0admin-secret", False),
        (b"\0admin", False),
    ],
)
def test_plain(token: bytes, ok: bool) -> None:
    auth = authenticator({})
    auth.handshake(SaslHandshakeRequest(mechanism="PLAIN"))
    answer = auth.authenticate(SaslAuthenticateRequest(auth_bytes=token))
    assert (answer.error_code == 0) is ok
    assert auth.complete is ok and (auth.principal == "User:admin") is ok


def test_scram_users_with_escaped_names_and_saslprep_passwords() -> None:
    users = {"a,b=c": credential("pass\u00a0word")}  # NBSP: SASLprep maps it to a space
    auth = authenticator(users)
    ok, _ = scram_login(auth, "a,b=c", "pass\u00a0word")
    assert ok and auth.principal == "User:a,b=c"


def test_an_unknown_user_looks_like_a_known_one_until_the_proof() -> None:
    users = {"alice": credential("right")}

    def salt_and_count(server_first: str) -> tuple[int, str]:
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        return len(fields["s"]), fields["i"]

    ok, known = scram_login(authenticator(users), "alice", "wrong")
    assert not ok
    ok, unknown = scram_login(authenticator(users), "mallory", "wrong")
    assert not ok
    assert salt_and_count(known) == salt_and_count(unknown)
    # The same made-up salt on every try (a fresh one each time would tell).
    _, again = scram_login(authenticator(users), "mallory", "other")
    assert unknown.split(",")[1] == again.split(",")[1]
