"""deploy.chaos.docker without a Docker daemon: what a compose container is (from inspect data
shaped like the daemon's), the compose project and daemon defaults, the session variables, and
`trioka chaos run --docker` refusing what it cannot do before it starts anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.chaos.docker import (
    DockerSettings,
    compose_env,
    default_docker_host,
    default_project,
    node_of,
    overrides_of,
)
from deploy.chaos.run import RunConfig, run_chaos

ROOT = Path(__file__).resolve().parents[3]


def inspect_data(service: str, cmd: list[str], ports: dict[str, Any] | None = None) -> dict:
    return {
        "Id": f"id-{service}",
        "Name": f"/proj_{service}_1",
        "Config": {"Labels": {"com.docker.compose.service": service}, "Cmd": cmd},
        "HostConfig": {"PortBindings": ports or {}},
    }


def test_a_raft_broker_container() -> None:
    cmd = [
        "broker", "start", "--override=metadata.mode=raft", "--override=node.id=2",
        "--override=listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19093",
        "--override=inter.broker.listener.name=INTERNAL",
    ]  # fmt: skip
    ports = {"19093/tcp": [{"HostIp": "127.0.0.1", "HostPort": "19093"}]}
    node = node_of(inspect_data("broker-2", cmd, ports))
    assert node is not None
    assert (node.node_id, node.role, node.service, node.port, node.host_port, node.mode) == (
        2, "broker", "broker-2", 9092, 19093, "raft",
    )  # fmt: skip


def test_a_controller_and_zookeeper() -> None:
    cmd = [
        "--override=process.roles=controller", "--override=node.id=3002",
        "--override=listeners=CONTROLLER://0.0.0.0:9093",
        "--override=controller.quorum.voters=3001@controller-1:9093,3002@controller-2:9093",
    ]  # fmt: skip
    controller = node_of(inspect_data("controller-2", cmd))
    assert controller is not None
    assert (controller.node_id, controller.role, controller.port) == (3002, "controller", 9093)
    assert controller.settings["controller.quorum.voters"].startswith("3001@controller-1")
    zookeeper = node_of(inspect_data("zookeeper", ["mkdir -p ..."]))
    assert zookeeper is not None and (zookeeper.node_id, zookeeper.port) == (0, 2181)


def test_a_container_that_is_no_trioka_node() -> None:
    assert node_of(inspect_data("analytics", ["report", "--out", "/reports"])) is None


def test_overrides_keep_equals_signs_in_values() -> None:
    assert overrides_of(["x", "--override=a=b=c", "--override=n=1"]) == {"a": "b=c", "n": "1"}
    assert overrides_of(None) == {}


def test_project_name_as_docker_compose_makes_it(tmp_path: Path) -> None:
    compose = tmp_path / "My Trioka.Dir" / "docker-compose.yml"
    compose.parent.mkdir()
    assert default_project(compose, {}) == "mytriokadir"
    assert default_project(compose, {"COMPOSE_PROJECT_NAME": "x"}) == "x"


def test_docker_host_default() -> None:
    assert default_docker_host({}) == "unix:///run/trioka-docker/docker.sock"
    assert default_docker_host({"DOCKER_HOST": "tcp://h:1"}) == "tcp://h:1"


def test_session_variables() -> None:
    env = compose_env(3000)
    assert env["TRIOKA_ZOOKEEPER_SESSION_TIMEOUT_MS"] == "3000"
    assert env["TRIOKA_BROKER_SESSION_TIMEOUT_MS"] == "3000"
    assert env["TRIOKA_BROKER_HEARTBEAT_INTERVAL_MS"] == "1000"
    assert compose_env(18000)["TRIOKA_BROKER_HEARTBEAT_INTERVAL_MS"] == "2000"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"nemeses": ("kill", "latency")}, "nemesis 'latency' is not available with --docker"),
        ({"drop_produce_responses": 0.3}, "--drop-produce-responses is not available"),
        ({"docker": DockerSettings(docker_host="unix:///nonexistent/docker.sock")},
         "no Docker daemon answers on unix:///nonexistent/docker.sock"),
        ({"docker": DockerSettings(compose_file=Path("/nonexistent/docker-compose.yml"))},
         "no compose file at /nonexistent/docker-compose.yml"),
    ],
)  # fmt: skip
async def test_refused_before_anything_starts(
    changes: dict[str, Any], message: str, tmp_path: Path
) -> None:
    settings = DockerSettings(
        compose_file=ROOT / "docker-compose.yml", docker_host="unix:///nonexistent/docker.sock"
    )
    config = RunConfig(nemeses=("kill",), dir=tmp_path / "c", docker=settings)
    result = await run_chaos(RunConfig(**{**config.__dict__, **changes}), print)
    assert result.exit_code == 2
    assert message in result.summary
    assert not (tmp_path / "c").exists()


def test_cli_docker_refuses_overrides() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "deploy.cli", "chaos", "run", "--docker", "--override", "a=1"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "docker-compose.yml" in proc.stderr
