"""`make demo` runs scripts/demo.sh after setup: it must work from a clone, and leave nothing."""

from __future__ import annotations

import subprocess

from tests.support.broker_process import REPO_ROOT


def test_demo_script_round_trip_and_cleanup() -> None:
    before = _brokers_running()
    result = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "Produced 5 records to demo-events." in out
    assert "Processed a total of 5 messages." in out
    assert "stopped the broker gracefully (exit code 0)" in " ".join(out.split())
    assert _brokers_running() == before  # the demo's broker is gone


def _brokers_running() -> set[str]:
    ps = subprocess.run(["pgrep", "-f", "trioka.*broker start"], capture_output=True, text=True)
    return set(ps.stdout.split())
