"""The produce/consume commands' topic lookup: a topic just created is waited for briefly (its
metadata reaches each broker asynchronously), a missing one still fails within the grace."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from client.admin import TopicDescription
from deploy.cli.produce_consume import describe_topic_with_grace
from protocol.errors import ErrorCode, KafkaError


class _LaggingAdmin:
    """Answers UNKNOWN_TOPIC_OR_PARTITION `misses` times, then the topic (None: forever)."""

    def __init__(self, misses: int | None) -> None:
        self.misses = misses
        self.calls = 0

    async def describe_topics(self, names: list[str]) -> list[TopicDescription]:
        self.calls += 1
        if self.misses is None or self.calls <= self.misses:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {names[0]!r} does not exist"
            )
        return [TopicDescription(names[0], None, False, ())]


async def test_a_topic_whose_metadata_lags_is_found() -> None:
    admin = _LaggingAdmin(misses=3)
    description = await describe_topic_with_grace(admin, "t", grace_s=5.0, backoff_s=0.1)
    assert description.name == "t"
    assert admin.calls == 4


async def test_a_missing_topic_fails_after_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    admin = _LaggingAdmin(misses=None)
    start = trio.current_time()
    with pytest.raises(KafkaError) as caught:
        await describe_topic_with_grace(admin, "nope", grace_s=2.0, backoff_s=0.1)
    assert caught.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert 1.9 <= trio.current_time() - start <= 2.0


async def test_other_errors_are_not_retried() -> None:
    class Refusing:
        calls = 0

        async def describe_topics(self, names: list[str]) -> list[TopicDescription]:
            Refusing.calls += 1
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no")

    with pytest.raises(KafkaError):
        await describe_topic_with_grace(Refusing(), "t", grace_s=5.0, backoff_s=0.1)
    assert Refusing.calls == 1
