"""20,000 partitions on one node with RLIMIT_NOFILE at 1024: lazy opens and the LRU of file
handles keep the descriptors bounded while every partition is created, written and read."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch
from storage import LogConfig, LogManager
from tests.unit.storage.storage_helpers import records_of

PARTITIONS = 20_000


@pytest.fixture
def nofile_1024() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"hard RLIMIT_NOFILE is {hard}")
    # 1024 for this test: descriptors other tests of this process left open (raw fds of
    # stores a test did not close) do not count against it.
    limit = 1024 + len(os.listdir("/proc/self/fd"))
    if hard != resource.RLIM_INFINITY and hard < limit:
        pytest.skip(f"hard RLIMIT_NOFILE is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_twenty_thousand_partitions(shm_tmp: Path, nofile_1024: None) -> None:
    config = LogConfig(segment_bytes=1 << 20, retention_ms=-1)
    manager = LogManager([shm_tmp / "logs"], node_id=1, cluster_id="wide")
    manager.startup()
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert manager.handles.max_open_files == soft // 2  # half of the soft limit
    tps = [TopicPartition(f"wide{p % 10}", p // 10) for p in range(PARTITIONS)]
    for n, tp in enumerate(tps):
        log = manager.get_or_create_log(tp, config, topic_id=f"id-{tp.topic}")
        value = f"{tp}".encode()
        log.append_as_leader(build_batch([Record(value=value, timestamp=n)]), 0)
        log.append_as_leader(build_batch([Record(value=value + b"!", timestamp=n)]), 0)
        assert len(manager.handles) <= manager.handles.max_open_files
    for tp in tps:
        log = manager.get_log(tp)
        assert log is not None and log.log_end_offset == 2
        values = [r.value for r in records_of(log.read(0, 1 << 20).data)]
        assert values == [str(tp).encode(), str(tp).encode() + b"!"]
    assert len(manager.handles) <= manager.handles.max_open_files
    manager.shutdown()

    # And back: a clean start loads every log lazily within the same limit.
    again = LogManager([shm_tmp / "logs"], node_id=1, cluster_id="wide")
    again.startup()
    assert len(again.logs()) == PARTITIONS
    for tp in tps[::97]:
        log = again.get_log(tp)
        assert log is not None and log.log_end_offset == 2
        log.append_as_leader(build_batch([Record(value=b"more")]), 0)
        assert [r.offset for r in records_of(log.read(0, 1 << 20).data)] == [0, 1, 2]
    assert len(again.handles) <= again.handles.max_open_files
    again.shutdown()
