"""The compose cluster with TLS + SCRAM everywhere end to end (`make e2e-docker`; marker
`docker`): docker-compose.yml + docker-compose.secure.yml, raft profile only (the zk profile
differs in its config file and init service, which tests/unit/deploy/test_docker_compose_secure.py
checks; CI time is kept to one profile here).

`scripts/docker-setup.sh --secure --no-build` makes build/tls (kept between runs); the cluster
comes up under a project name of its own; once every node is healthy (the healthchecks dial with
each node's certificate) and secure-init has exited 0 (the admin's SCRAM login created over
INTERNAL with the admin's certificate), the host's `trioka` CLI logs in with
build/tls/client.properties on 127.0.0.1:19092-19094 (SASL_SSL): a plaintext client is refused
there; then the test of tests/e2e/test_docker_compose.py: a topic (RF 3, min.insync.replicas=2),
acks=all records, partition 0's leader container SIGKILLed, more records, everything read back
once. `down -v` whatever happened.

The same project runs the `monitoring` profile: Prometheus (Debian's package, its image built by
the `dockerd` fixture's `docker-setup.sh --monitoring`) must have every node's series (brokers'
and controllers', Strimzi's names) through 127.0.0.1:9090's query API, and see the SIGKILLed
broker go down. Then the restart policy: the broker killed through Docker stays down (the chaos
nemesis relies on that), while a broker whose process is SIGKILLed from the host (a crash: no
Docker command; the test runs as root, as CI does) is started again by the daemon and becomes
healthy.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import docker
import pytest
import trio

from tests.e2e.conftest import ROOT, TRIOKA, compose_up, docker_env, timed
from tests.e2e.test_docker_compose import (
    BOOTSTRAP,
    _all_healthy,
    _containers,
    lose_nothing_when_the_leader_is_killed,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.docker

PROJECT = "trioka-e2e-secure"
COMPOSE = ("docker-compose", "-f", str(ROOT / "docker-compose.yml"),
           "-f", str(ROOT / "docker-compose.secure.yml"), "-p", PROJECT, "--profile", "raft",
           "--profile", "monitoring")  # fmt: skip
CLIENT = ("--command-config", str(ROOT / "build" / "tls" / "client.properties"))
NODES = 7
"""Containers with a healthcheck: 3 controllers, 3 brokers, Prometheus (secure-init is one-shot)."""
PROMETHEUS = "http://127.0.0.1:9090"
NODE_INSTANCES = {f"{kind}-{i}:9404" for kind in ("broker", "controller") for i in (1, 2, 3)}


@pytest.fixture
def secure_raft(dockerd: docker.DockerClient, timings: dict[str, float]) -> Iterator[None]:
    timed("setup (build/tls)", timings, "bash", "scripts/docker-setup.sh", "--secure", "--no-build")
    with compose_up(COMPOSE, "secure raft", timings):
        yield


def _init_done(client: docker.DockerClient) -> bool:
    """secure-init has exited; AssertionError at once when it failed."""
    init = _containers(client, PROJECT).get("secure-init")
    if init is None:
        return False
    init.reload()
    state = init.attrs["State"]
    if state["Status"] != "exited":
        return False
    assert state["ExitCode"] == 0, init.logs().decode()[-4000:]
    return True


async def test_the_secure_raft_profile_takes_only_logins_and_loses_nothing(
    dockerd: docker.DockerClient, secure_raft: None, timings: dict[str, float]
) -> None:
    started = time.monotonic()
    await wait_until(
        lambda: _all_healthy(dockerd, NODES, PROJECT) and _init_done(dockerd),
        within=180, every=0.5,
    )  # fmt: skip
    timings["up to logins (secure raft)"] = (
        time.monotonic() - started + timings["compose up (secure raft)"]
    )
    for name, container in _containers(dockerd, PROJECT).items():
        want = "prometheus" if name == "prometheus" else "trioka"
        assert container.attrs["Config"]["User"] == want, f"{name} runs as root"

    # EXTERNAL is SASL_SSL: a plaintext client gets nowhere (a one-line error, not a hang).
    plain = await trio.run_process(
        [TRIOKA, "topic", "list", "-b", "127.0.0.1:19092", "-X", "default.api.timeout.ms=5000"],
        capture_stdout=True, capture_stderr=True, env=docker_env(), check=False,
    )  # fmt: skip
    assert plain.returncode != 0 and plain.stderr.decode().startswith("error:"), plain.stderr
    logged_in = await trio.run_process(
        [TRIOKA, "topic", "list", "-b", BOOTSTRAP, *CLIENT],
        capture_stdout=True, capture_stderr=True, env=docker_env(), check=False,
    )  # fmt: skip
    assert logged_in.returncode == 0, logged_in.stderr.decode()

    await prometheus_has_every_node()

    victim = await lose_nothing_when_the_leader_is_killed(dockerd, PROJECT, "broker-", CLIENT)
    await wait_until(lambda: _instances("up == 0") == {f"broker-{victim}:9404"}, within=60, every=1)
    await a_crashed_broker_comes_back(dockerd, victim)
    timings["test after setup (secure raft)"] = (
        time.monotonic() - started + timings["compose up (secure raft)"]
    )


def _query(promql: str) -> list[dict]:
    """Prometheus' instant query API: the result vector; empty while Prometheus does not answer
    (the callers poll)."""
    url = f"{PROMETHEUS}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
    except OSError:  # URLError, a reset connection: not up yet
        return []
    assert body["status"] == "success", body
    return body["data"]["result"]


def _instances(promql: str) -> set[str]:
    return {r["metric"].get("instance", "") for r in _query(promql)}


def _value(promql: str) -> str | None:
    """The single value of a scalar-like query, None while it has no result."""
    result = _query(promql)
    return result[0]["value"][1] if result else None


async def prometheus_has_every_node() -> None:
    """Every node scraped (found by DNS), brokers' and controllers' series under Strimzi's names,
    one active controller."""
    await wait_until(lambda: _instances("up == 1") >= NODE_INSTANCES, within=90, every=1)
    brokers = {f"broker-{i}:9404" for i in (1, 2, 3)}
    controllers = {f"controller-{i}:9404" for i in (1, 2, 3)}
    await wait_until(
        lambda: _instances("kafka_server_replicamanager_partitioncount") == brokers
        and _instances("kafka_server_raftmetrics_current_leader") >= controllers
        and _value("sum(kafka_controller_kafkacontroller_activecontrollercount)") == "1"
        # the telemetry shippers' produces: each broker leads some of their partitions
        and bool(_instances('kafka_network_requestmetrics_requests_total{request="Produce"}')),
        within=60, every=1,
    )  # fmt: skip


async def a_crashed_broker_comes_back(dockerd: docker.DockerClient, killed: int) -> None:
    """The broker killed through Docker stayed down; one SIGKILLed from the host restarts."""
    containers = _containers(dockerd, PROJECT)
    killed_container = containers[f"broker-{killed}"]
    killed_container.reload()
    assert killed_container.status == "exited", "Docker restarted a container it was told to kill"
    assert killed_container.attrs["RestartCount"] == 0
    crashed = containers[f"broker-{killed % 3 + 1}"]
    crashed.reload()
    first_start = crashed.attrs["State"]["StartedAt"]
    os.kill(crashed.attrs["State"]["Pid"], signal.SIGKILL)  # not through Docker: a crash

    def restarted_and_healthy() -> bool:
        """Started again (Docker leaves Health "healthy" until the restart, so the start time
        must be new) and healthy since."""
        crashed.reload()
        state = crashed.attrs["State"]
        return (
            crashed.attrs["RestartCount"] >= 1
            and state["Status"] == "running"
            and state["StartedAt"] != first_start
            and state.get("Health", {}).get("Status") == "healthy"
        )

    await wait_until(restarted_and_healthy, within=120, every=0.5)
