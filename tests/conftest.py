"""Fixtures shared by every test package.

- `broker`: one started broker process (tests.support.broker_process.BrokerProcess) on a free
  loopback port with its own log dir under tmp_path; killed by pid at teardown. It runs the
  default config: a single-node KRaft combined process (metadata.mode=raft, broker and the
  quorum's only voter); pass `{"metadata.mode": "standalone"}` to broker_factory for the
  legacy LocalMetadataLog broker.
- `broker_factory`: `broker_factory(overrides=None, *, start=True, node_id=1, log_dirs=None,
  preexec_fn=None, env=None) -> BrokerProcess`; every process it made is killed at teardown.
- `zookeeper`, `zookeeper_server`, `zookeeper_factory`: see tests/support/zookeeper.py.

Both are sync fixtures, so sync tests (CLI via subprocess) and trio tests can use them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# pytest runs with --import-mode=importlib, which does not put the repository root on sys.path;
# tests import the shared support package as `tests.support`.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# `trioka cluster up` listens on 9092, 9093, ... by default; the tests' clusters (the CLI's and
# the demo script's, in subprocesses) take free ports, so that a cluster a developer runs, or
# another test's, never collides with them. tests/integration/cli/test_cli_cluster.py tests the
# fixed ports with an explicit --base-port.
os.environ.setdefault("TRIOKA_BASE_PORT", "0")
# The profiles `cluster up` saves (deploy.cli.profiles) go to a directory of this run's, never
# to the developer's ~/.config/trioka.
if "TRIOKA_CONFIG_DIR" not in os.environ:
    os.environ["TRIOKA_CONFIG_DIR"] = tempfile.mkdtemp(prefix="trioka-test-config-")
    atexit.register(shutil.rmtree, os.environ["TRIOKA_CONFIG_DIR"], ignore_errors=True)

from tests.support.broker_process import BrokerProcess  # noqa: E402

# A real ZooKeeper: `zookeeper` (a fresh chroot per test on one server per run),
# `zookeeper_server`, `zookeeper_factory` (servers a test may stop or restart); `spark`: one
# Spark session per run (tests/support/spark.py).
pytest_plugins = ["tests.support.zookeeper", "tests.support.spark"]

BrokerFactory = Callable[..., BrokerProcess]
E2E_DIR = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """tests/e2e runs last (it starts dockerd and containers; the namespace-based chaos tests
    before it must not share the machine with them), and the `docker` tests only when asked
    for (TRIOKA_E2E_DOCKER=1: `make test` and `make e2e-docker` set it; a bare pytest run
    leaves them out, they build images and take minutes)."""
    items.sort(key=lambda item: E2E_DIR in Path(item.path).parents)  # stable: order kept
    if os.environ.get("TRIOKA_E2E_DOCKER") == "1":
        return
    skip = pytest.mark.skip(reason="Docker e2e: run with `make e2e-docker` or TRIOKA_E2E_DOCKER=1")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    made: list[BrokerProcess] = []

    def make(
        overrides: dict[str, Any] | None = None,
        *,
        start: bool = True,
        node_id: int = 1,
        log_dirs: list[str | Path] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> BrokerProcess:
        proc = BrokerProcess(
            tmp_path / f"broker-{node_id}-{len(made)}",
            overrides,
            node_id=node_id,
            log_dirs=log_dirs,
            preexec_fn=preexec_fn,
            env=env,
        )
        made.append(proc)
        if start:
            proc.start(timeout)
        return proc

    try:
        yield make
    finally:
        for proc in made:
            proc.cleanup()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory()
