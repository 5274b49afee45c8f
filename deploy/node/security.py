"""How this node proves itself when it dials its peers' inter-broker listener or the
controllers' listener: TLS with its own keystore (mTLS) and SASL with its JAAS
`username`/`password`, as the listener's security protocol asks (Kafka's inter-broker and
controller client settings)."""

from __future__ import annotations

from broker.config import SASL_PROTOCOLS, BrokerConfig, ListenerSecurity
from broker.sasl import peer_credentials
from broker.tls import peer_client_context
from client.sasl import SaslCredentials
from client.security import PLAINTEXT, ClientSecurity


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """ConfigError (at start-up) when the listener needs credentials this node lacks."""
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    return _security(config, config.inter_broker_listener_name, mechanism)


def controller_security(config: ListenerSecurity, controller_listener: str) -> ClientSecurity:
    """What a broker or controller dials the controllers' listener with (Raft voters, broker
    registration and heartbeats, forwarded requests)."""
    mechanism = str(config["sasl.mechanism.controller.protocol"])
    return _security(config, controller_listener, mechanism)


def _security(config: ListenerSecurity, listener: str, mechanism: str) -> ClientSecurity:
    protocol = config.listener_security_protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    sasl = None
    if protocol in SASL_PROTOCOLS:
        user, password = peer_credentials(config, listener, mechanism)
        sasl = SaslCredentials(mechanism, user, password)
    return ClientSecurity(peer_client_context(config, listener), sasl)
