"""A full disk: a 2 MiB tmpfs as the log dir. The failed append answers KAFKA_STORAGE_ERROR with
a clear message and leaves the log exactly as it was; the log dir then goes offline, as Kafka's
(every later operation on its logs fails at once instead of an ENOSPC per append; the broker
halts when no dir is left); once space is freed, a restart finds everything acknowledged and
appends work. No partial batch is ever served, nor left on disk for recovery to find."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch
from storage import KafkaStorageError, LogConfig, LogManager
from tests.unit.storage.storage_helpers import read_all

TP = TopicPartition("full", 0)
CONFIG = LogConfig(segment_bytes=256 * 1024, retention_ms=-1, segment_ms=10**12)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount/umount command to make a small tmpfs")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def append_batch(offset: int, size: int) -> bytes:
    """Three records whose values start with their offsets."""
    return build_batch(
        [
            Record(value=f"{offset + i:08d}:".encode() + b"x" * size, timestamp=offset)
            for i in range(3)
        ]
    )


def check_values(records: list[Record]) -> None:
    for rec in records:
        assert (rec.value or b"").startswith(f"{rec.offset:08d}:".encode()), rec.offset


def test_full_disk_refuses_appends_cleanly_and_recovers(tiny_tmpfs: Path) -> None:
    log_dir = tiny_tmpfs / "logs"
    manager = LogManager([log_dir], node_id=1, cluster_id="full", max_open_files=16)
    failed: list[tuple[str, str]] = []
    manager.on_dir_failed = lambda d, reason: failed.append((d, reason))
    manager.startup()
    ballast = tiny_tmpfs / "ballast"
    ballast.write_bytes(b"\0" * 300 * 1024)
    log = manager.get_or_create_log(TP, CONFIG)

    error: KafkaStorageError | None = None
    failing = b""
    for i in range(10_000):
        failing = append_batch(log.log_end_offset, 1000 + 37 * (i % 50))
        try:
            log.append_as_leader(failing, 0)
        except KafkaStorageError as exc:
            error = exc
            break
    assert error is not None, "the 2 MiB tmpfs never filled up"
    end = log.log_end_offset
    assert end > 0 and len(log.segments) > 1

    assert error.code == ErrorCode.KAFKA_STORAGE_ERROR and error.retriable
    assert error.os_error is not None and error.os_error.errno == errno.ENOSPC
    assert "No space left on device" in error.message and "ENOSPC" in error.message
    assert str(TP) in error.message
    assert (
        error.path is not None
        and error.path.startswith(str(log_dir))
        and error.path in error.message
    )

    # Exactly as before the failed append: nothing partial on disk.
    active = log.segments[-1]
    assert os.path.getsize(active.log_path) == active.size
    # The dir is offline (Kafka's LogDirFailureChannel), told once, naming the cause.
    assert [(d, "ENOSPC" in reason) for d, reason in failed] == [(str(log_dir), True)]
    assert manager.online_dirs == [] and log.offline
    with pytest.raises(KafkaStorageError, match="offline log dir"):
        log.append_as_leader(failing, 0)
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        manager.get_or_create_log(TopicPartition("other", 0), CONFIG)
    manager.shutdown()  # writes nothing to the failed dir
    assert len(failed) == 1

    # Free space and restart: everything appended is there, nothing torn to cut.
    ballast.unlink()
    again = LogManager([log_dir], node_id=1, cluster_id="full", max_open_files=16)
    again.startup()
    log2 = again.get_log(TP)
    assert log2 is not None and log2.log_end_offset == end
    assert log2.recovered_bytes_truncated == 0
    records = read_all(log2)
    assert [r.offset for r in records] == list(range(end))
    check_values(records)
    assert log2.append_as_leader(append_batch(end, 1000), 0).first_offset == end
    again.shutdown()


def test_full_disk_during_segment_roll(tiny_tmpfs: Path) -> None:
    """Fill the disk with the active segment exactly full, so the next append must roll."""
    log_dir = tiny_tmpfs / "logs"
    manager = LogManager([log_dir], node_id=1, cluster_id="full", max_open_files=16)
    manager.startup()
    one = len(append_batch(0, 2000))
    log = manager.get_or_create_log(TP, CONFIG.replace(segment_bytes=one * 4))
    for _ in range(4):
        log.append_as_leader(append_batch(log.log_end_offset, 2000), 0)
    assert len(log.segments) == 1
    # Take (nearly) all the remaining space.
    filler = tiny_tmpfs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    with pytest.raises(KafkaStorageError) as exc_info:
        log.append_as_leader(append_batch(12, 2000), 0)
    assert "No space left on device" in exc_info.value.message
    assert len(log.segments) == 1 and log.log_end_offset == 12
    assert manager.online_dirs == []
    manager.shutdown()
    filler.unlink()
    again = LogManager([log_dir], node_id=1, cluster_id="full", max_open_files=16)
    again.startup({TP.topic: CONFIG.replace(segment_bytes=one * 4)})
    log = again.get_log(TP)
    assert log is not None and log.log_end_offset == 12
    log.append_as_leader(append_batch(12, 2000), 0)
    assert [s.base_offset for s in log.segments] == [0, 12]
    assert [r.offset for r in read_all(log)] == list(range(15))
    again.shutdown()
