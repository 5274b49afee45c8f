"""The SSLContexts of a broker's TLS listeners (Kafka's ssl.* keys, PEM files only).

`server_contexts(config)` maps each listener whose security protocol is SSL to one context:
the keystore (`ssl.keystore.location`: private key and certificate chain, `ssl.key.password`
when the key is encrypted), TLS 1.2 at least, and client certificates as `ssl.client.auth`
says (none, requested, required: checked against `ssl.truststore.location`, or the system's CAs).
A file that cannot be read or does not hold what it should is a ConfigError naming the key
and the file, at start-up, not at the first connection.

`principal_of(ssl_object)` is Kafka's default SSL principal: `User:` and the client
certificate's distinguished name (RFC 2253 order), `User:ANONYMOUS` without one.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from broker.config import TLS_PROTOCOLS, Listener, ListenerSecurity
from protocol.config_defs import ConfigError

ANONYMOUS = "User:ANONYMOUS"
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_contexts(
    config: ListenerSecurity, listeners: Iterable[Listener]
) -> dict[str, ssl.SSLContext]:
    """Listener name -> its server SSLContext, for those of `listeners` that use TLS. Each
    listener reads the ssl.* keys with Kafka's `listener.name.<listener>.` overrides; on a
    SASL_SSL listener only the overridden `ssl.client.auth` counts (KIP-684: the clients there
    prove themselves with SASL), so mTLS on the inter-broker listener does not ask every
    client for a certificate."""
    protocols = config.listener_security_protocol_map
    made: dict[tuple[str, str | None, str | None, str], ssl.SSLContext] = {}
    out = {}
    for listener in listeners:
        protocol = protocols.get(listener.name)
        if protocol not in TLS_PROTOCOLS:
            continue
        name = listener.name
        client_auth = str(config.listener_value(name, "ssl.client.auth"))
        if protocol == "SASL_SSL":
            client_auth = str(_overridden(config, name, "ssl.client.auth") or "none")
        key = (
            str(config.listener_value(name, "ssl.keystore.location")),
            str(config.listener_value(name, "ssl.key.password")) or None,
            str(config.listener_value(name, "ssl.truststore.location")) or None,
            client_auth,
        )
        if key not in made:
            made[key] = server_context(
                keystore=key[0], key_password=key[1], truststore=key[2], client_auth=key[3]
            )
        out[name] = made[key]
    return out


def _overridden(config: ListenerSecurity, listener: str, key: str) -> object | None:
    """The `listener.name.<listener>.<key>` value, None when not set."""
    try:
        return config[f"listener.name.{listener.lower()}.{key}"]
    except (KeyError, ConfigError):
        return None


def peer_client_context(config: ListenerSecurity, listener: str) -> ssl.SSLContext | None:
    """The context this node dials `listener` of its peers with (inter-broker, controller),
    None when it has no TLS: peers' certificates checked against `ssl.truststore.location`
    (the system's CAs when empty) and, with `ssl.endpoint.identification.algorithm=https`,
    for the host dialled; this node's keystore offered for `ssl.client.auth`."""
    if config.listener_security_protocol_map.get(listener) not in TLS_PROTOCOLS:
        return None
    truststore = str(config.listener_value(listener, "ssl.truststore.location")) or None
    try:
        context = ssl.create_default_context(cafile=truststore)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"ssl.truststore.location: cannot load CA certificates from {truststore}: "
            f"{_reason(exc)}"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = config["ssl.endpoint.identification.algorithm"] == "https"
    keystore = str(config.listener_value(listener, "ssl.keystore.location"))
    password = str(config.listener_value(listener, "ssl.key.password")) or None
    try:
        context.load_cert_chain(keystore, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"ssl.keystore.location: cannot load a private key and certificate chain from "
            f"{keystore}: {_reason(exc)}"
        ) from None
    return context


def server_context(
    *, keystore: str, key_password: str | None, truststore: str | None, client_auth: str
) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(keystore, password=key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"ssl.keystore.location: cannot load a private key and certificate chain from "
            f"{keystore}: {_reason(exc)}"
        ) from None
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none":
        try:
            if truststore:
                context.load_verify_locations(cafile=truststore)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl.truststore.location: cannot load CA certificates from {truststore}: "
                f"{_reason(exc)}"
            ) from None
    return context


_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def principal_of(cert: Mapping[str, Any] | None) -> str:
    """`User:<DN>` of the peer's verified certificate (`SSLObject.getpeercert()`), in RFC 2253
    form as Java's X500Principal gives it (most specific RDN first, multi-valued RDNs joined
    with `+`, special characters escaped, so that `CN=admin\\,O=x` cannot pass for
    `CN=admin,O=x`); `User:ANONYMOUS` without one."""
    if not cert or "subject" not in cert:
        return ANONYMOUS
    rdns = [
        "+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(str(v))}" for k, v in rdn)
        for rdn in reversed(cert["subject"])
    ]
    return "User:" + ",".join(rdns)


def _escape(value: str) -> str:
    """RFC 2253 section 2.4: `,+"\\<>;` escaped, and a leading `#` or space, a trailing space."""
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
