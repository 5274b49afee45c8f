"""A client's SASL authentication (librdkafka's and kcat's settings: `sasl.mechanism`,
`sasl.username`, `sasl.password`), run on each new connection of a SASL_PLAINTEXT or SASL_SSL
`security.protocol` before any other request: SaslHandshake, then the mechanism's
SaslAuthenticate round trips (PLAIN: one; SCRAM: two, the broker's signature checked too).

A refused mechanism or wrong credentials raise SaslAuthenticationError, which is not retried:
trying again cannot succeed, as Kafka's clients treat an AuthenticationException.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import scramp

from client.connection import BrokerConnection
from protocol.config_defs import ConfigDef, ConfigError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_SETTINGS = [
    ConfigDef("sasl.mechanism", "string", "SCRAM-SHA-256", "SASL mechanism on SASL_PLAINTEXT "
              "and SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
              choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
    ConfigDef("sasl.username", "string", "", "SASL user name"),
    ConfigDef("sasl.password", "password", "", "SASL password"),
]  # fmt: skip


class SaslAuthenticationError(KafkaError):
    """The broker refused this client's SASL mechanism or credentials."""


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str = field(repr=False)


def client_sasl(config: Mapping[str, Any]) -> SaslCredentials | None:
    """The credentials a client with these (parsed) settings authenticates with; None when
    its security.protocol has no SASL. ConfigError without a user name or password."""
    if config["security.protocol"] not in SASL_PROTOCOLS:
        return None
    username, password = str(config["sasl.username"]), str(config["sasl.password"])
    if not username or not password:
        raise ConfigError(
            f"sasl.username and sasl.password: required with security.protocol "
            f"{config['security.protocol']}"
        )
    return SaslCredentials(str(config["sasl.mechanism"]), username, password)


async def authenticate(conn: BrokerConnection, sasl: SaslCredentials) -> None:
    """Run the exchange on a new connection (its reader running); SaslAuthenticationError
    when the broker refuses."""
    handshake: SaslHandshakeResponse = await conn.request(
        SaslHandshakeRequest(mechanism=sasl.mechanism)
    )
    if handshake.error_code:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise SaslAuthenticationError(
            ErrorCode.from_wire(handshake.error_code),
            f"broker {conn.address} does not offer SASL mechanism {sasl.mechanism} "
            f"(it offers {offered})",
        )
    if sasl.mechanism == "PLAIN":
        await _step(conn, f"\0{sasl.username}\0{sasl.password}".encode())
        return
    try:
        client = scramp.ScramClient([sasl.mechanism], sasl.username, sasl.password)
        server_first = await _step(conn, client.get_client_first().encode())
        client.set_server_first(server_first.decode())
        server_final = await _step(conn, client.get_client_final().encode())
        client.set_server_final(server_final.decode())
    except (scramp.ScramException, UnicodeDecodeError) as exc:
        raise SaslAuthenticationError(
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            f"broker {conn.address} failed the SCRAM exchange: {exc}",
        ) from None


async def _step(conn: BrokerConnection, token: bytes) -> bytes:
    response: SaslAuthenticateResponse = await conn.request(
        SaslAuthenticateRequest(auth_bytes=token)
    )
    if response.error_code:
        code = ErrorCode.from_wire(response.error_code)
        raise SaslAuthenticationError(
            code, f"broker {conn.address}: {response.error_message or code.name}"
        )
    return response.auth_bytes
