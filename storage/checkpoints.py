"""Checkpoint files in Kafka's text format: a version line, a count line, then one entry a line.

    recovery-point-offset-checkpoint, replication-offset-checkpoint,
    log-start-offset-checkpoint:     `<topic> <partition> <offset>`  (version 0)
    leader-epoch-checkpoint:         `<epoch> <start offset>`        (version 0)
    partition.metadata:              `version: 0` / `topic_id: <id>`

Writes go through files.atomic_write, so a reader sees the old file or the new one, never a mix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from protocol.names import TopicPartition
from storage.errors import CheckpointError
from storage.files import atomic_write, read_text

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CHECKPOINT_VERSION = 0


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def format_checkpoint(entries: Iterable[str], version: int = CHECKPOINT_VERSION) -> bytes:
    lines = list(entries)
    return ("\n".join([str(version), str(len(lines)), *lines]) + "\n").encode()


def parse_checkpoint(path: str, text: str, fields: int) -> list[list[str]]:
    """Split a checkpoint's entries into `fields` columns; raise CheckpointError naming the file
    and the line when anything is off."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"checkpoint {path} is truncated: {len(lines)} lines")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(
            f"checkpoint {path} has version {lines[0].strip()!r}; expected {CHECKPOINT_VERSION}"
        )
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"checkpoint {path}: bad entry count {lines[1]!r}") from None
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"checkpoint {path} says {count} entries but holds {len(body)}")
    rows = []
    for n, line in enumerate(body, start=3):
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"checkpoint {path} line {n}: malformed entry {line!r}")
        rows.append(parts)
    return rows


def write_offsets(path: str, offsets: Mapping[TopicPartition, int], *, fsync: bool = True) -> None:
    entries = (f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items()))
    atomic_write(path, format_checkpoint(entries), fsync=fsync)


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """Offsets by partition; {} when the file does not exist."""
    text = read_text(path, CheckpointError)
    if text is None:
        return {}
    out: dict[TopicPartition, int] = {}
    for topic, partition, offset in parse_checkpoint(path, text, 3):
        try:
            out[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            raise CheckpointError(
                f"checkpoint {path}: bad partition or offset in {topic} {partition} {offset}"
            ) from None
    return out


def write_epochs(path: str, entries: Iterable[EpochEntry], *, fsync: bool = True) -> None:
    atomic_write(
        path, format_checkpoint(f"{e.epoch} {e.start_offset}" for e in entries), fsync=fsync
    )


def read_epochs(path: str) -> list[EpochEntry] | None:
    """Entries in file order; None when the file does not exist."""
    text = read_text(path, CheckpointError)
    if text is None:
        return None
    out = []
    for epoch, start in parse_checkpoint(path, text, 2):
        try:
            out.append(EpochEntry(int(epoch), int(start)))
        except ValueError:
            raise CheckpointError(f"checkpoint {path}: bad entry {epoch} {start}") from None
    return out


def write_partition_metadata(path: str, topic_id: str, *, fsync: bool = True) -> None:
    atomic_write(path, f"version: 0\ntopic_id: {topic_id}\n".encode(), fsync=fsync)


def read_partition_metadata(path: str) -> str | None:
    """The topic id stored in partition.metadata, or None when there is no such file."""
    text = read_text(path, CheckpointError)
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or not fields.get("topic_id"):
        raise CheckpointError(f"{path} is not a version 0 partition.metadata file: {text!r:.100}")
    return fields["topic_id"]
