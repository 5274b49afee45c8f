"""scripts/docker-setup.sh and docker-stop.sh without Docker: arguments, and docker-stop.sh
stopping nothing it did not start (a stale pidfile may name any process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(script: str, *args: str, run_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIOKA_DOCKER_DIR": str(run_dir)}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / script), *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_scripts_parse() -> None:
    for script in ("docker-setup.sh", "docker-stop.sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)]).returncode == 0


def test_setup_refuses_unknown_arguments(tmp_path: Path) -> None:
    out = run("docker-setup.sh", "--bogus", run_dir=tmp_path)
    assert out.returncode == 2 and "usage:" in out.stderr


def test_stop_without_the_marker_stops_nothing(tmp_path: Path) -> None:
    (tmp_path / "dockerd.pid").write_text(f"{os.getpid()}\n")
    out = run("docker-stop.sh", run_dir=tmp_path)
    assert out.returncode == 0 and "no dockerd started by docker-setup" in out.stdout


def test_stop_never_signals_a_pid_that_is_not_dockerd(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "dockerd.pid").write_text(f"{other.pid}\n")
        (tmp_path / "started-by-docker-setup").touch()
        out = run("docker-stop.sh", run_dir=tmp_path)
        assert out.returncode == 0 and "is not a running dockerd" in out.stdout
        assert other.poll() is None, "docker-stop.sh signalled a process it did not start"
        assert not (tmp_path / "started-by-docker-setup").exists()
    finally:
        other.kill()
        other.wait()
