"""A development CA for clusters with TLS everywhere (`trioka cluster up --secure`, the compose
`secure` variant): one CA and one certificate per node or client, as PEM files.

    ca = DevCA.load_or_create(tls_dir)                 # ca.pem, ca-key.pem (0600)
    keystore = ca.issue("broker-1", ["127.0.0.1", "localhost", "broker-1"])  # broker-1.pem
    python -m deploy.cluster.dev_ca DIR NAME[:HOST,HOST...]...   # the same from a shell

Each identity is one PEM file holding its private key and its certificate: Kafka's PEM
keystore (`ssl.keystore.location`) for a node, `ssl.certificate.location` for a client. A
certificate's subject is `CN=<name>` only, so its principal on an SSL listener is
`User:CN=<name>` (broker.tls's RFC 2253 form); its subjectAltNames are the hosts given (IP
addresses as IP entries), which is what clients' hostname verification checks. Keys are ECDSA
P-256; certificates last 825 days (what browsers accept for leaf certificates). Re-running
keeps the CA and every existing certificate, so a restarted cluster keeps its trust.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=825)
CA_FILE = "ca.pem"
CA_KEY_FILE = "ca-key.pem"


_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for host in hosts:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


@dataclass(frozen=True)
class DevCA:
    dir: Path
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def ca_file(self) -> Path:
        return self.dir / CA_FILE

    @classmethod
    def load_or_create(cls, directory: Path) -> DevCA:
        directory.mkdir(parents=True, exist_ok=True)
        cert_file, key_file = directory / CA_FILE, directory / CA_KEY_FILE
        if cert_file.exists() and key_file.exists():
            key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
            assert isinstance(key, ec.EllipticCurvePrivateKey), f"{key_file}: not an EC key"
            return cls(directory, key, x509.load_pem_x509_certificate(cert_file.read_bytes()))
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name("trioka dev CA"))
            .issuer_name(_name("trioka dev CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_CA_KEY_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        _write_private(key_file, _key_pem(key))
        cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return cls(directory, key, certificate)

    def issue(self, name: str, hosts: Sequence[str] = ()) -> Path:
        """`<name>.pem` in the CA's directory, key and certificate (kept when it exists):
        subject CN=<name>, for servers and clients alike."""
        keystore = self.dir / f"{name}.pem"
        if keystore.exists():
            return keystore
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        _write_private(
            keystore, _key_pem(key) + certificate.public_bytes(serialization.Encoding.PEM)
        )
        return keystore


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m deploy.cluster.dev_ca DIR NAME[:HOST,HOST...]...", file=sys.stderr)
        return 2
    ca = DevCA.load_or_create(Path(argv[0]))
    for item in argv[1:]:
        name, _, hosts = item.partition(":")
        ca.issue(name, [h for h in hosts.split(",") if h])
    print(ca.ca_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
