"""Fixtures of the Docker e2e tests (marker `docker`; TRIOKA_E2E_DOCKER=1 or `make e2e-docker`).

- `dockerd` (session): scripts/docker-setup.sh --zk --monitoring: our dockerd (started only if
  none answers on its socket; stopped at the end only if this run started it), trioka:dev, the
  ZooKeeper and the Prometheus images. Every e2e test shares that one setup and its images.
- `timings` (session): named durations, printed at the end (the seconds the e2e costs CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_DIR = Path(os.environ.get("TRIOKA_DOCKER_DIR", "/run/trioka-docker"))
DOCKER_HOST = f"unix://{RUN_DIR / 'docker.sock'}"
TRIOKA = str(Path(sys.executable).parent / "trioka")


def docker_env() -> dict[str, str]:
    return {**os.environ, "DOCKER_HOST": DOCKER_HOST, "PYTHONPATH": str(ROOT)}


def daemon_answers() -> bool:
    if shutil.which("docker") is None:  # a fresh machine: docker-setup.sh installs docker.io
        return False
    probe = subprocess.run(
        ["docker", "version"], env=docker_env(), capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


def timed(what: str, timings: dict[str, float], *cmd: str, timeout: float = 900) -> str:
    started = time.monotonic()
    out = subprocess.run(
        cmd, cwd=ROOT, env=docker_env(), capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip
    timings[what] = timings.get(what, 0.0) + time.monotonic() - started
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="session")
def timings() -> Iterator[dict[str, float]]:
    measured: dict[str, float] = {}
    yield measured
    print("\ndocker e2e timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in measured.items()))


@pytest.fixture(scope="session")
def dockerd(timings: dict[str, float]) -> Iterator[docker.DockerClient]:
    """Our dockerd with the images built; stopped afterwards only if this fixture started it."""
    started_here = not daemon_answers()
    try:
        timed("setup (dockerd, images)", timings, "bash", "scripts/docker-setup.sh", "--zk",
              "--monitoring")  # fmt: skip
        client = docker.DockerClient(base_url=DOCKER_HOST)
        yield client
        client.close()
    finally:
        if started_here:
            subprocess.run(["bash", "scripts/docker-stop.sh"], cwd=ROOT, env=docker_env(),
                           timeout=60)  # fmt: skip


def project_containers(client: docker.DockerClient, project: str) -> list:
    return list(
        client.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})
    )


@contextlib.contextmanager
def compose_up(compose: tuple[str, ...], what: str, timings: dict[str, float]) -> Iterator[None]:
    """`compose up -d`, then (whatever happened) the services' last log lines printed (pytest
    shows them when the test failed) and `down -v`; both steps timed as `what`."""
    try:
        timed(f"compose up ({what})", timings, *compose, "up", "-d", timeout=300)
        yield
    finally:
        logs = subprocess.run(
            [*compose, "logs", "--no-color", "--tail", "15"],
            env=docker_env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        print(logs.stdout[-20_000:])
        started = time.monotonic()
        subprocess.run(
            [*compose, "down", "-v", "--timeout", "10"],
            env=docker_env(), capture_output=True, timeout=300, check=False,
        )  # fmt: skip
        timings[f"compose down ({what})"] = time.monotonic() - started
