"""deploy.node.gc_policy: a long full collection freezes its survivors, so the next full
collection walks only what was allocated since; every pause is observed per generation."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from deploy.node.gc_policy import GcPolicy


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _pauses(generation: str) -> float:
    value = REGISTRY.get_sample_value("trioka_gc_pause_seconds_count", {"generation": generation})
    return value or 0.0


def test_a_long_full_collection_freezes_what_survived(unfrozen: None) -> None:
    heap = [[i] for i in range(300_000)]  # long-lived objects the collector walks
    policy = GcPolicy(freeze_after_s=0.0).install()
    try:
        before = _pauses("2")
        gc.collect(2)
        # Frozen: later collections leave these out (gc.get_objects lists what they walk).
        assert policy.freezes == 1 and gc.get_freeze_count() >= len(heap)
        assert _pauses("2") == before + 1
        walked = {id(o) for o in gc.get_objects(generation=2)}
        assert not any(id(item) in walked for item in heap[:1000])
    finally:
        policy.uninstall()


def test_short_collections_freeze_nothing(unfrozen: None) -> None:
    policy = GcPolicy(freeze_after_s=60.0).install()
    try:
        gc.collect(2)
        assert policy.freezes == 0 and gc.get_freeze_count() == 0
    finally:
        policy.uninstall()
