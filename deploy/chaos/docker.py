"""`trioka chaos run --docker`: the compose cluster (docker-compose.yml, profile raft or zk) as
a chaos run's cluster, and the nemesis backend that acts on its containers through the Docker
Python SDK (an optional dependency: `pip install 'trioka[docker]'`).

    cluster = DockerCluster(DockerSettings(), mode="raft", session_timeout_ms=3000, say=print)
    await cluster.inspect()     # the daemon answers; a cluster already up is reused
    bootstrap = await cluster.up()          # 127.0.0.1:19092,... once every service is healthy
    nemesis = cluster.nemesis(history, topic="chaos", seed=7, acks=workload)
    await cluster.down()        # only what this run started

Faults (deploy.chaos.nemesis.NodeControl): kill = `container.kill()` (SIGKILL), then
`container.start()` and a wait for its healthcheck; pause = `container.pause()` (the cgroup
freezer), `unpause()`; cut = the container disconnected from the compose network (so cut from
every other node and from the host's published port), then connected again under its service
name. Probes run inside the cut-off container (a TCP connect to the other side's address).
The brokers are reached through their published 127.0.0.1 ports; the Raft quorum's leader is
asked with `trioka quorum describe` inside a running container (the controllers publish no
port).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import trio

from deploy.chaos.check.history import History
from deploy.chaos.nemesis import (
    RESTART_TIMEOUT_S,
    Acknowledgements,
    HarnessError,
    Nemesis,
    to_thread,
)
from deploy.cluster.proxy import ProxySet
from protocol.server_configs import heartbeat_interval_ms

log = structlog.get_logger("trioka.chaos")

__all__ = [
    "DOCKER_UNSUPPORTED",
    "DockerCluster",
    "DockerControl",
    "DockerNode",
    "DockerSettings",
    "compose_env",
    "default_docker_host",
    "default_project",
]

OUR_DOCKER_HOST = "unix:///run/trioka-docker/docker.sock"
"""scripts/docker-setup.sh's dockerd."""
DOCKER_UNSUPPORTED = {
    "latency": "it needs the fault proxies in front of the brokers, and the compose brokers "
    "advertise their own published ports (run it locally: without --docker)",
}
"""Nemeses `--docker` cannot do, with the reason."""
KAFKA_ZK_SESSION_TIMEOUT_MS = 18000
KAFKA_BROKER_SESSION_TIMEOUT_MS = 9000
POLL_S = 0.5
EXEC_TIMEOUT_S = 15


@dataclass(frozen=True)
class DockerSettings:
    compose_file: Path = Path("docker-compose.yml")
    project: str | None = None
    """The compose project (default: as docker-compose names it, see default_project)."""
    docker_host: str | None = None
    """The daemon (default: DOCKER_HOST, else scripts/docker-setup.sh's socket)."""


def default_project(compose_file: Path, env: Mapping[str, str] = os.environ) -> str:
    """docker-compose's own default: COMPOSE_PROJECT_NAME, else the compose file's directory
    name lowercased without other characters than [a-z0-9_-] (so a cluster brought up with a
    bare `docker-compose --profile raft up -d` next to the file is found)."""
    if env.get("COMPOSE_PROJECT_NAME"):
        return env["COMPOSE_PROJECT_NAME"]
    return re.sub(r"[^-_a-z0-9]", "", compose_file.resolve().parent.name.lower())


def default_docker_host(env: Mapping[str, str] = os.environ) -> str:
    return env.get("DOCKER_HOST") or OUR_DOCKER_HOST


def compose_env(session_timeout_ms: int) -> dict[str, str]:
    """The variables docker-compose.yml reads for the nodes' session settings."""
    return {
        "TRIOKA_ZOOKEEPER_SESSION_TIMEOUT_MS": str(session_timeout_ms),
        "TRIOKA_BROKER_SESSION_TIMEOUT_MS": str(session_timeout_ms),
        "TRIOKA_BROKER_HEARTBEAT_INTERVAL_MS": str(heartbeat_interval_ms(session_timeout_ms)),
    }


def overrides_of(command: list[str] | None) -> dict[str, str]:
    """A container's `--override=KEY=VALUE` arguments."""
    out: dict[str, str] = {}
    for arg in command or []:
        if arg.startswith("--override="):
            key, _, value = arg.removeprefix("--override=").partition("=")
            out[key] = value
    return out


def _listener_port(listeners: str, name: str, default: int) -> int:
    for item in listeners.split(","):
        label, _, rest = item.partition("://")
        if label.strip() == name and ":" in rest:
            return int(rest.rpartition(":")[2])
    return default


@dataclass(frozen=True)
class DockerNode:
    node_id: int
    """Broker or controller node.id; 0 for ZooKeeper."""
    service: str
    """The compose service: the container's name on the compose network."""
    role: str
    """"broker", "controller" or "zookeeper"."""
    container_id: str
    port: int
    """The listener other nodes use (INTERNAL, CONTROLLER, 2181)."""
    host_port: int | None = None
    """A broker's published 127.0.0.1 port."""
    mode: str | None = None
    """A broker's metadata.mode."""
    settings: Mapping[str, str] = field(default_factory=dict)


def node_of(attrs: Mapping[str, Any]) -> DockerNode | None:
    """What a compose container is, from its inspect data (None: not a trioka node)."""
    labels = attrs["Config"].get("Labels") or {}
    service = labels.get("com.docker.compose.service", attrs["Name"].lstrip("/"))
    command = list(attrs["Config"].get("Cmd") or [])
    settings = overrides_of(command)
    cid = attrs["Id"]
    if service == "zookeeper":
        return DockerNode(0, service, "zookeeper", cid, 2181)
    if "node.id" not in settings:
        return None
    node_id = int(settings["node.id"])
    listeners = settings.get("listeners", "")
    if settings.get("process.roles") == "controller":
        port = _listener_port(listeners, "CONTROLLER", 9093)
        return DockerNode(node_id, service, "controller", cid, port, settings=settings)
    inter = settings.get("inter.broker.listener.name", "PLAINTEXT")
    host_port = None
    for bindings in (attrs["HostConfig"].get("PortBindings") or {}).values():
        for b in bindings or []:
            if b.get("HostPort"):
                host_port = int(b["HostPort"])
    return DockerNode(node_id, service, "broker", cid, _listener_port(listeners, inter, 9092),
                      host_port, settings.get("metadata.mode", "raft"), settings)  # fmt: skip


def _docker_client(host: str) -> Any:
    try:
        import docker  # an optional dependency: only --docker needs it
    except ImportError:
        raise HarnessError(
            "--docker needs the Docker SDK for Python: pip install 'trioka[docker]'"
        ) from None
    try:
        client = docker.DockerClient(base_url=host, timeout=60)
        client.ping()
    except Exception as exc:  # the SDK raises requests' and its own errors alike
        raise HarnessError(
            f"no Docker daemon answers on {host} ({exc}); start one with "
            "scripts/docker-setup.sh (`make docker-setup`) or set DOCKER_HOST"
        ) from None
    return client


class DockerControl:
    """deploy.chaos.nemesis.NodeControl over the compose cluster's containers."""

    def __init__(self, client: Any, mode: str, nodes: Mapping[int, DockerNode],
                 network: str) -> None:  # fmt: skip
        self.client = client
        self.mode = mode
        self.nodes = dict(nodes)
        self.network = network
        self._cut: dict[int, list[str]] = {}
        """Nodes disconnected from the network now, with their aliases on it."""

    def _container(self, node_id: int) -> Any:
        return self.client.containers.get(self.nodes[node_id].container_id)

    def brokers(self) -> list[int]:
        return sorted(n for n, d in self.nodes.items() if d.role == "broker")

    def controllers(self) -> list[int]:
        return sorted(n for n, d in self.nodes.items() if d.role == "controller")

    def metadata_nodes(self) -> list[int]:
        return [0] if self.mode == "zk" else self.controllers()

    def node_name(self, node_id: int) -> str:
        return self.nodes[node_id].service

    def client_config(self) -> dict[str, str]:
        return {}  # the compose brokers' EXTERNAL listeners are PLAINTEXT

    def broker_bootstrap(self, exclude: Collection[int] = ()) -> str:
        brokers = self.brokers()
        up = [b for b in brokers if b not in exclude] or brokers
        return ",".join(f"127.0.0.1:{self.nodes[b].host_port}" for b in up)

    def _status(self, node_id: int) -> str:
        status: str = self._container(node_id).status
        return status

    async def alive(self, node_id: int) -> bool:
        return await to_thread(self._status, node_id) in ("running", "paused", "restarting")

    # -- faults ------------------------------------------------------------------------------

    def _kill(self, node_id: int) -> None:
        container = self._container(node_id)
        container.kill()  # SIGKILL
        deadline = time.monotonic() + 30
        while container.status not in ("exited", "dead"):
            if time.monotonic() > deadline:
                raise HarnessError(f"{self.node_name(node_id)} still {container.status} after kill")
            time.sleep(0.1)  # polling the daemon for a state, with a deadline
            container.reload()

    async def kill(self, node_id: int) -> dict[str, Any]:
        await to_thread(self._kill, node_id)
        return {
            "signal": "SIGKILL",
            "how": "container.kill()",
            "container": self.node_name(node_id),
        }

    def _health(self, node_id: int) -> str | None:
        container = self._container(node_id)
        health: str | None = container.attrs["State"].get("Health", {}).get("Status")
        return health if container.status == "running" else container.status

    async def start(self, node_id: int) -> dict[str, Any]:
        started = trio.current_time()
        await to_thread(lambda: self._container(node_id).start())
        try:
            with trio.fail_after(RESTART_TIMEOUT_S):
                while True:  # the daemon's health status has no event to wait on: poll it
                    if await to_thread(self._health, node_id) in ("healthy", None):
                        break
                    await trio.sleep(POLL_S)
        except trio.TooSlowError:
            raise HarnessError(
                f"{self.node_name(node_id)} not healthy {RESTART_TIMEOUT_S:g} s after start"
            ) from None
        return {"how": "container.start()", "container": self.node_name(node_id),
                "healthy_after_s": round(trio.current_time() - started, 1)}  # fmt: skip

    async def pause(self, node_id: int) -> dict[str, Any]:
        await to_thread(lambda: self._container(node_id).pause())
        return {"how": "container.pause()", "container": self.node_name(node_id)}

    async def resume(self, node_id: int) -> dict[str, Any]:
        def unpause() -> bool:
            container = self._container(node_id)
            if container.status != "paused":
                return False
            container.unpause()
            return True

        done = await to_thread(unpause)
        return {"how": "container.unpause()" if done else "not paused",
                "container": self.node_name(node_id)}  # fmt: skip

    def _network(self) -> Any:
        return self.client.networks.get(self.network)

    async def cut(self, side: list[int], other: list[int]) -> dict[str, Any]:
        """Every node of `side` off the compose network: cut from `other`, and from everything
        else too (the host's published port included)."""
        for node_id in side:
            self._cut[node_id] = await to_thread(self._disconnect, node_id)
        return {"how": f"disconnected from the network {self.network}",
                "disconnected": [self.node_name(n) for n in side]}  # fmt: skip

    def _disconnect(self, node_id: int) -> list[str]:
        container = self._container(node_id)
        endpoint = container.attrs["NetworkSettings"]["Networks"].get(self.network) or {}
        # Docker adds the short container id itself on connect.
        aliases = [a for a in endpoint.get("Aliases") or [] if a != container.id[:12]]
        aliases = aliases or [self.node_name(node_id)]
        self._network().disconnect(container)
        return aliases

    def _reconnect(self, node_id: int, aliases: list[str]) -> None:
        # Under its names again (the service's, and broker-N for the zk profile's brokers):
        # the other nodes find it by them.
        self._network().connect(self._container(node_id), aliases=aliases)

    async def heal_network(self) -> bool:
        if not self._cut:
            return False
        for node_id, aliases in list(self._cut.items()):
            await to_thread(self._reconnect, node_id, aliases)
            del self._cut[node_id]
        return True

    def _address(self, node_id: int) -> str | None:
        networks = self._container(node_id).attrs["NetworkSettings"]["Networks"]
        address: str | None = (networks.get(self.network) or {}).get("IPAddress") or None
        return address

    def _probe(self, a: int, b: int) -> bool:
        if self.nodes[a].role == "zookeeper":
            raise HarnessError("probes run in a broker's or a controller's container")
        target = self._address(b)
        if target is None:
            return False  # b is off the network itself
        code = (
            "import socket, sys\n"
            "try:\n"
            "    socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()\n"
            "except OSError:\n"
            "    sys.exit(1)\n"
        )
        result = self._container(a).exec_run(
            ["python", "-c", code, target, str(self.nodes[b].port)]
        )
        return bool(result.exit_code == 0)

    async def probe(self, a: int, b: int) -> bool:
        ok: bool = await to_thread(self._probe, a, b)
        return ok

    # -- the Raft quorum -----------------------------------------------------------------------

    def _quorum_leader(self) -> int:
        controllers = self.controllers()
        voters = self.nodes[controllers[0]].settings.get("controller.quorum.voters", "")
        bootstrap = ",".join(v.partition("@")[2] for v in voters.split(",") if "@" in v)
        errors = []
        for node_id in [*controllers, *self.brokers()]:  # any container that runs now
            container = self._container(node_id)
            if container.status != "running" or node_id in self._cut:
                continue
            result = container.exec_run(["timeout", str(EXEC_TIMEOUT_S), "trioka", "quorum",
                                         "describe", "--bootstrap-controller", bootstrap,
                                         "--json", "--timeout", "2"])  # fmt: skip
            if result.exit_code == 0:
                return int(json.loads(result.output)["leader_id"])
            errors.append(f"{self.node_name(node_id)}: {result.output.decode()[-200:].strip()}")
        raise HarnessError(f"no quorum leader found: {'; '.join(errors) or 'no running node'}")

    async def raft_leader(self) -> int:
        leader: int = await to_thread(self._quorum_leader)
        return leader


class DockerCluster:
    """The compose cluster of one profile for a chaos run: one already up is used as it is
    (and left up); otherwise `docker-compose --profile MODE up -d` brings it up and the run
    takes down what it started (`down -v` when the project had nothing before)."""

    def __init__(self, settings: DockerSettings, *, mode: str, session_timeout_ms: int,
                 timeout: float = 180.0, say: Callable[[str], None] = print) -> None:  # fmt: skip
        self.settings = settings
        self.mode = mode
        self.compose_file = Path(settings.compose_file).resolve()
        self.project = settings.project or default_project(self.compose_file)
        self.docker_host = settings.docker_host or default_docker_host()
        self.requested_session_timeout_ms = session_timeout_ms
        self.timeout = timeout
        self.say = say
        self.client: Any = None
        self.reused = False
        self._before: dict[str, str] = {}
        """Service -> container status, before this run did anything."""
        self._started: list[str] = []
        self.control: DockerControl | None = None

    @property
    def where(self) -> str:
        return f"compose project {self.project} (profile {self.mode}, {self.docker_host})"

    def client_config(self) -> dict[str, str]:
        return {}  # the compose brokers' EXTERNAL listeners are PLAINTEXT

    # -- what is there --------------------------------------------------------------------------

    def _containers(self) -> list[Any]:
        return list(self.client.containers.list(
            all=True, filters={"label": f"com.docker.compose.project={self.project}"}))  # fmt: skip

    def _nodes(self) -> dict[int, DockerNode]:
        nodes = {}
        for container in self._containers():
            node = node_of(container.attrs)
            if node is not None and (node.role != "broker" or node.mode == self.mode):
                nodes[node.node_id] = node
        return nodes

    def _inspect(self) -> None:
        if not self.compose_file.is_file():
            raise HarnessError(f"no compose file at {self.compose_file} (--compose-file)")
        self.client = _docker_client(self.docker_host)
        containers = self._containers()
        self._before = {
            c.labels.get("com.docker.compose.service", c.name): c.status for c in containers
        }
        others = {node.service for c in containers if (node := node_of(c.attrs)) is not None
                  and node.role == "broker" and node.mode != self.mode}  # fmt: skip
        if others:
            other = {"zk" if self.mode == "raft" else "raft"}
            raise HarnessError(
                f"compose project {self.project} runs the {other} profile "
                f"({', '.join(sorted(others))}), not {self.mode}: take it down first "
                f"(docker-compose -p {self.project} --profile {other} down -v) or use "
                "another --project-name"
            )
        nodes = self._nodes()
        roles = {n.role for n in nodes.values()}
        wanted = {"broker", "controller" if self.mode == "raft" else "zookeeper"}
        self.reused = (
            bool(nodes)
            and roles == wanted
            and all(self._before.get(n.service) == "running" for n in nodes.values())
        )

    async def inspect(self) -> None:
        """Connects to the daemon (HarnessError naming what is missing) and looks at the
        project's containers: all of the profile running means reused."""
        await to_thread(self._inspect)

    @property
    def session_timeout_ms(self) -> int:
        """The session timeout the cluster runs with: a reused cluster's own (from its nodes'
        settings, Kafka's default when unset), else the one this run brings it up with."""
        if not self.reused:
            return self.requested_session_timeout_ms
        nodes = self._nodes().values()
        if self.mode == "zk":
            values = [n.settings.get("zookeeper.session.timeout.ms") for n in nodes]
            default = KAFKA_ZK_SESSION_TIMEOUT_MS
        else:
            values = [n.settings.get("broker.session.timeout.ms") for n in nodes
                      if n.role == "controller"]  # fmt: skip
            default = KAFKA_BROKER_SESSION_TIMEOUT_MS
        return max((int(v) for v in values if v), default=default)

    # -- up and down ----------------------------------------------------------------------------

    def _compose(self, *args: str, timeout: float) -> None:
        cmd = ["docker-compose", "-f", str(self.compose_file), "-p", self.project,
               "--profile", self.mode, *args]  # fmt: skip
        env = {**os.environ, "DOCKER_HOST": self.docker_host,
               **compose_env(self.requested_session_timeout_ms)}  # fmt: skip
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HarnessError(f"{' '.join(cmd)}: {exc}") from None
        if done.returncode != 0:
            raise HarnessError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-2000:]}")

    def _health(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for container in self._containers():
            node = node_of(container.attrs)
            if node is not None and (node.role != "broker" or node.mode == self.mode):
                out[node.service] = container.attrs["State"].get("Health", {}).get("Status")
        return out

    async def up(self) -> str:
        """The brokers' bootstrap (their published 127.0.0.1 ports) once every node of the
        profile is healthy."""
        if self.reused:
            self.say(f"cluster: using the compose cluster already up: {self.where}; it stays up")
        else:
            self.say(f"cluster: docker-compose up: {self.where}")
            self._started = [s for s, status in self._before.items() if status != "running"]
            await to_thread(self._compose, "up", "-d", timeout=self.timeout)
            after = await to_thread(self._health)
            self._started = sorted({*self._started, *(s for s in after if s not in self._before)})
        try:
            with trio.fail_after(self.timeout):
                while True:
                    health = await to_thread(self._health)
                    if health and all(h == "healthy" for h in health.values()):
                        break
                    await trio.sleep(POLL_S)
        except trio.TooSlowError:
            raise HarnessError(
                f"the compose cluster was not healthy within {self.timeout:g} s: {health}"
            ) from None
        nodes = await to_thread(self._nodes)
        network = await to_thread(self._network_name, nodes)
        self.control = DockerControl(self.client, self.mode, nodes, network)
        return self.control.broker_bootstrap()

    def _network_name(self, nodes: Mapping[int, DockerNode]) -> str:
        some = next(iter(nodes.values()))
        networks = self.client.containers.get(some.container_id).attrs["NetworkSettings"]
        names = list(networks["Networks"])
        if len(names) != 1:
            raise HarnessError(f"{some.service} is on networks {names}; expected the project's")
        return names[0]

    async def down(self) -> None:
        """Take down only what this run started (nothing when it reused a cluster)."""
        if self.client is None or self.reused or not self._started:
            return
        if not self._before:  # the project was empty: containers, network and volumes
            await to_thread(self._compose, "down", "-v", "--timeout", "10", timeout=300)
        else:
            await to_thread(self._compose, "stop", "--timeout", "10", *self._started,
                            timeout=300)  # fmt: skip
        self.say(f"compose cluster down ({', '.join(self._started)})")

    def nemesis(self, history: History, *, topic: str, seed: int,
                acks: Acknowledgements | None = None,
                proxies: ProxySet | None = None) -> Nemesis:  # fmt: skip
        if self.control is None:
            raise HarnessError("the compose cluster is not up")
        if proxies is not None:
            raise HarnessError("the compose cluster runs without the fault proxies")
        return Nemesis(self.control, history, topic=topic, seed=seed, acks=acks)
