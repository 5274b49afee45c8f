"""Storage test fixtures."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def shm_tmp(tmp_path: Path) -> Iterator[Path]:
    """A fresh directory on tmpfs (/dev/shm) when there is one, else tmp_path.

    For the tests that re-open logs hundreds of times: recovery fsyncs what it repaired, and on
    a shared disk those fsyncs, not the code under test, would dominate the run time. tmpfs
    files behave the same for everything these tests check.
    """
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="trioka-storage-", dir="/dev/shm"))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path
