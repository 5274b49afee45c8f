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
"""

from __future__ import annotations

import time
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
           "-f", str(ROOT / "docker-compose.secure.yml"), "-p", PROJECT, "--profile", "raft")  # fmt: skip
CLIENT = ("--command-config", str(ROOT / "build" / "tls" / "client.properties"))
NODES = 6
"""Containers with a healthcheck: 3 controllers, 3 brokers (secure-init is one-shot)."""


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
        assert container.attrs["Config"]["User"] == "trioka", f"{name} runs as root"

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

    await lose_nothing_when_the_leader_is_killed(dockerd, PROJECT, "broker-", CLIENT)
    timings["test after setup (secure raft)"] = (
        time.monotonic() - started + timings["compose up (secure raft)"]
    )
