"""The authorizer's cost on a broker's hottest listing (issue 16): a Metadata answer for all of
a 25,000-topic cluster, trimmed to the topics a non-super principal may DESCRIBE.

    .venv/bin/python bench/run_authorizer.py [--topics 25000] [--acls 1000] [--json]

The real code (broker.authorization.RequestAuthorization over an image holding the ACLs) on
a real MetadataResponse (3 partitions a topic, RF 3). The ACLs: one LITERAL READ per topic
for `--acls` topics, plus 10 PREFIXED ones. Printed, each the best of 5 runs: building the
authorizer (once per ACL change), the trim, the check of a 100-topic Produce (refuse() and the
per-topic narrow() every request goes through), and, for
scale, encoding the same Metadata answer (which the broker does anyway).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.authorization import RequestAuthorization
from broker.server import ConnectionInfo
from protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.codec import RequestEnvelope, encode_response
from protocol.messages.metadata import (
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from protocol.messages.produce import ProduceRequest, ProduceTopic
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import AccessControlEntryRecord

CONN = ConnectionInfo("10.0.0.7:5000", "CLIENTS", principal="User:alice")


def image_with_acls(topics: int, acls: int) -> MetadataImage:
    def record(i: int, name: str, pattern: PatternType) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            id=f"acl-{i}", resource_type=int(ResourceType.TOPIC), resource_name=name,
            pattern_type=int(pattern), principal="User:alice", host="*",
            operation=int(AclOperation.READ), permission_type=int(AclPermissionType.ALLOW),
        )  # fmt: skip

    step = max(topics // max(acls, 1), 1)
    records = [record(i, f"t{i * step}", PatternType.LITERAL) for i in range(acls)]
    records += [record(acls + i, f"p{i}-", PatternType.PREFIXED) for i in range(10)]
    return MetadataDelta(MetadataImage.empty()).replay_all(records).apply()


def metadata_answer(topics: int) -> MetadataResponse:
    def partition(p: int) -> MetadataPartition:
        return MetadataPartition(
            error_code=0, index=p, leader_id=p % 3 + 1, replica_nodes=(1, 2, 3), isr_nodes=(1, 2, 3)
        )

    parts = tuple(map(partition, range(3)))
    listed = (MetadataTopic(name=f"t{i}", error_code=0, partitions=parts) for i in range(topics))
    return MetadataResponse(topics=tuple(listed))


def best_ms(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=25000)
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    image = image_with_acls(args.topics, args.acls)
    answer = metadata_answer(args.topics)
    every = RequestEnvelope(MetadataRequest.API_KEY, 0, 1, "bench", MetadataRequest(topics=None))
    produce = RequestEnvelope(ProduceRequest.API_KEY, 0, 1, "bench", ProduceRequest(
        acks=-1, timeout_ms=1000,
        topics=tuple(ProduceTopic(name=f"t{i}", partitions=()) for i in range(100)),
    ))  # fmt: skip

    def fresh() -> RequestAuthorization:
        auth = RequestAuthorization(lambda: image)
        auth.authorizer()
        return auth

    auth = fresh()
    kept = len(auth.trim(every, CONN, answer).topics)
    figures = {
        "topics": args.topics,
        "acls": args.acls + 10,
        "topics_kept": kept,
        "build_authorizer_ms": best_ms(fresh),
        "trim_metadata_ms": best_ms(lambda: auth.trim(every, CONN, answer)),
        "check_produce_100_topics_ms": best_ms(
            lambda: (auth.refuse(produce, CONN), auth.narrow(produce, CONN))
        ),
        "encode_metadata_ms": best_ms(lambda: encode_response(1, answer)),
    }
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:32} {value:.2f}" if isinstance(value, float) else f"{key:32} {value}")


if __name__ == "__main__":
    main()
