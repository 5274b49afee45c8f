"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka keeps them: mechanisms, the keys derived
from a salted password, and the text form ZooKeeper stores under /config/users.

Pure functions over hashlib; the SCRAM exchange itself is scramp's (broker.sasl, client.sasl).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from enum import IntEnum

from scramp.utils import saslprep

MIN_ITERATIONS = 4096
"""Kafka's ScramMechanism.minIterations: fewer is refused (UNACCEPTABLE_CREDENTIAL)."""
MAX_ITERATIONS = 16384
"""Kafka's cap on an upsertion's iteration count."""
MIN_SALT_BYTES = 12
"""Shorter salts are refused (scramp's clients do not accept them)."""
DEFAULT_ITERATIONS = 4096
"""What `trioka user create` salts with unless told."""


class ScramMechanism(IntEnum):
    """Kafka's ScramMechanism ids (AlterUserScramCredentials, UserScramCredentialRecord)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name: SCRAM-SHA-256."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """SCRAM-SHA-256 -> SCRAM_SHA_256; UNKNOWN for anything else."""
        for mechanism in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if mechanism.mechanism_name == name.upper():
                return mechanism
        return cls.UNKNOWN


SCRAM_MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)


class CredentialFormatError(ValueError):
    """A stored credential's text that is not `salt=..,stored_key=..,server_key=..,
    iterations=..`; says what is wrong (never the keys)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism: never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString (the /config/users value)."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(part.partition("=")[::2] for part in text.split(","))
        missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
        if missing:
            raise CredentialFormatError(f"credential lacks {', '.join(sorted(missing))}")
        try:
            return cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except (binascii.Error, ValueError) as exc:
            raise CredentialFormatError(f"credential is not base64 and a count: {exc}") from None

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """The tuple scramp's server asks its auth function for."""
        return self.salt, self.stored_key, self.server_key, self.iterations


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802's Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC, the
    password SASLprep'd as the SCRAM client (scramp) does, so that any password a user is
    created with can log in (Kafka's Java client skips SASLprep; trioka speaks only to its
    own clients)."""
    normalized = saslprep(password).encode()
    return hashlib.pbkdf2_hmac(mechanism.hash_name, normalized, salt, iterations)


def credential_from_salted(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored and server keys of RFC 5802 section 3, from a salted password."""
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(mechanism.hash_name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", mechanism.hash_name),
        iterations=iterations,
    )
