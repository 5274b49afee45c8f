"""Topic names and partitions. Names become directory names, so they are checked strictly."""

from __future__ import annotations

import re
from typing import NamedTuple

from protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
METADATA_TOPIC = "__cluster_metadata"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """Kafka's partition directory name: `<topic>-<partition>`."""
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        """Parse `<topic>-<partition>`; raises ValueError when it is not one."""
        topic, sep, part = name.rpartition("-")
        # isdigit() alone would accept non-ASCII digits such as "٣".
        if not sep or not topic or not (part.isascii() and part.isdigit()):
            raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
        return cls(topic, int(part))


METADATA_PARTITION = TopicPartition(METADATA_TOPIC, 0)
"""The metadata log's one partition; its directory sits in metadata.log.dir."""


def topic_name_problem(name: str) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    if not isinstance(name, str):
        return f"topic name must be a string, not {type(name).__name__}"
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL.fullmatch(c)})
        return (
            f"topic name {name!r} contains illegal characters {''.join(bad)!r}; "
            "use ASCII letters, digits, '.', '_' and '-'"
        )
    return None


def validate_topic_name(name: str) -> None:
    """Raise KafkaError(INVALID_TOPIC_EXCEPTION) naming the problem with `name`."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
