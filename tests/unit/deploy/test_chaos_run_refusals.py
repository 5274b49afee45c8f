"""trioka chaos run refuses what it cannot do before starting anything (exit code 2, a message
naming the problem)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deploy.chaos.run import RunConfig, run_chaos


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (RunConfig(nemeses=("kill", "explode")), "unknown nemesis 'explode'"),
        (RunConfig(mode="kraft"), "mode must be raft or zk"),
        (RunConfig(nemeses=("pause",), time_limit_s=5), "raise --time-limit"),
        (RunConfig(nemeses=("latency",), secure=True), "TLS hides"),
        (RunConfig(drop_produce_responses=0.1, secure=True), "TLS hides"),
    ],
)
async def test_refused_before_any_process_starts(
    config: RunConfig, message: str, tmp_path: Path
) -> None:
    lines: list[str] = []
    result = await run_chaos(RunConfig(**{**config.__dict__, "dir": tmp_path / "c"}), lines.append)
    assert result.exit_code == 2
    assert message in result.summary
    assert not (tmp_path / "c").exists()


async def test_a_network_nemesis_without_namespaces_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("deploy.chaos.run.netns_available", lambda: False)
    result = await run_chaos(RunConfig(nemeses=("kill", "partition"), dir=tmp_path), print)
    assert result.exit_code == 2
    assert "network namespaces" in result.summary and "'partition'" in result.summary


def test_cli_exit_code_and_message() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "deploy.cli", "chaos", "run", "--nemesis", "kill,bogus"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "unknown nemesis 'bogus'" in proc.stderr
