"""A client's TLS: the SSLContext its `security.protocol` and `ssl.*` settings ask for
(librdkafka's names, as kcat takes them: `ssl.ca.location`, `ssl.certificate.location`,
`ssl.key.location`, `ssl.key.password`, `ssl.endpoint.identification.algorithm`).

Hostname verification is on by default (`https`, Kafka's default since 2.0): the broker's
certificate must name the host the client dialled. A file that cannot be loaded is a
ConfigError naming the setting and the file, raised when the client is made.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from protocol.config_defs import ConfigDef, ConfigError

TLS_SETTINGS = [
    ConfigDef("security.protocol", "string", "PLAINTEXT", "how to talk to the brokers: "
              "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
              choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigDef("ssl.ca.location", "string", "", "PEM file of the CA certificates the brokers' "
              "certificates are checked against (empty: the system's)"),
    ConfigDef("ssl.certificate.location", "string", "", "PEM file of this client's certificate "
              "chain, for brokers that ask for one (ssl.client.auth)"),
    ConfigDef("ssl.key.location", "string", "", "PEM file of this client's private key (empty: "
              "in ssl.certificate.location)"),
    ConfigDef("ssl.key.password", "password", "", "password of the private key"),
    ConfigDef("ssl.endpoint.identification.algorithm", "string", "https", "https: the broker's "
              "certificate must name the host dialled; none: any name (not recommended)",
              choices=("https", "none")),
]  # fmt: skip


def client_context(config: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The SSLContext of a client with these (parsed) settings; None without TLS."""
    if config["security.protocol"] not in ("SSL", "SASL_SSL"):
        return None
    ca = str(config["ssl.ca.location"]) or None
    try:
        context = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"ssl.ca.location: cannot load CA certificates from {ca}: {exc}"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = config["ssl.endpoint.identification.algorithm"] == "https"
    if not context.check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED  # the chain is still checked
    certificate = str(config["ssl.certificate.location"])
    if certificate:
        key = str(config["ssl.key.location"]) or None
        try:
            context.load_cert_chain(certificate, key, str(config["ssl.key.password"]) or None)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl.certificate.location: cannot load a certificate and key from "
                f"{certificate}{f' and {key}' if key else ''}: {exc}"
            ) from None
    return context
