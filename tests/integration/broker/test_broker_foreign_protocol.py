"""A real broker facing clients of other protocols on its port: a Kafka client (its real
ApiVersions v3 request bytes), an HTTP GET, a TLS ClientHello. Each gets one warning in the
broker's log saying what the peer speaks and what the port speaks, the answer it understands
(Kafka's UNSUPPORTED_VERSION ApiVersions response, an HTTP 400), and a closed connection
instead of a hang; trioka's own clients are served as before."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.wire import api_versions_blocking

WARNING = "peer speaks another protocol; this port speaks trioka's msgpack protocol"


def kafka_api_versions_request(correlation_id: int, version: int = 3) -> bytes:
    """The bytes Kafka's Java AdminClient 3.7 opens a connection with: request header v2
    (int16 api_key 18, int16 api_version, int32 correlation_id, int16-length client id, no
    tagged fields), body v3 (compact strings client_software_name and _version, no tagged
    fields); header v1 and an empty body at version 0."""
    client = b"adminclient-1"
    header = struct.pack(">hhih", 18, version, correlation_id, len(client)) + client
    if version >= 3:
        header += b"\x00"
        body = b"\x12apache-kafka-java" + b"\x063.7.0" + b"\x00"
    else:
        body = b""
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def exchange(broker: BrokerProcess, sends: list[bytes], *, read_between: bool = True) -> bytes:
    """Send each chunk (reading the answer to each but the last when `read_between`), then read
    until the broker closes; everything it sent."""
    received = b""
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        for i, data in enumerate(sends):
            sock.sendall(data)
            if read_between and i < len(sends) - 1:
                received += sock.recv(1 << 16)
        while chunk := sock.recv(1 << 16):  # the socket timeout fails a hang
            received += chunk
    return received


def warnings_of(broker: BrokerProcess) -> list[dict[str, Any]]:
    return [e for e in broker.events(since_start=True) if e.get("event") == WARNING]


def test_a_kafka_client_gets_unsupported_version_and_a_clear_log_line(
    broker: BrokerProcess,
) -> None:
    # A Java client retries ApiVersions at version 0 on the same connection after an
    # UNSUPPORTED_VERSION answer that lists no ApiVersions range: both are answered, then close.
    answer = exchange(broker, [kafka_api_versions_request(7), kafka_api_versions_request(8, 0)])
    # Two ApiVersionsResponse v0 frames: size 10, correlation id, error 35, zero api keys.
    assert answer == struct.pack(">iihi", 10, 7, 35, 0) + struct.pack(">iihi", 10, 8, 35, 0)
    event = broker.wait_for_event(WARNING)
    assert event["level"] == "warning"
    assert event["speaks"] == (
        "the Kafka binary protocol (ApiVersions v3, client id 'adminclient-1')"
    )
    assert event["peer"].startswith("127.0.0.1:") and event["listener"] == "PLAINTEXT"
    assert len(warnings_of(broker)) == 1  # one line per connection, not one per request
    assert not [e for e in broker.events(since_start=True) if "msgpack" in str(e.get("error"))]
    # Any other Kafka request is not answered: the connection just closes.
    metadata = struct.pack(">hhih", 3, 12, 1, 0)
    assert exchange(broker, [struct.pack(">i", len(metadata)) + metadata]) == b""
    assert "the Kafka binary protocol (Metadata v12)" in [w["speaks"] for w in warnings_of(broker)]
    assert api_versions_blocking(broker.host, broker.port).error_code == 0
    assert broker.running


def test_an_http_client_gets_a_400_with_one_line_and_a_log_line(broker: BrokerProcess) -> None:
    request = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n"
    answer = exchange(broker, [request])
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 400 Bad Request\r\n")
    assert f"Content-Length: {len(body)}".encode() in head
    assert body.count(b"\n") == 1 and b"trioka's msgpack protocol" in body
    event = broker.wait_for_event(WARNING)
    assert event["speaks"] == "HTTP (GET /metrics)"
    assert broker.running


def test_a_tls_client_on_a_plaintext_port_is_told_and_closed(broker: BrokerProcess) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    failure: list[BaseException] = []

    def connect() -> None:
        try:
            with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
                context.wrap_socket(sock, server_hostname="localhost")
        except (OSError, ssl.SSLError) as exc:
            failure.append(exc)

    thread = threading.Thread(target=connect)
    thread.start()
    thread.join(15)
    assert not thread.is_alive() and failure, "the TLS handshake hung"
    assert not isinstance(failure[0], TimeoutError)
    event = broker.wait_for_event(WARNING)
    assert event["speaks"].startswith("TLS") and event["security_protocol"] == "PLAINTEXT"


@pytest.mark.parametrize("first", [b"\x00\x00\x00\x03\xc1\xc1\xc1", b"\xff\xff\xff\xff"])
def test_other_garbage_is_not_taken_for_another_protocol(
    broker: BrokerProcess, first: bytes
) -> None:
    assert exchange(broker, [first]) == b""
    assert warnings_of(broker) == []
