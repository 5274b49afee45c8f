"""How a connection proves itself to a broker: TLS (client.tls) and SASL (client.sasl) as one
value, for clients and for the brokers' and controllers' own connections (deploy.node)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from client.connection import BrokerConnection
from client.sasl import SaslCredentials, authenticate, client_sasl
from client.tls import client_context


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    tls: ssl.SSLContext | None = None
    """TLS with this context (SSL, SASL_SSL); None: none."""
    sasl: SaslCredentials | None = None
    """SASL with these credentials once connected (SASL_PLAINTEXT, SASL_SSL); None: none."""

    async def authenticate(self, conn: BrokerConnection) -> None:
        """The SASL exchange on a new connection whose reader runs; the connection is closed
        when it fails (SaslAuthenticationError, or whatever broke it)."""
        if self.sasl is None:
            return
        try:
            await authenticate(conn, self.sasl)
        except BaseException:
            with trio.CancelScope(shield=True):
                await conn.aclose()
            raise


PLAINTEXT = ClientSecurity()


def client_security(config: Mapping[str, Any]) -> ClientSecurity:
    """What a client's (parsed) `security.protocol`, `ssl.*` and `sasl.*` settings ask for."""
    return ClientSecurity(client_context(config), client_sasl(config))
