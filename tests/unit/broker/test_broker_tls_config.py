"""broker.tls: the SSL listeners' contexts from Kafka's ssl.* keys, and the principal of a
client certificate (Kafka's default: User: and the DN)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from broker.config import BrokerConfig
from broker.tls import ANONYMOUS, principal_of, server_contexts
from protocol.config_defs import ConfigError


def config(tmp_path: Path, **values: object) -> BrokerConfig:
    return BrokerConfig.from_values(
        {
            "node.id": 1,
            "log.dirs": [str(tmp_path / "logs")],
            "listeners": ["PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"],
            "listener.security.protocol.map": ["PLAINTEXT:PLAINTEXT", "SSL:SSL"],
            **values,
        }
    )


def contexts_of(config):  # type: ignore[no-untyped-def]
    return server_contexts(config, config.broker_listeners)


def test_only_the_ssl_listeners_get_a_context(tmp_path: Path) -> None:
    ca = trustme.CA()
    keystore = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    truststore = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(truststore))
    contexts = contexts_of(
        config(
            tmp_path,
            **{
                "ssl.keystore.location": str(keystore),
                "ssl.client.auth": "required",
                "ssl.truststore.location": str(truststore),
            },
        )
    )
    assert list(contexts) == ["SSL"]
    assert contexts["SSL"].verify_mode == ssl.CERT_REQUIRED
    assert contexts["SSL"].minimum_version == ssl.TLSVersion.TLSv1_2


def test_unreadable_files_name_the_key_and_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(ConfigError, match=f"ssl.keystore.location: .*{missing}"):
        contexts_of(config(tmp_path, **{"ssl.keystore.location": str(missing)}))
    ca = trustme.CA()
    keystore = tmp_path / "server.pem"
    ca.issue_cert("h").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    bad = tmp_path / "bad-ca.pem"
    bad.write_text("garbage")
    with pytest.raises(ConfigError, match=f"ssl.truststore.location: .*{bad}"):
        contexts_of(
            config(
                tmp_path,
                **{
                    "ssl.keystore.location": str(keystore),
                    "ssl.client.auth": "requested",
                    "ssl.truststore.location": str(bad),
                },
            )
        )


def test_the_principal_is_the_certificates_distinguished_name() -> None:
    cert = {
        "subject": (
            (("countryName", "FR"),),
            (("organizationName", "trioka"),),
            (("commonName", "alice"),),
        )
    }
    assert principal_of(cert) == "User:CN=alice,O=trioka,C=FR"
    assert principal_of({}) == ANONYMOUS and principal_of(None) == ANONYMOUS


def test_a_crafted_common_name_cannot_pass_for_another_principal() -> None:
    """RFC 2253 escaping (a review: CN="admin,O=corp" gave the principal of CN=admin,O=corp,
    which super.users would have trusted) and `+` between the parts of one RDN."""
    crafted = {"subject": ((("organizationName", "x"),), (("commonName", "admin,O=corp"),))}
    assert principal_of(crafted) == "User:CN=admin\\,O=corp,O=x"
    multi = {"subject": ((("commonName", "a"), ("userId", "7")),)}
    assert principal_of(multi) == "User:CN=a+UID=7"
    assert principal_of({"subject": ((("commonName", " #x "),),)}) == "User:CN=\\ #x\\ "


def test_client_auth_per_listener_and_never_unprefixed_on_sasl_ssl(tmp_path: Path) -> None:
    """mTLS on the inter-broker listener must not ask every client for a certificate (KIP-684:
    the unprefixed ssl.client.auth does not apply to SASL_SSL listeners)."""
    ca = trustme.CA()
    keystore = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    truststore = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(truststore))
    made = config(
        tmp_path,
        **{
            "listeners": ["INTERNAL://127.0.0.1:0", "CLIENTS://127.0.0.1:0",
                          "PUBLIC://127.0.0.1:0"],
            "listener.security.protocol.map": ["INTERNAL:SSL", "CLIENTS:SASL_SSL", "PUBLIC:SSL"],
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": 'x.PlainLoginModule required user_a="b";',
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(truststore),
            "ssl.client.auth": "required",
            "listener.name.public.ssl.client.auth": "none",
        },
    )  # fmt: skip
    contexts = contexts_of(made)
    assert contexts["INTERNAL"].verify_mode == ssl.CERT_REQUIRED
    assert contexts["CLIENTS"].verify_mode == ssl.CERT_NONE
    assert contexts["PUBLIC"].verify_mode == ssl.CERT_NONE


def test_a_config_file_takes_per_listener_keys(tmp_path: Path) -> None:
    """`listener.name.<l>.ssl.client.auth` in a broker.toml, as on the command line (the file
    loader asked only for plain keys, so `cluster up --secure` could not start)."""
    from deploy.node.config import load_broker_config

    path = tmp_path / "broker.toml"
    path.write_text('"listener.name.internal.ssl.client.auth" = "required"\n')
    config = load_broker_config(path)
    assert config["listener.name.internal.ssl.client.auth"] == "required"
    path.write_text('"listener.name.internal.no.such.key" = "x"\n')
    with pytest.raises(ConfigError, match="unknown broker config"):
        load_broker_config(path)
