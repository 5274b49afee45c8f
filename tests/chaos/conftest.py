"""Chaos runs (deploy.chaos.run) as tests: each brings up its own local cluster in tmp_path,
runs a seeded schedule for a bounded time and tears the cluster down. Run them serially (each
is a 6-7 process cluster on a 2-core machine)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from deploy.chaos.run import RunConfig, RunResult, run_chaos
from deploy.cluster.state import state_path
from deploy.cluster.supervisor import cluster_down

ChaosRun = Callable[[RunConfig], Awaitable[RunResult]]


@pytest.fixture
def chaos_run(tmp_path: Path) -> Iterator[ChaosRun]:
    """`await chaos_run(RunConfig(...))` in tmp_path; the cluster goes down even if the run
    did not take it down itself (signals by pid, through deploy.cluster.supervisor)."""
    dirs: list[Path] = []

    async def run(config: RunConfig) -> RunResult:
        base = tmp_path / f"run-{len(dirs)}"
        dirs.append(base)
        lines: list[str] = []
        result = await run_chaos(replace(config, dir=base, keep=False), lines.append)
        print("\n".join(lines))  # the schedule and the summary, shown when the test fails
        return result

    yield run
    for base in dirs:
        if state_path(base).exists():
            cluster_down(base, timeout=5.0)
