"""SSL listeners on a real broker process, with certificates from a test CA (trustme): clients
that trust the CA produce and consume over TLS; a wrong CA, a certificate for another host, an
expired certificate and a missing client certificate (ssl.client.auth=required) are each
refused with a one-line reason, and the broker stays up for the next client."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from client import Consumer, KafkaError, Producer, TopicPartition
from client.admin import Admin
from tests.integration.cli.test_cli_commands import one_error_line, trioka
from tests.support.broker_process import BrokerProcess, BrokerStartError

LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def write(tmp_path: Path, name: str, blob: Any) -> str:
    path = tmp_path / name
    blob.write_to_path(str(path))
    return str(path)


def tls_broker(
    broker_factory, tmp_path: Path, ca: trustme.CA, leaf: Any, **extra: str
) -> tuple[BrokerProcess, str]:
    """A broker with a PLAINTEXT and an SSL listener; (broker, the SSL listener's address)."""
    keystore = write(tmp_path, "broker.pem", leaf.private_key_and_cert_chain_pem)
    broker: BrokerProcess = broker_factory(
        {
            "listeners": LISTENERS,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.location": keystore,
            **extra,
        }
    )
    (ssl_listener,) = [
        e for e in broker.events(since_start=True)
        if e.get("event") == "broker listening" and e.get("listener") == "SSL"
    ]  # fmt: skip
    return broker, f"127.0.0.1:{ssl_listener['port']}"


def ssl_client(ca_path: str, **extra: Any) -> dict[str, Any]:
    return {"security_protocol": "SSL", "ssl_ca_location": ca_path, **extra}


async def test_clients_that_trust_the_ca_produce_and_consume_over_tls(
    broker_factory, tmp_path: Path, ca: trustme.CA
) -> None:
    broker, address = tls_broker(broker_factory, tmp_path, ca, ca.issue_cert("127.0.0.1"))
    ca_path = write(tmp_path, "ca.pem", ca.cert_pem)
    async with Admin(bootstrap_servers=address, **ssl_client(ca_path)) as admin:
        await admin.create_topic("secret", 1, 1)
    async with Producer(bootstrap_servers=address, acks="all", **ssl_client(ca_path)) as p:
        for i in range(20):
            await p.send_and_wait("secret", b"s%d" % i, partition=0)
    tp = TopicPartition("secret", 0)
    got: list[bytes | None] = []
    async with Consumer(
        bootstrap_servers=address, auto_offset_reset="earliest", **ssl_client(ca_path)
    ) as c:
        c.assign([tp])
        with trio.fail_after(20):
            while len(got) < 20:
                got += [r.value for r in await c.poll(200)]
    assert got == [b"s%d" % i for i in range(20)]
    # A plaintext client on the SSL port gets nowhere, and the broker goes on.
    with pytest.raises(KafkaError):
        async with Admin(bootstrap_servers=address, request_timeout_ms=2000,
                         default_api_timeout_ms=3000) as admin:  # fmt: skip
            await admin.list_topics()
    assert broker.wait_for_event("TLS handshake failed")
    assert broker.running


async def refused(address: str, config: dict[str, Any]) -> str:
    """The error a client with `config` gets; the reason must be in one line."""
    with pytest.raises(KafkaError) as info:
        async with Admin(bootstrap_servers=address, default_api_timeout_ms=4000, **config) as admin:
            await admin.list_topics()
    message = str(info.value)
    assert "\n" not in message
    return message


async def test_a_certificate_the_client_cannot_trust_is_refused(
    broker_factory, tmp_path: Path, ca: trustme.CA
) -> None:
    expired = ca.issue_cert(
        "127.0.0.1", not_after=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    )
    broker, address = tls_broker(broker_factory, tmp_path, ca, expired)
    ca_path = write(tmp_path, "ca.pem", ca.cert_pem)
    assert "certificate has expired" in await refused(address, ssl_client(ca_path))
    other_ca = write(tmp_path, "other.pem", trustme.CA().cert_pem)
    assert "certificate verify failed" in await refused(address, ssl_client(other_ca))
    assert broker.running


async def test_a_certificate_for_another_host_is_refused_unless_told(
    broker_factory, tmp_path: Path, ca: trustme.CA
) -> None:
    broker, address = tls_broker(broker_factory, tmp_path, ca, ca.issue_cert("kafka.example"))
    ca_path = write(tmp_path, "ca.pem", ca.cert_pem)
    assert "mismatch" in await refused(address, ssl_client(ca_path))
    # ssl.endpoint.identification.algorithm=none: the chain is still checked, not the name.
    anyname = ssl_client(ca_path, ssl_endpoint_identification_algorithm="none")
    async with Admin(bootstrap_servers=address, **anyname) as admin:
        assert await admin.list_topics() == []
    assert broker.running


async def test_required_client_certificates(broker_factory, tmp_path: Path, ca: trustme.CA) -> None:
    truststore = write(tmp_path, "ca.pem", ca.cert_pem)
    broker, address = tls_broker(
        broker_factory,
        tmp_path,
        ca,
        ca.issue_cert("127.0.0.1"),
        **{"ssl.client.auth": "required", "ssl.truststore.location": truststore},
    )
    await refused(address, ssl_client(truststore))  # no client certificate
    client = ca.issue_cert("alice@example.org", common_name="alice")
    chain = write(tmp_path, "alice.pem", client.private_key_and_cert_chain_pem)
    async with Admin(
        bootstrap_servers=address, **ssl_client(truststore, ssl_certificate_location=chain)
    ) as admin:
        assert await admin.list_topics() == []
    assert broker.running


def test_a_keystore_that_cannot_be_read_stops_the_start(broker_factory, tmp_path: Path) -> None:
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    broker: BrokerProcess = broker_factory(
        {
            "listeners": LISTENERS,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.location": str(tmp_path / "garbage.pem"),
        },
        start=False,
    )
    with pytest.raises(BrokerStartError):
        broker.start()
    errors = [line for line in broker.log_tail(50).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ssl.keystore.location" in errors[0], broker.log_tail(50)
    assert str(tmp_path / "garbage.pem") in errors[0]


def test_the_cli_produces_and_consumes_over_tls(
    broker_factory, tmp_path: Path, ca: trustme.CA
) -> None:
    """kcat's way: `-X security.protocol=SSL -X ssl.ca.location=...` on every command. Before,
    produce and consume looked the topic up with an Admin that left the ssl.* settings out
    ("broker closed the connection")."""
    broker, address = tls_broker(broker_factory, tmp_path, ca, ca.issue_cert("127.0.0.1"))
    ca_path = write(tmp_path, "ca.pem", ca.cert_pem)
    tls = ["-b", address, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca_path}"]
    assert trioka("topic", "create", "orders", *tls).returncode == 0
    produced = trioka("produce", "orders", *tls, stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = trioka("consume", "orders", *tls, "--from-beginning", "--timeout-ms", "3000")
    assert consumed.stdout.decode().splitlines() == ["a", "b"], consumed.stderr.decode()
    untrusted = trioka("consume", "orders", "-b", address, "-X", "security.protocol=SSL")
    assert "certificate verify failed" in one_error_line(untrusted)
    assert broker.running
