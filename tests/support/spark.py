"""One local Spark session per test run (MACHINE-FACTS: 7-12 s to start, and the first read
through a Python data source costs 16-24 s, so sessions are shared, never made per test).

`spark` is session-scoped; it skips with a clear reason only when pyspark is not importable
(`make test` installs the analytics extra, so it never skips there).
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
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.skip("pyspark is not installed: pip install 'trioka[analytics]'")
    # Workers must run this interpreter (they crash on another Python); loopback only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("trioka-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
