"""One Spark session per test run (session-scoped fixture `spark`), local[2], the trioka data
source registered. Skips cleanly, with the reason, only when pyspark is not importable
(`make test` installs the analytics extra, so it never skips there).

The first read through a Python data source costs 16-24 s (its worker starts), later ones ~1 s:
tests share this session rather than building their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"pyspark is not installed ({exc}): pip install 'trioka[analytics]'")
    from analytics.job import build_session

    session = build_session("local[2]")
    # few shuffle partitions: the tests' DataFrames are tiny
    session.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        yield session
    finally:
        session.stop()
