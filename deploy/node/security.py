"""How this node proves itself when it dials its peers' inter-broker listener: TLS with its own
keystore (mTLS) and SASL with its JAAS `username`/`password`, as the listener's security
protocol asks (Kafka's inter-broker client settings)."""

from __future__ import annotations

from broker.config import SASL_PROTOCOLS, BrokerConfig
from broker.sasl import peer_credentials
from broker.tls import peer_client_context
from client.sasl import SaslCredentials
from client.security import PLAINTEXT, ClientSecurity


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """ConfigError (at start-up) when the listener needs credentials this node lacks."""
    listener = config.inter_broker_listener_name
    protocol = config.listener_security_protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    sasl = None
    if protocol in SASL_PROTOCOLS:
        mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
        user, password = peer_credentials(config, listener, mechanism)
        sasl = SaslCredentials(mechanism, user, password)
    return ClientSecurity(peer_client_context(config, listener), sasl)
