"""One local Spark session per test run (measured on the project's 2-core machines: 7-12 s to
start, and the first read through a Python data source costs 16-24 s, so sessions are shared,
never made per test).

`spark` is session-scoped: local[2], UTC, quiet, the `trioka` data source registered
(analytics.job.build_session). It skips with a clear reason only when pyspark is not
importable (`make test` installs the analytics extra, so it never skips there).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("pyspark is not installed: pip install 'trioka[analytics]'")
    from analytics.job import build_session

    # Workers must run this interpreter (they crash on another Python); loopback only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = build_session("local[2]")
    session.conf.set("spark.sql.shuffle.partitions", "2")  # the tests' frames are tiny
    try:
        yield session
    finally:
        session.stop()
