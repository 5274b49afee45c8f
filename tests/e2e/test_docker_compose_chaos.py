"""`trioka chaos run --docker` end to end (marker `docker`, TRIOKA_E2E_DOCKER=1): the chaos
runner brings the compose cluster's raft profile up under a project of its own (with the images
the `dockerd` fixture built), runs seed 3's schedule for 30 s against the containers (a broker
container killed and started again, a broker container disconnected from the compose network
past the session timeout and connected again, a partition leader's container paused past it and
unpaused), heals, reads everything back and checks the history; then takes down what it
started. The test asserts a valid history AND that every fault took effect."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from deploy.chaos.docker import DockerSettings
from deploy.chaos.run import HISTORY_TOPIC, RunConfig, run_chaos
from tests.e2e.conftest import DOCKER_HOST, ROOT, docker_env, project_containers

pytestmark = pytest.mark.docker

PROJECT = "trioka-e2e-chaos"


@pytest.fixture
def chaos_project(dockerd: docker.DockerClient) -> Iterator[str]:
    """The project's name; whatever a failed run left of it is taken down afterwards."""
    yield PROJECT
    if project_containers(dockerd, PROJECT):
        subprocess.run(
            ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "-p", PROJECT,
             "--profile", "raft", "down", "-v", "--timeout", "10"],
            env=docker_env(), capture_output=True, timeout=300, check=False,
        )  # fmt: skip


async def test_chaos_run_against_the_compose_cluster(
    dockerd: docker.DockerClient, chaos_project: str, timings: dict[str, float], tmp_path: Path
) -> None:
    settings = DockerSettings(ROOT / "docker-compose.yml", chaos_project, DOCKER_HOST)
    lines: list[str] = []
    started = time.monotonic()
    result = await run_chaos(
        RunConfig(mode="raft", nemeses=("kill", "pause", "partition"), time_limit_s=30, seed=3,
                  rate=100, dir=tmp_path, docker=settings),
        lines.append,
    )  # fmt: skip
    timings["chaos run --docker (up, 30 s, heal, reads, down)"] = time.monotonic() - started
    print("\n".join(lines))  # the schedule and the summary, shown when the test fails
    assert result.exit_code == 0, result.summary
    assert result.verdict["valid"], result.summary
    run, stats = result.verdict["run"], result.verdict["stats"]
    assert run["docker"] == {"project": PROJECT, "profile": "raft", "reused": False}
    assert stats["acknowledged"] >= 500 and stats["final_reads"], result.summary
    assert run["leader_changes"] >= 1, result.summary
    faults = run["faults"]
    assert faults["injected"] == 3 and faults["failed"] == 0, faults
    assert faults["by_nemesis"] == {"kill": 1, "partition": 1, "pause": 1}, faults
    verified = faults["verified"]
    assert verified.get("cut") == 1, verified  # a TCP probe from the cut-off container failed
    assert verified.get("out-of-live-brokers") == 1, verified  # fenced while off the network
    assert verified.get("healed") == 1, verified  # the probe works again once reconnected
    assert verified.get("leader-moved-from-paused") == 1, verified
    assert run["shipped"].get("records", 0) > 0 and run["shipped"]["topic"] == HISTORY_TOPIC
    assert result.out is not None
    history = (result.out / "history.jsonl").read_text()  # the nemesis ops say what they did
    for how in ("container.kill()", "container.start()", "container.pause()",
                "container.unpause()", "disconnected from the network"):  # fmt: skip
        assert how in history, f"no nemesis op did {how}"
    # It took down what it started: nothing of the project is left.
    assert project_containers(dockerd, PROJECT) == []
