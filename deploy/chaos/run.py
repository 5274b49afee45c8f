"""`trioka chaos run`: one chaos run, start to verdict, against a local cluster of its own or
(`docker=DockerSettings(...)`) the compose cluster (deploy.chaos.docker).

    result = trio.run(run_chaos, RunConfig(mode="raft", nemeses=("kill", "pause"),
                                           time_limit_s=30, seed=7))
    result.exit_code      # 0 valid, 1 anomalies, 2 harness error
    result.verdict        # what verdict.json holds

The run: the schedule (printed), a cluster (deploy.chaos.local.LocalCluster, behind fault
proxies when a nemesis or --drop-produce-responses needs them; or the compose cluster), the topic (RF 3, min.insync.replicas=2 unless told
otherwise), workload + nemesis until the time limit, everything healed, a wait (with a
deadline) until every partition has a leader and its full ISR, final reads from the beginning,
then history.jsonl and verdict.json in the output directory, the human summary, the history
shipped to `__trioka_chaos_history`, and the cluster torn down (unless keep; a compose cluster
that was already up stays up). One nursery: a Ctrl-C or an error cancels the clients and the
nemesis, and the cluster still goes down. The nemesis is deploy.chaos.nemesis.Nemesis over the
cluster's backend (processes or containers): one scheduler for both.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import structlog
import trio

from client import Admin, Producer
from client.admin import NewTopic
from client.metadata import PartitionInfo
from deploy.chaos.check import availability
from deploy.chaos.check.checker import check
from deploy.chaos.check.history import History
from deploy.chaos.check.history_files import history_records, write_history
from deploy.chaos.docker import DOCKER_UNSUPPORTED, DockerCluster, DockerSettings
from deploy.chaos.local import LocalCluster
from deploy.chaos.nemesis import (
    Acknowledgements,
    HarnessError,
    Nemesis,
    check_nemeses_available,
)
from deploy.chaos.schedule import (
    NETNS_NEMESES,
    PROXY_NEMESES,
    ClusterShape,
    Schedule,
    parse_nemeses,
    plan_schedule,
)
from deploy.chaos.workload import Workload, WorkloadConfig, final_reads
from deploy.cluster import netns
from deploy.cluster.node_configs import EXTERNAL_LISTENER, INTERNAL_LISTENER
from deploy.cluster.proxy import ProxySet
from deploy.cluster.proxy_policy import ProxyPolicy
from deploy.cluster.zookeeper import free_port
from protocol.errors import TriokaError
from protocol.messages import ApiKey
from protocol.telemetry import CHAOS_HISTORY_TOPIC

log = structlog.get_logger("trioka.chaos")

__all__ = ["HISTORY_TOPIC", "RunConfig", "RunResult", "run_chaos"]

HISTORY_TOPIC = CHAOS_HISTORY_TOPIC
HOST = "127.0.0.1"


@dataclass(frozen=True)
class RunConfig:
    mode: str = "raft"
    nemeses: tuple[str, ...] = ("kill", "pause", "controller")
    time_limit_s: float = 30.0
    seed: int = 0
    dir: Path | None = None
    """The cluster's directory (default: a new temporary one)."""
    out: Path | None = None
    """Where history.jsonl and verdict.json go (default: <dir>/results)."""
    topic: str = "chaos"
    partitions: int = 6
    replication_factor: int = 3
    brokers: int = 3
    controllers: int = 3
    producers: int = 2
    readers: int = 1
    """Consumers by assignment (every partition from the beginning) during the run."""
    group_members: int = 2
    """Consumers in the group during the run."""
    rate: float = 150.0
    idempotence: bool = True
    overrides: Mapping[str, str] = field(default_factory=dict)
    """Settings for every broker (and the controllers that know them)."""
    topic_configs: Mapping[str, str] = field(default_factory=lambda: {"min.insync.replicas": "2"})
    session_timeout_ms: int = 3000
    drop_produce_responses: float = 0.0
    """> 0: the brokers' proxies swallow that share of produce responses all run long."""
    keep: bool = False
    secure: bool = False
    """The local cluster with TLS and SCRAM everywhere (`trioka cluster up --secure`)."""
    heal_timeout_s: float = 90.0
    final_read_timeout_s: float = 60.0
    cluster_timeout_s: float = 90.0
    docker: DockerSettings | None = None
    """Run against the compose cluster (its profile: `mode`) instead of a local one."""


class ChaosCluster(Protocol):
    """Where a run's cluster comes from (deploy.chaos.local.LocalCluster,
    deploy.chaos.docker.DockerCluster)."""

    @property
    def where(self) -> str: ...

    async def up(self) -> str:
        """Ready to serve; returns the brokers' bootstrap.servers."""
        ...

    def client_config(self) -> dict[str, str]:
        """Client settings for those brokers once up (security; {} for PLAINTEXT)."""
        ...

    async def down(self) -> None:
        """Take down what up() started."""
        ...

    def nemesis(self, history: History, *, topic: str, seed: int,
                acks: Acknowledgements | None = None,
                proxies: ProxySet | None = None) -> Nemesis: ...  # fmt: skip


@dataclass
class RunResult:
    exit_code: int
    verdict: dict[str, Any]
    summary: str
    out: Path | None = None
    dir: Path | None = None


def _needs_proxies(config: RunConfig) -> bool:
    return bool(PROXY_NEMESES & set(config.nemeses)) or config.drop_produce_responses > 0


def netns_available() -> bool:
    """Network nemeses need per-node network namespaces (deploy.cluster.netns: root, ip, iptables)."""
    reason = netns.available()
    if reason is not None:
        log.info("network namespaces not available", reason=reason)
    return reason is None


def _needs_netns(config: RunConfig) -> bool:
    return bool(NETNS_NEMESES & set(config.nemeses))


def _check_docker(config: RunConfig, nemeses: tuple[str, ...]) -> None:
    for name in nemeses:
        if name in DOCKER_UNSUPPORTED:
            raise HarnessError(f"nemesis {name!r} is not available with --docker: "
                               f"{DOCKER_UNSUPPORTED[name]}")  # fmt: skip
    if config.drop_produce_responses > 0:
        raise HarnessError(
            "--drop-produce-responses is not available with --docker: it needs the fault "
            "proxies in front of the brokers"
        )


def plan(config: RunConfig) -> Schedule:
    """The run's schedule; ValueError / HarnessError naming what cannot be done."""
    nemeses = parse_nemeses(config.nemeses, config.mode)
    if config.docker is not None:
        # Containers are cut by Docker's network API: no namespaces, no proxies.
        _check_docker(config, nemeses)
        return plan_schedule(config.seed, nemeses, config.time_limit_s, _shape(config))
    if config.secure and _needs_proxies(config):
        raise HarnessError(
            "a --secure run cannot have the fault proxies (latency, --drop-produce-responses): "
            "they read the Kafka frames, which TLS hides"
        )
    if NETNS_NEMESES & set(nemeses) and _needs_proxies(config):
        raise HarnessError(
            "a run cannot have network nemeses (partition, zk-expiry) and the fault proxies "
            "(latency, --drop-produce-responses) together yet: run them separately"
        )
    check_nemeses_available(
        nemeses,
        netns=not (NETNS_NEMESES & set(nemeses)) or netns_available(),
        proxies=True,
    )
    return plan_schedule(config.seed, nemeses, config.time_limit_s, _shape(config))


def _shape(config: RunConfig) -> ClusterShape:
    return ClusterShape(config.mode, config.brokers, config.controllers, config.partitions,
                        config.session_timeout_ms / 1000)  # fmt: skip


async def run_chaos(config: RunConfig, say: Callable[[str], None] = print) -> RunResult:
    """One run; harness errors (bad settings, a cluster that never came up or healed) are a
    RunResult with exit code 2, never an exception (Ctrl-C still cancels)."""
    docker: DockerCluster | None = None
    try:
        if config.docker is not None:
            _check_docker(config, parse_nemeses(config.nemeses, config.mode))  # before the daemon
            docker = DockerCluster(config.docker, mode=config.mode, say=say,
                                   session_timeout_ms=config.session_timeout_ms,
                                   timeout=max(config.cluster_timeout_s, 180.0))  # fmt: skip
            await docker.inspect()
            # A compose cluster already up keeps its own session timeout: the pauses follow it.
            config = replace(config, session_timeout_ms=docker.session_timeout_ms)
        schedule = plan(config)
    except (ValueError, HarnessError) as exc:
        return RunResult(2, {"error": str(exc)}, f"chaos run refused: {exc}")
    say(schedule.describe())
    base = Path(config.dir) if config.dir else Path(tempfile.mkdtemp(prefix="trioka-chaos-"))
    out = Path(config.out) if config.out else base / "results"
    run = _Run(config, schedule, base.resolve(), out, say, docker)
    try:
        return await run.run()
    except Exception as exc:  # any harness failure: exit code 2, with the reason
        log.exception("chaos run failed")
        return RunResult(2, {"error": str(exc), **run.stats}, f"chaos run failed: {exc}",
                         out, base)  # fmt: skip


class _Run:
    def __init__(self, config: RunConfig, schedule: Schedule, base: Path, out: Path,
                 say: Callable[[str], None], docker: DockerCluster | None) -> None:  # fmt: skip
        self.config, self.schedule, self.base, self.out, self.say = (
            config, schedule, base, out, say)  # fmt: skip
        self.docker = docker
        self.topic = config.topic
        self.history = History()
        self.proxies: ProxySet | None = None
        self.client: dict[str, str] = {}
        """The cluster's client settings (security), known once it is up."""
        self.stats: dict[str, Any] = {
            "mode": config.mode,
            "seed": config.seed,
            "nemeses": list(schedule.nemeses),
            "time_limit_s": config.time_limit_s,
            "schedule": schedule.to_json(),
            "idempotence": config.idempotence,
            "topic_configs": dict(config.topic_configs),
            "overrides": dict(config.overrides),
            "cluster_dir": str(base),
            "session_timeout_ms": config.session_timeout_ms,
        }
        if docker is not None:
            self.stats["docker"] = {"project": docker.project, "profile": config.mode,
                                    "reused": docker.reused}  # fmt: skip

    async def run(self) -> RunResult:
        async with trio.open_nursery() as nursery:
            per_broker = await self._start_proxies(nursery) if _needs_proxies(self.config) else {}
            cluster = self._cluster(per_broker)
            try:
                bootstrap = await cluster.up()
                self.client = cluster.client_config()
                result = await self._run_on(cluster, bootstrap)
            finally:
                with trio.CancelScope(shield=True):
                    await self._teardown(cluster)
            nursery.cancel_scope.cancel()  # the proxies
        return result

    def _cluster(self, per_broker: Mapping[int, Mapping[str, str]]) -> ChaosCluster:
        if self.docker is not None:
            return self.docker
        c = self.config
        return LocalCluster(self.base, mode=c.mode, brokers=c.brokers, controllers=c.controllers,
                            session_timeout_ms=c.session_timeout_ms, overrides=c.overrides,
                            broker_overrides=per_broker, netns=_needs_netns(c),
                            timeout=c.cluster_timeout_s, say=self.say,
                            secure=c.secure)  # fmt: skip

    async def _start_proxies(self, nursery: trio.Nursery) -> dict[int, dict[str, str]]:
        brokers = range(1, self.config.brokers + 1)
        ports = {n: free_port(HOST) for n in brokers}
        internal = {n: free_port(HOST) for n in brokers}
        self.proxies = ProxySet({n: (HOST, p) for n, p in ports.items()}, host=HOST,
                                rng=random.Random(self.config.seed),
                                listener_name=EXTERNAL_LISTENER,
                                internal_targets={n: (HOST, p) for n, p in internal.items()},
                                internal_listener_name=INTERNAL_LISTENER)  # fmt: skip
        await self.proxies.start(nursery)
        return {
            n: {
                "listeners": f"{EXTERNAL_LISTENER}://{HOST}:{ports[n]},"
                f"{INTERNAL_LISTENER}://{HOST}:{internal[n]}",
                **adv,
            }
            for n, adv in self.proxies.advertised_overrides().items()
        }

    async def _teardown(self, cluster: ChaosCluster) -> None:
        if self.config.keep:
            self.say(f"cluster kept running: {cluster.where}")
            return
        await cluster.down()

    async def _run_on(self, cluster: ChaosCluster, bootstrap: str) -> RunResult:
        c = self.config
        await self._create_topic(bootstrap)
        await self._wait_healthy(bootstrap, 60)
        epochs_start = {p: i.leader_epoch for p, i in (await self._partitions(bootstrap)).items()}
        workload = Workload(bootstrap, self.history, WorkloadConfig(
            topic=self.topic, partitions=c.partitions, producers=c.producers, rate=c.rate,
            assigned_consumers=c.readers, group_consumers=c.group_members,
            idempotence=c.idempotence, session_timeout_ms=max(6000, c.session_timeout_ms * 2),
            client=self.client,
        ))  # fmt: skip
        nemesis = cluster.nemesis(self.history, topic=self.topic, seed=c.seed, acks=workload,
                                  proxies=self.proxies)  # fmt: skip
        self._drop_responses(on=True)
        await self._chaos(workload, nemesis)
        self._drop_responses(on=False)
        await self._heal(nemesis, bootstrap)
        ends = await final_reads(bootstrap, self.history, self.topic, c.partitions,
                                 within=c.final_read_timeout_s, client=self.client)  # fmt: skip
        partitions_end = await self._partitions(bootstrap)
        self._record_cluster_stats(epochs_start, partitions_end, ends, workload, nemesis)
        return await self._verdict(bootstrap)

    async def _chaos(self, workload: Workload, nemesis: Nemesis) -> None:
        self.say(f"workload + nemesis for {self.config.time_limit_s:g} s")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            t0 = trio.current_time()
            with trio.move_on_at(t0 + self.config.time_limit_s):
                await nemesis.run(self.schedule, t0)
                await trio.sleep_until(t0 + self.config.time_limit_s)
            nursery.cancel_scope.cancel()

    def _drop_responses(self, *, on: bool) -> None:
        p = self.config.drop_produce_responses
        if self.proxies is None or p <= 0:
            return
        policy = ProxyPolicy(drop_responses=frozenset({int(ApiKey.PRODUCE)}), drop_probability=p)
        self.proxies.set_policy(policy if on else ProxyPolicy())

    async def _heal(self, nemesis: Nemesis, bootstrap: str) -> None:
        self.say("healing")
        done = await nemesis.heal_all()
        start = trio.current_time()
        try:
            await self._wait_healthy(bootstrap, self.config.heal_timeout_s)
        except trio.TooSlowError:
            raise HarnessError(
                f"the cluster did not heal within {self.config.heal_timeout_s:g} s (a leader "
                "and the full ISR for every partition)"
            ) from None
        self.stats["heal"] = {
            "done": done,
            "healthy_after_s": round(trio.current_time() - start, 1),
        }

    # -- the cluster ----------------------------------------------------------------------------

    def _admin(self, bootstrap: str) -> Admin:
        return Admin({**self.client, "bootstrap.servers": bootstrap,
                      "default.api.timeout.ms": 10000,
                      "request.timeout.ms": 3000,
                      "socket.connection.setup.timeout.ms": 1000})  # fmt: skip

    async def _create_topic(self, bootstrap: str) -> None:
        """The run's topic; a cluster that already has one of that name (a compose cluster
        used before) gets a new one, so the history holds this run's values only."""
        c = self.config
        async with self._admin(bootstrap) as admin:
            if self.topic in await admin.list_topics():
                self.topic = f"{c.topic}-{time.time_ns() // 1_000_000}"
                self.say(f"topic {c.topic} exists already: this run writes {self.topic}")
            await admin.create_topics([NewTopic(self.topic, c.partitions, c.replication_factor,
                                                dict(c.topic_configs))])  # fmt: skip
        self.stats["topic"] = self.topic

    async def _partitions(self, bootstrap: str) -> dict[int, PartitionInfo]:
        async with self._admin(bootstrap) as admin:
            (topic,) = await admin.describe_topics([self.topic])
        return {p.partition: p for p in topic.partitions}

    async def _wait_healthy(self, bootstrap: str, within: float) -> None:
        """Every partition has a leader and its whole replica set in the ISR."""
        with trio.fail_after(within):
            while True:
                try:
                    parts = await self._partitions(bootstrap)
                    if len(parts) == self.config.partitions and all(
                        p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts.values()
                    ):
                        return
                except (TriokaError, OSError):
                    pass
                await trio.sleep(0.2)

    def _record_cluster_stats(self, epochs_start: Mapping[int, int],
                              end: Mapping[int, PartitionInfo], ends: Mapping[Any, int],
                              workload: Workload, nemesis: Nemesis) -> None:  # fmt: skip
        changed = {p: end[p].leader_epoch - e for p, e in epochs_start.items()
                   if end[p].leader_epoch > e}  # fmt: skip
        self.stats.update(
            leader_changes=len(changed),
            leader_epoch_increase=sum(changed.values()),
            leader_epochs={"start": dict(epochs_start),
                           "end": {p: i.leader_epoch for p, i in end.items()}},
            end_offsets={str(tp): o for tp, o in ends.items()},
            operations=dict(workload.counts),
            acknowledged_per_partition=dict(workload.acked),
            faults=nemesis.stats.to_json(),
        )  # fmt: skip
        if self.proxies is not None:
            self.stats["proxies"] = self.proxies.totals()

    # -- the verdict --------------------------------------------------------------------------

    async def _verdict(self, bootstrap: str) -> RunResult:
        result = check(self.history)
        gaps = availability.summarize(availability.unavailability(self.history))
        self.out.mkdir(parents=True, exist_ok=True)
        write_history(self.history, self.out / "history.jsonl")
        self.stats["shipped"] = await self._ship(bootstrap)
        verdict = {**result.to_json(), "unavailability": gaps, "run": self.stats}
        (self.out / "verdict.json").write_text(json.dumps(verdict, indent=2, default=str) + "\n")
        s = self.stats
        summary = (
            f"{result.summary()}\n"
            f"run: {s['mode']} seed {s['seed']} nemeses {','.join(s['nemeses']) or '-'}; "
            f"faults {s['faults']['injected']} ({s['faults']['failed']} failed), verified "
            f"{s['faults']['verified']}; leader changes {s['leader_changes']} "
            f"(epochs +{s['leader_epoch_increase']}); history and verdict in {self.out}\n"
            f"{availability.describe(gaps)}"
        )
        self.say(summary)
        return RunResult(0 if result.valid else 1, verdict, summary, self.out, self.base)

    async def _ship(self, bootstrap: str) -> dict[str, Any]:
        """The history into HISTORY_TOPIC (created if missing) for the analytics job; a failure
        is reported in the verdict, it does not change the run's outcome."""
        try:
            with trio.fail_after(60):
                async with self._admin(bootstrap) as admin:
                    if HISTORY_TOPIC not in await admin.list_topics(include_internal=True):
                        rf = min(3, self.config.brokers)
                        await admin.create_topics([NewTopic(HISTORY_TOPIC, 1, rf, {})])
                async with Producer({**self.client, "bootstrap.servers": bootstrap, "acks": "all",
                                     "linger.ms": 20}) as producer:  # fmt: skip
                    futures = [
                        await producer.send(HISTORY_TOPIC, value, key)
                        for key, value in history_records(self.history)
                    ]
                    await producer.flush()
                    for f in futures:
                        await f
            return {"topic": HISTORY_TOPIC, "records": len(futures)}
        except (TriokaError, OSError, trio.TooSlowError) as exc:
            log.warning("chaos history not shipped", error=str(exc))
            return {"topic": HISTORY_TOPIC, "error": str(exc)}
