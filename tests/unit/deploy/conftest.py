"""Tests here may configure structlog for a process (configure_logging); put it back after each
one so later tests log (and capture logs) with structlog's defaults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
