"""Every admin API a broker forwards to the controller answers promptly when it has nothing to
wait for: validate_only writes, requests whose every item fails, elections with nothing to do,
reads. The broker waits (bounded by request.timeout.ms) for a forwarded write's effect in its
own image; before the fix a validate_only CreateTopics waited for a topic that was never
created, so it only came back after request.timeout.ms (30 s). Each call here is bounded well
below that. Shared by the combined broker's and the Raft cluster's tests."""

from __future__ import annotations

import pytest
import trio

from client import Admin, AlterConfigOp, ElectionType
from client.admin import ConfigResource, NewPartitions, NewTopic
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition

ANSWER_WITHIN_S = 10.0
"""Well below request.timeout.ms (30 s), well above a loaded 2-core machine's answer."""


async def check_forwarded_answers(bootstrap: str, *, replication_factor: int) -> None:
    """Run every forwarded API with nothing to wait for through `bootstrap`; each must answer
    within ANSWER_WITHIN_S and leave the metadata as it was."""
    async with Admin(bootstrap_servers=bootstrap) as admin:
        with trio.fail_after(ANSWER_WITHIN_S):
            (checked,) = await admin.create_topics(
                [NewTopic("validated", 2, replication_factor)], validate_only=True
            )
        assert checked.name == "validated"
        assert "validated" not in await admin.list_topics()

        with trio.fail_after(ANSWER_WITHIN_S), pytest.raises(KafkaError) as failed:
            await admin.create_topics([NewTopic("too-many-replicas", 1, 10)])
        assert failed.value.code == ErrorCode.INVALID_REPLICATION_FACTOR

        with trio.fail_after(ANSWER_WITHIN_S), pytest.raises(KafkaError) as unknown:
            await admin.delete_topics(["no-such-topic"])
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        # A real write still waits until this broker's image has the topic's leader.
        with trio.fail_after(ANSWER_WITHIN_S):
            await admin.create_topic("real", 1, replication_factor)
        tp = TopicPartition("real", 0)
        with trio.fail_after(ANSWER_WITHIN_S):
            elected = await admin.elect_leaders(ElectionType.PREFERRED, [tp])
        assert isinstance(elected[tp], KafkaError)
        assert elected[tp].code == ErrorCode.ELECTION_NOT_NEEDED

        with trio.fail_after(ANSWER_WITHIN_S):
            assert await admin.list_partition_reassignments() == {}

        resource = ConfigResource.topic("real")
        with trio.fail_after(ANSWER_WITHIN_S):
            await admin.incremental_alter_configs(
                {resource: [("retention.ms", AlterConfigOp.SET, "12345")]}, validate_only=True
            )
        with trio.fail_after(ANSWER_WITHIN_S):
            entries = (await admin.describe_configs([resource]))[resource]
        assert {e.name: e.value for e in entries}["retention.ms"] != "12345"

        with trio.fail_after(ANSWER_WITHIN_S):
            await admin.create_partitions({"real": NewPartitions(3)}, validate_only=True)
        with trio.fail_after(ANSWER_WITHIN_S):
            await admin.delete_topics(["real"])
