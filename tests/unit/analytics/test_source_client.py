"""The data source's Arrow batches (analytics.source_client.read_arrow) against RAW_SCHEMA, with
the consumer stubbed: no cluster, no Spark session."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

from pyspark.sql.pandas.types import from_arrow_schema

from analytics import source_client
from analytics.schemas import RAW_SCHEMA
from analytics.source_client import ARROW_SCHEMA, CREATE_TIME, read_arrow
from analytics.source_options import OffsetRange
from client import ConsumerRecord


def test_arrow_schema_is_raw_schema() -> None:
    # Spark reads the batches as RAW_SCHEMA: the Arrow schema must map back to it exactly.
    assert from_arrow_schema(ARROW_SCHEMA) == RAW_SCHEMA


def test_read_arrow_batches_have_raw_schemas_layout(monkeypatch: Any) -> None:
    records = [
        ConsumerRecord("t", 3, 7, 1_790_000_000_123, b"k", b"v1"),
        ConsumerRecord("t", 3, 8, 1_790_000_000_456, None, b"v2"),
    ]
    monkeypatch.setattr(source_client, "read_chunks", lambda options, rng: iter([records]))
    (batch,) = read_arrow(None, OffsetRange("t", 3, 7, 9))  # type: ignore[arg-type]
    assert batch.schema.equals(ARROW_SCHEMA, check_metadata=True)
    assert batch.schema.names == RAW_SCHEMA.fieldNames()
    rows = batch.to_pylist()
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"]) for r in rows] == [
        (b"k", b"v1", "t", 3, 7),
        (None, b"v2", "t", 3, 8),
    ]
    assert rows[0]["timestamp"] == datetime(2026, 9, 21, 14, 13, 20, 123_000, tzinfo=UTC)
    assert {r["timestampType"] for r in rows} == {CREATE_TIME}
