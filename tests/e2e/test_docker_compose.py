"""The compose cluster end to end (`make e2e-docker`; marker `docker`, TRIOKA_E2E_DOCKER=1):
the zk profile (ZooKeeper + 3 brokers) here; the raft profile (3 controllers + 3 brokers) in
test_docker_compose_secure.py (TLS + SCRAM) and test_docker_compose_chaos.py (plaintext).

The `dockerd` fixture (tests/e2e/conftest.py) starts our dockerd if none answers on its socket
and builds the images; `docker-compose --profile P up -d` under a project name of its own; once
every container is healthy the `trioka` CLI on the host creates a topic (3 partitions, RF 3,
min.insync.replicas=2) and produces records with acks=all through the published 127.0.0.1
ports; the leader of partition 0 is killed with the Docker Python SDK (`container.kill()`,
SIGKILL); more records are produced; everything is read back from the beginning and
deploy.chaos's checker must find every acknowledged record, once. The project is brought down
with `down -v` (containers, network, volumes) whatever happened.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import docker
import pytest
import trio

from deploy.chaos.check.checker import check
from deploy.chaos.check.history import History, OpKind, OpType, PolledRecord, SendValue
from tests.e2e.conftest import ROOT, TRIOKA, compose_up, docker_env, project_containers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.docker

PROJECT = "trioka-e2e"
COMPOSE = ("docker-compose", "-f", str(ROOT / "docker-compose.yml"), "-p", PROJECT)
BOOTSTRAP = "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"
TOPIC = "e2e-docker"
RECORDS = 300  # per produce round; two rounds, one before and one after the kill
SERVICES = {"raft": 6, "zk": 4}
"""Containers per profile."""
BROKER_PREFIX = {"raft": "broker-", "zk": "zk-broker-"}


# The raft profile's kill-and-check runs in test_docker_compose_secure.py (with TLS + SCRAM, the
# same body) and its plaintext cluster in test_docker_compose_chaos.py: here the zk profile only,
# which keeps the Docker e2e's CI time where it was before the secure variant.
@pytest.fixture(params=["zk"])
def profile(request: pytest.FixtureRequest, dockerd: docker.DockerClient,
            timings: dict[str, float]) -> Iterator[str]:  # fmt: skip
    mode: str = request.param
    with compose_up((*COMPOSE, "--profile", mode), mode, timings):
        yield mode


def _containers(
    client: docker.DockerClient, project: str = PROJECT
) -> dict[str, docker.models.containers.Container]:
    """This project's containers by compose service name."""
    return {c.labels["com.docker.compose.service"]: c for c in project_containers(client, project)}


def _all_healthy(client: docker.DockerClient, count: int, project: str = PROJECT) -> bool:
    """`count` containers with a healthcheck, all healthy (one-shot services have none)."""
    states = []
    for container in _containers(client, project).values():
        container.reload()
        if container.attrs["Config"].get("Healthcheck"):
            states.append(container.attrs["State"].get("Health", {}).get("Status"))
    return len(states) == count and all(s == "healthy" for s in states)


async def _trioka(*args: str, stdin: bytes = b"") -> bytes:
    done = await trio.run_process(
        [TRIOKA, *args], stdin=stdin, capture_stdout=True, capture_stderr=True, env=docker_env(),
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"trioka {' '.join(args)}: {done.stderr.decode()}"
    return done.stdout


async def _leader(partition: int, client: tuple[str, ...] = ()) -> int:
    out = await _trioka("topic", "describe", TOPIC, "-b", BOOTSTRAP, *client)
    for line in out.decode().splitlines():
        cols = line.split()
        if len(cols) > 1 and cols[0] == str(partition):
            return int(cols[1])
    raise AssertionError(f"partition {partition} missing from:\n{out.decode()}")


async def _produce(history: History, values: list[bytes], client: tuple[str, ...] = ()) -> None:
    """One CLI run with acks=all: its exit status acknowledges (or not) every line it read.
    `client`: the CLI's client options (`--command-config FILE`)."""
    invokes = [history.invoke("cli", OpKind.SEND, SendValue(TOPIC, v)) for v in values]
    done = await trio.run_process(
        [TRIOKA, "produce", TOPIC, "-b", BOOTSTRAP, "--acks", "all", *client],
        stdin=b"".join(v + b"\n" for v in values), capture_stderr=True, env=docker_env(),
        check=False,
    )  # fmt: skip
    # A failed run may have written any of its records: unknown (info), never "not written".
    result = OpType.OK if done.returncode == 0 else OpType.INFO
    for op in invokes:
        history.complete(op, result, error=None if done.returncode == 0 else "produce failed")
    assert done.returncode == 0, f"trioka produce: {done.stderr.decode()}"


async def _read_all(history: History, client: tuple[str, ...] = ()) -> int:
    op = history.invoke("reader", OpKind.POLL)
    out = await _trioka(
        "consume", TOPIC, "-b", BOOTSTRAP, "--from-beginning", "--format", "json",
        "--timeout-ms", "5000", "-c", str(2 * RECORDS), *client,
    )  # fmt: skip
    records = [json.loads(line) for line in out.decode().splitlines()]
    polled = tuple(
        PolledRecord(TOPIC, r["partition"], r["offset"], r["value"].encode()) for r in records
    )
    history.complete(op, OpType.OK, polled)
    return len(polled)


async def test_a_profile_loses_nothing_when_a_broker_container_is_killed(
    dockerd: docker.DockerClient, profile: str, timings: dict[str, float]
) -> None:
    started = time.monotonic()
    await wait_until(lambda: _all_healthy(dockerd, SERVICES[profile]), within=180, every=0.5)
    timings[f"up to healthy ({profile})"] = (
        time.monotonic() - started + timings[f"compose up ({profile})"]
    )
    for name, container in _containers(dockerd).items():
        if name != "zookeeper":  # Debian's package runs it as its own user, zookeeper
            assert container.attrs["Config"]["User"] == "trioka", f"{name} runs as root"
    await lose_nothing_when_the_leader_is_killed(dockerd, PROJECT, BROKER_PREFIX[profile])
    timings[f"test after setup ({profile})"] = (
        time.monotonic() - started + timings[f"compose up ({profile})"]
    )


async def lose_nothing_when_the_leader_is_killed(
    dockerd: docker.DockerClient, project: str, broker_prefix: str, client: tuple[str, ...] = ()
) -> int:
    """Create the topic, produce, SIGKILL partition 0's leader container, produce more, read
    everything back: every acknowledged record once. `client`: the CLI's client options. Returns
    the killed broker's id."""
    await _trioka(
        "topic", "create", TOPIC, "-p", "3", "-r", "3", "-c", "min.insync.replicas=2",
        "-b", BOOTSTRAP, *client,
    )  # fmt: skip
    history = History()
    await _produce(history, [f"before-{i}".encode() for i in range(RECORDS)], client)

    victim = await _leader(0, client)
    container = _containers(dockerd, project)[f"{broker_prefix}{victim}"]
    container.kill()  # SIGKILL through the SDK
    container.reload()
    assert container.status == "exited", f"broker {victim} is {container.status} after kill()"
    await _produce(history, [f"after-{i}".encode() for i in range(RECORDS)], client)

    # The fault took effect: partition 0 moved off the killed broker. The broker that answers
    # `topic describe` may not have applied its UpdateMetadata yet (ZK mode sends it after the
    # LeaderAndIsr the producer already followed), so its answer converges, not at once.
    async def moved() -> bool:
        return await _leader(0, client) not in (victim, -1)

    await wait_until(moved, within=30, every=0.5)

    read = await _read_all(history, client)
    result = check(history)
    assert result.valid, result.summary()
    assert result.acknowledged == 2 * RECORDS and read == 2 * RECORDS, result.summary()
    assert not result.unread, f"acknowledged, never read: {[s.value for s in result.unread[:10]]}"
    assert not result.duplicates, result.summary()
    return victim
