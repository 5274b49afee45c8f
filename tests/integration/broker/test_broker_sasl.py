"""SASL listeners on a real broker process: SCRAM-SHA-256/512 users made with
AlterUserScramCredentials (salted by the client, kept as keys by the broker) and PLAIN users
of the listener's JAAS config produce and consume; a wrong password, an unknown user and an
unoffered mechanism are refused with one line that does not say whether the user exists; a
client that skips authentication is cut off; the broker stays up for the next client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from client import Consumer, KafkaError, Producer, TopicPartition
from client.admin import Admin
from client.admin_users import upsertion
from client.sasl import SaslAuthenticationError
from protocol.errors import ErrorCode
from protocol.messages.sasl import SaslHandshakeRequest
from protocol.scram import ScramMechanism
from tests.integration.broker.test_broker_tls import write
from tests.support.broker_process import BrokerProcess, BrokerStartError

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


def sasl_broker(broker_factory, protocol: str = "SASL_PLAINTEXT", **extra: str) -> tuple[
    BrokerProcess, str
]:  # fmt: skip
    """A broker with a PLAINTEXT listener (inter-broker, admin) and a SASL one; (broker, the
    SASL listener's address)."""
    broker: BrokerProcess = broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CLIENTS:{protocol}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.clients.plain.sasl.jaas.config": JAAS,
            **extra,
        }
    )
    (listening,) = [
        e for e in broker.events(since_start=True)
        if e.get("event") == "broker listening" and e.get("listener") == "CLIENTS"
    ]  # fmt: skip
    return broker, f"127.0.0.1:{listening['port']}"


def sasl(mechanism: str, user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
        **extra,
    }


async def add_users(bootstrap: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.alter_user_scram_credentials(
            upsertions=[
                upsertion("alice", "alice-secret", ScramMechanism.SCRAM_SHA_256),
                upsertion("bob", "bob-secret", ScramMechanism.SCRAM_SHA_512, iterations=8192),
            ]
        )


async def round_trip(address: str, config: dict[str, Any], topic: str) -> None:
    async with Admin(bootstrap_servers=address, **config) as admin:
        await admin.create_topic(topic, 1, 1)
    async with Producer(bootstrap_servers=address, acks="all", **config) as p:
        for i in range(10):
            await p.send_and_wait(topic, b"v%d" % i, partition=0)
    got: list[bytes | None] = []
    async with Consumer(bootstrap_servers=address, auto_offset_reset="earliest", **config) as c:
        c.assign([TopicPartition(topic, 0)])
        with trio.fail_after(20):
            while len(got) < 10:
                got += [r.value for r in await c.poll(200)]
    assert got == [b"v%d" % i for i in range(10)]


async def refused(address: str, config: dict[str, Any]) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        async with Admin(bootstrap_servers=address, default_api_timeout_ms=5000, **config) as a:
            await a.list_topics()
    assert "\n" not in str(info.value)
    return info.value


async def test_scram_and_plain_users_produce_and_consume(broker_factory) -> None:
    broker, address = sasl_broker(broker_factory)
    await add_users(broker.bootstrap)
    await round_trip(address, sasl("SCRAM-SHA-256", "alice", "alice-secret"), "a")
    await round_trip(address, sasl("SCRAM-SHA-512", "bob", "bob-secret"), "b")
    await round_trip(address, sasl("PLAIN", "admin", "admin-secret"), "c")


async def test_wrong_credentials_are_refused_alike(broker_factory) -> None:
    broker, address = sasl_broker(broker_factory)
    await add_users(broker.bootstrap)
    wrong = await refused(address, sasl("SCRAM-SHA-256", "alice", "nope"))
    unknown = await refused(address, sasl("SCRAM-SHA-256", "mallory", "nope"))
    assert isinstance(wrong, SaslAuthenticationError)
    assert wrong.code is unknown.code is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in wrong.message
    # The same words for a user that does not exist, but for the address.
    assert wrong.message == unknown.message
    # bob has no SCRAM-SHA-256 credential, only a SHA-512 one.
    assert (await refused(address, sasl("SCRAM-SHA-256", "bob", "bob-secret"))).code is (
        ErrorCode.SASL_AUTHENTICATION_FAILED
    )
    plain = await refused(address, sasl("PLAIN", "admin", "wrong"))
    assert plain.code is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert broker.wait_for_event("SASL authentication failed, closing connection")
    assert broker.running
    await round_trip(address, sasl("SCRAM-SHA-256", "alice", "alice-secret"), "after")


async def test_an_unoffered_mechanism_and_skipped_authentication_are_refused(
    broker_factory,
) -> None:
    broker, address = sasl_broker(broker_factory, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    await add_users(broker.bootstrap)
    error = await refused(address, sasl("SCRAM-SHA-256", "alice", "alice-secret"))
    assert error.code is ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "offers SCRAM-SHA-512" in error.message
    # A client that sends Metadata straight away is cut off unanswered.
    with pytest.raises(KafkaError):
        async with Admin(bootstrap_servers=address, default_api_timeout_ms=3000) as admin:
            await admin.list_topics()
    assert broker.wait_for_event("refused before SASL authentication, closing connection")
    # SaslHandshake on a listener without SASL: ILLEGAL_SASL_STATE, nothing else.
    with pytest.raises(KafkaError) as info:
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            await admin._call(SaslHandshakeRequest(mechanism="PLAIN"))
    assert info.value.code is ErrorCode.ILLEGAL_SASL_STATE
    assert broker.running


async def test_a_large_frame_before_authentication_is_refused(broker_factory) -> None:
    """sasl.server.max.receive.size (Kafka's fix for CVE-2022-34917): before, a client that had
    not logged in could make the broker buffer and decode a 100 MB frame."""
    broker, address = sasl_broker(broker_factory)
    host, port = address.split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all((600_000).to_bytes(4, "big") + b"\0" * 1000)
        with trio.fail_after(10):
            while await stream.receive_some(65536):
                pass  # the broker closes the connection
    event = broker.wait_for_event("request too large, closing connection")
    assert event["limit"] == 524288
    assert broker.running


async def test_scram_over_sasl_ssl(broker_factory, tmp_path: Path) -> None:
    ca = trustme.CA()
    keystore = write(
        tmp_path, "broker.pem", ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem
    )
    broker, address = sasl_broker(broker_factory, "SASL_SSL", **{"ssl.keystore.location": keystore})
    await add_users(broker.bootstrap)
    ca_path = write(tmp_path, "ca.pem", ca.cert_pem)
    config = sasl("SCRAM-SHA-512", "bob", "bob-secret", security_protocol="SASL_SSL",
                  ssl_ca_location=ca_path)  # fmt: skip
    await round_trip(address, config, "tls")
    assert (await refused(address, {**config, "sasl_password": "x"})).code is (
        ErrorCode.SASL_AUTHENTICATION_FAILED
    )


def test_plain_without_jaas_users_does_not_start(broker_factory) -> None:
    broker = broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
        },
        start=False,
    )
    with pytest.raises(BrokerStartError):
        broker.start()
    errors = [line for line in broker.log_tail(50).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "plain.sasl.jaas.config" in errors[0], broker.log_tail(50)
