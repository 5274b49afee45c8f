"""protocol.foreign: telling a connection's first bytes apart (trioka, Kafka, HTTP, TLS)."""

from __future__ import annotations

import struct

from protocol.codec import encode_request
from protocol.foreign import (
    SNIFF_BYTES,
    ForeignProtocol,
    Verdict,
    http_refusal,
    kafka_api_versions_refusal,
    kafka_request_header,
    sniff,
)
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest


def kafka_frame(
    api_key: int, version: int, corr: int, client: bytes | None, body: bytes = b""
) -> bytes:
    length = -1 if client is None else len(client)
    payload = struct.pack(">hhih", api_key, version, corr, length) + (client or b"") + body
    return struct.pack(">i", len(payload)) + payload


def test_trioka_requests_are_native_from_their_fifth_byte() -> None:
    for body in (ApiVersionsRequest(), MetadataRequest(topics=None)):
        frame = encode_request(1, "c", body)
        assert sniff(frame[:4]) is Verdict.NEED_MORE
        assert sniff(frame[:5]) is Verdict.NATIVE
        assert sniff(frame[:SNIFF_BYTES]) is Verdict.NATIVE


def test_kafka_headers_are_named_with_kafka_api_names() -> None:
    frame = kafka_frame(18, 3, 7, b"adminclient-1", b"\x12apache-kafka-java\x063.7.0\x00")
    found = sniff(frame[:SNIFF_BYTES])
    assert isinstance(found, ForeignProtocol) and found.protocol == "kafka"
    assert found.description == (
        "the Kafka binary protocol (ApiVersions v3, client id 'adminclient-1')"
    )
    assert (found.api_key, found.api_version, found.correlation_id) == (18, 3, 7)
    assert found.answer() == kafka_api_versions_refusal(7)
    assert sniff(frame[:11]) is Verdict.NEED_MORE  # 7 header bytes of 8: not yet
    early = sniff(frame[:12])  # api key, version and correlation id are enough
    assert isinstance(early, ForeignProtocol) and early.description.endswith("(ApiVersions v3)")
    metadata = sniff(kafka_frame(3, 12, 1, None))
    assert isinstance(metadata, ForeignProtocol) and metadata.answer() is None
    assert "(Metadata v12)" in metadata.description
    unknown = sniff(kafka_frame(68, 0, 1, b""))
    assert isinstance(unknown, ForeignProtocol) and "(api key 68 v0)" in unknown.description
    assert kafka_request_header(frame[4:]) == (18, 3, 7)


def test_kafka_refusal_is_an_api_versions_v0_response_with_unsupported_version() -> None:
    assert kafka_api_versions_refusal(0x01020304) == bytes.fromhex("0000000a01020304002300000000")


def test_http_and_tls_are_recognised_from_four_bytes() -> None:
    found = sniff(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"[:SNIFF_BYTES])
    assert isinstance(found, ForeignProtocol) and found.description == "HTTP (GET /metrics)"
    assert isinstance(sniff(b"POST"), ForeignProtocol)
    answer = http_refusal()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 400 Bad Request") and body.count(b"\n") == 1
    assert found.answer() == answer
    hello = sniff(bytes.fromhex("16030100c5010000c10303"))
    assert isinstance(hello, ForeignProtocol) and hello.protocol == "tls"
    assert hello.answer() is None


def test_garbage_that_is_none_of_them_is_left_to_the_decoder() -> None:
    assert sniff(b"\x00\x00\x00\x03\xc1\xc1\xc1") is Verdict.NATIVE  # complete, too short
    assert sniff(b"\xff\xff\xff\xff\x00") is Verdict.NATIVE  # negative length
    assert sniff(b"\x00\x00\x00\x20\xc1") is Verdict.NATIVE  # not a Kafka header either
    assert sniff(b"\x00\x00\x00\x20\x00\x01") is Verdict.NEED_MORE
    # a Kafka-looking header whose client id does not fit in its frame
    assert sniff(struct.pack(">ihhih", 10, 18, 0, 1, 50)) is Verdict.NATIVE
    assert sniff(struct.pack(">ihhi", 8, 18, 0, -5)) is Verdict.NATIVE  # negative correlation id
    # zeros behind a length over the limit: the framing's "too large", not Kafka's Produce v0
    zeros = (600_000).to_bytes(4, "big") + bytes(60)
    assert sniff(zeros, max_frame_bytes=524288) is Verdict.NATIVE
    assert isinstance(sniff(zeros), ForeignProtocol)
