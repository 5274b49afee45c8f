"""A SASL listener's authentication of one connection, sans I/O (Kafka's
SaslServerAuthenticator): the requests allowed before a client has proved who it is, and the
PLAIN and SCRAM-SHA-256/512 mechanisms.

The exchange, as Kafka's clients run it: ApiVersions (optional, answered by the caller), then
SaslHandshake naming a mechanism listed in `sasl.enabled.mechanisms`, then SaslAuthenticate
requests carrying the mechanism's tokens. Anything else before the end is a protocol violation:
the server closes the connection without an answer, as Kafka does. A refused mechanism or
failed authentication is answered (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED) and
the connection is then closed.

Failure messages are Kafka's and never say whether the user exists.
- PLAIN (RFC 4616): `[authzid] NUL username NUL password`, checked against the listener's JAAS
  users (`user_<name>="<password>"` in `sasl.jaas.config`), in constant time.
- SCRAM (RFC 5802, 7677): scramp's server over the credentials of the metadata image.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import scramp

from broker.config import SASL_PROTOCOLS, Listener, ListenerSecurity
from protocol.config_defs import ConfigError
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from protocol.scram import DEFAULT_ITERATIONS, ScramCredential, ScramMechanism

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512")
"""What trioka serves (no GSSAPI, no OAUTHBEARER)."""
FAKE_SALT_BYTES = 32
"""As long as the salts trioka's clients make (client.admin_users.SALT_BYTES)."""
PRE_AUTHENTICATION_APIS = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)

CredentialLookup = Callable[[ScramMechanism, str], ScramCredential | None]
"""(mechanism, user) -> the user's credential in the current metadata image, or None."""


class SaslProtocolError(Exception):
    """A request the exchange does not allow here: the connection is closed unanswered."""


class _State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


def parse_jaas_options(text: str, key: str = "sasl.jaas.config") -> dict[str, str]:
    """The `name="value"` options of a JAAS login module entry (Kafka's sasl.jaas.config);
    ConfigError when the text is not one."""
    if not text.strip():
        return {}
    head = re.match(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if head is None or not text.rstrip().endswith(";"):
        raise ConfigError(
            f"{key}: not a JAAS login module entry (expected `<LoginModule class> required "
            'key="value" ... ;`)'
        )
    return dict(re.findall(r'([\w.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"', text))


def parse_jaas_users(text: str, key: str = "sasl.jaas.config") -> dict[str, str]:
    """The `user_<name>="<password>"` options of a PlainLoginModule JAAS config (Kafka's
    PlainServerCallbackHandler reads the same)."""
    options = parse_jaas_options(text, key)
    return {k[len("user_") :]: v for k, v in options.items() if k.startswith("user_")}


def _no_credentials(mechanism: ScramMechanism, user: str) -> None:
    return None


def peer_credentials(config: ListenerSecurity, listener: str, mechanism: str) -> tuple[str, str]:
    """(user name, password) this node logs in with on `listener` of its peers: the
    `username` and `password` options of that listener's JAAS config for `mechanism` (Kafka's
    sasl.mechanism.inter.broker.protocol, sasl.mechanism.controller.protocol); ConfigError
    when they are missing."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    options = parse_jaas_options(str(config.listener_value(listener, "sasl.jaas.config",
                                                          mechanism)), key)  # fmt: skip
    if not options.get("username") or not options.get("password"):
        raise ConfigError(
            f"{key}: listener {listener} uses SASL between nodes and needs this node's own "
            'username="..." password="..." options'
        )
    return options["username"], options["password"]


def sasl_settings(
    config: ListenerSecurity,
    listeners: Iterable[Listener],
    scram_credential: CredentialLookup | None,
) -> dict[str, SaslSettings]:
    """Listener name -> its SaslSettings, for those of `listeners` that use SASL; ConfigError
    (at start-up) for PLAIN without users, a JAAS text that is not one, or SCRAM where there
    are no credentials to check it with (`scram_credential` None: a controller listener, whose
    metadata log holds them, KIP-900)."""
    protocols = config.listener_security_protocol_map
    out = {}
    secret = os.urandom(32)
    for listener in listeners:
        if protocols.get(listener.name) not in SASL_PROTOCOLS:
            continue
        mechanisms = tuple(config.listener_value(listener.name, "sasl.enabled.mechanisms"))
        if not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms: listener {listener.name} needs one")
        if scram_credential is None and mechanisms != (PLAIN,):
            raise ConfigError(
                f"listener.name.{listener.name.lower()}.sasl.enabled.mechanisms: listener "
                f"{listener.name} is a controller listener: PLAIN only (SCRAM credentials live in "
                "the metadata log it replicates); got " + ",".join(mechanisms)
            )
        plain_users: dict[str, str] = {}
        if PLAIN in mechanisms:
            key = f"listener.name.{listener.name.lower()}.plain.sasl.jaas.config"
            text = config.listener_value(listener.name, "sasl.jaas.config", PLAIN)
            plain_users = parse_jaas_users(str(text), key)
            if not plain_users:
                raise ConfigError(
                    f"{key}: listener {listener.name} enables PLAIN but its JAAS config names "
                    'no user (user_<name>="<password>")'
                )
        lookup = scram_credential if scram_credential is not None else _no_credentials
        out[listener.name] = SaslSettings(mechanisms, plain_users, lookup, secret)
    return out


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What one listener's authenticator needs: its enabled mechanisms, the PLAIN users of its
    JAAS config and where SCRAM credentials are looked up."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(repr=False)
    scram_credential: CredentialLookup
    secret: bytes = field(default_factory=lambda: os.urandom(32), repr=False)
    """Keys the stand-in credential of unknown SCRAM users (one per process)."""

    def authenticator(self) -> SaslAuthenticator:
        return SaslAuthenticator(
            self.mechanisms, self.plain_users, self.scram_credential, self.secret
        )


class SaslAuthenticator:
    """One connection's exchange. Feed it the requests in order; `complete` and `principal`
    say when it is done and who the peer is; `closing` says the connection must end after the
    answer just given."""

    def __init__(
        self,
        mechanisms: Sequence[str],
        plain_users: Mapping[str, str],
        scram_credential: CredentialLookup,
        secret: bytes = b"",
    ) -> None:
        self.secret = secret
        self.mechanisms = tuple(mechanisms)
        self.plain_users = plain_users
        self.scram_credential = scram_credential
        self._state = _State.HANDSHAKE
        self._mechanism = ""
        self._scram: scramp.core.ScramServer | None = None
        self._scram_user = ""
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def closing(self) -> bool:
        return self._state is _State.FAILED

    def check_allowed(self, api_key: ApiKey) -> None:
        """SaslProtocolError when `api_key` may not come now."""
        if self._state is _State.HANDSHAKE and api_key in (
            ApiKey.API_VERSIONS,
            ApiKey.SASL_HANDSHAKE,
        ):
            return
        if self._state is _State.AUTHENTICATE and api_key is ApiKey.SASL_AUTHENTICATE:
            return
        raise SaslProtocolError(
            f"unexpected {api_key.name} request during SASL {self._state.value}"
        )

    def handshake(self, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
        self.check_allowed(ApiKey.SASL_HANDSHAKE)
        mechanism = request.mechanism.upper()
        if mechanism not in self.mechanisms:
            self._state = _State.FAILED
            return SaslHandshakeResponse(
                mechanisms=self.mechanisms,
                error_code=int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                error_message=f"Unsupported SASL mechanism {request.mechanism}",
            )
        self._mechanism = mechanism
        self._state = _State.AUTHENTICATE
        return SaslHandshakeResponse(mechanisms=self.mechanisms)

    def authenticate(self, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
        self.check_allowed(ApiKey.SASL_AUTHENTICATE)
        try:
            if self._mechanism == PLAIN:
                token = self._plain(request.auth_bytes)
            else:
                token = self._scram_step(request.auth_bytes)
        except _Refused as exc:
            self._state = _State.FAILED
            return SaslAuthenticateResponse(
                error_code=int(ErrorCode.SASL_AUTHENTICATION_FAILED), error_message=str(exc)
            )
        return SaslAuthenticateResponse(auth_bytes=token)

    def _invalid(self) -> _Refused:
        return _Refused(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self._mechanism}"
        )

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _Refused("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise _Refused("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise _Refused("Authentication failed: username and password must not be empty")
        if authzid and authzid != user:
            raise _Refused(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        expected = self.plain_users.get(user)
        # Compared even for an unknown user, so the time taken does not say which it is.
        good = hmac.compare_digest(password.encode(), (expected or "\0" + password).encode())
        if expected is None or not good:
            raise self._invalid()
        self._succeed(user)
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise _Refused("Invalid SCRAM message: not UTF-8") from None
        mechanism = ScramMechanism.from_name(self._mechanism)
        try:
            if self._scram is None:
                self._scram = scramp.ScramMechanism(self._mechanism).make_server(
                    lambda user: self._credential(mechanism, user)
                )
                self._scram.set_client_first(message)
                return self._scram.get_server_first().encode()
            self._scram.set_client_final(message)
            final = self._scram.get_server_final().encode()
        except scramp.ScramException:
            raise self._invalid() from None
        if not self._scram_user:
            raise self._invalid()  # a proof for a made-up credential (cannot happen)
        self._succeed(self._scram_user)
        return final

    def _credential(self, mechanism: ScramMechanism, user: str) -> tuple[bytes, bytes, bytes, int]:
        # RFC 5802 escapes ',' and '=' in the name (=2C, =3D); scramp hands it on escaped.
        user = user.replace("=2C", ",").replace("=3D", "=")
        credential = self.scram_credential(mechanism, user)
        if credential is None:
            # RFC 5802 section 5.1: an unknown user gets a made-up salt of a real one's length
            # (client.admin_users.SALT_BYTES) and the default count, the same every time in
            # this process, and fails at the proof, like a wrong password.
            salt = hmac.digest(self.secret, user.encode(), "sha256")[:FAKE_SALT_BYTES]
            key = hashlib.new(mechanism.hash_name, self.secret + salt).digest()
            return salt, key, key, DEFAULT_ITERATIONS
        self._scram_user = user
        return credential.auth_info()

    def _succeed(self, user: str) -> None:
        self._state = _State.COMPLETE
        self.principal = f"User:{user}"


class _Refused(Exception):
    """Authentication failed; the message goes to the client."""
