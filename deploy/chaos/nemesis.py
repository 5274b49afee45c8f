"""The nemesis of `trioka chaos run`: it resolves each scheduled fault's target against the
live cluster, does the fault, waits its duration, heals it, and records every step as a nemesis
op (deploy.chaos.check.history.NemesisValue) with what it did (node, pid or container, verified cut,
...). What it does to nodes goes through a `NodeControl` backend, one per way of running a
cluster: local processes (deploy.chaos.local.LocalControl: signals by pid, iptables in network
namespaces) or the compose cluster's containers (deploy.chaos.docker.DockerControl: the Docker
SDK's kill/start, pause/unpause, network disconnect/connect). The scheduler and the faults are
this module's, shared by both.

    nemesis = Nemesis(LocalControl(cluster_dir), history, topic="chaos", seed=7, acks=workload)
    await nemesis.run(schedule, t0)     # one fault after another, at their start times
    await nemesis.heal_all()            # whatever is still broken: restart, resume, heal
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import trio

from client import Admin
from client.metadata import PartitionInfo
from deploy.chaos.check.history import History, NemesisValue
from deploy.chaos.schedule import (
    NETNS_NEMESES,
    PROXY_NEMESES,
    Action,
    Fault,
    Schedule,
    Selector,
)
from deploy.cluster.proxy import ProxySet
from deploy.cluster.proxy_policy import Delay, ProxyPolicy
from protocol.errors import TriokaError

log = structlog.get_logger("trioka.chaos")

__all__ = [
    "HarnessError",
    "Nemesis",
    "NemesisStats",
    "NodeControl",
    "check_nemeses_available",
]

RESTART_TIMEOUT_S = 60.0
UNCLEAN_WRITES = 20
"""Writes the leader alone acknowledges before it is killed (some were in flight when the ISR
shrank and may have reached a follower: count enough)."""


class Acknowledgements(Protocol):
    """What the nemesis needs of the workload (deploy.chaos.workload.Workload)."""

    acked: Mapping[int, int]
    """Acknowledged sends per partition so far."""

    async def wait_acked(self, partition: int, count: int) -> None: ...


class NodeControl(Protocol):
    """What the nemesis does to nodes, by node id (brokers 1..N, controllers 3001.., 0 for
    ZooKeeper). Each fault method returns what it did, for the nemesis op's detail (the local
    backend: signal and pid; Docker: the container). Blocking work runs off the trio thread."""

    mode: str
    """"raft" or "zk"."""

    def brokers(self) -> list[int]: ...

    def controllers(self) -> list[int]:
        """The Raft quorum's voters (none in zk mode)."""
        ...

    def metadata_nodes(self) -> list[int]:
        """What brokers keep their sessions with: [0] (ZooKeeper) or the controllers."""
        ...

    def node_name(self, node_id: int) -> str: ...

    def broker_bootstrap(self, exclude: Collection[int] = ()) -> str:
        """bootstrap.servers of the brokers but `exclude` (all of them when none is left)."""
        ...

    def client_config(self) -> dict[str, str]:
        """Client settings for those brokers (security; {} for PLAINTEXT)."""
        ...

    async def raft_leader(self) -> int:
        """The Raft quorum's leader (DescribeQuorum), -1 when none answers."""
        ...

    async def alive(self, node_id: int) -> bool:
        """Running, paused included (a killed node is not)."""
        ...

    async def kill(self, node_id: int) -> dict[str, Any]: ...

    async def start(self, node_id: int) -> dict[str, Any]:
        """Start a killed node again; returns once it serves (within RESTART_TIMEOUT_S)."""
        ...

    async def pause(self, node_id: int) -> dict[str, Any]: ...

    async def resume(self, node_id: int) -> dict[str, Any]:
        """Resume a paused node (nothing for one that is not paused)."""
        ...

    async def cut(self, side: list[int], other: list[int]) -> dict[str, Any]:
        """Cut `side` from `other` (at least: a backend may cut `side` from everything)."""
        ...

    async def heal_network(self) -> bool:
        """Undo every cut; False when there was none."""
        ...

    async def probe(self, a: int, b: int) -> bool:
        """Can node `a` open a TCP connection to node `b`'s listener?"""
        ...


class HarnessError(TriokaError):
    """The chaos harness could not do its part (not the cluster's fault): exit code 2."""


def check_nemeses_available(nemeses: tuple[str, ...], *, netns: bool, proxies: bool) -> None:
    """HarnessError naming a nemesis this run cannot do."""
    for name in nemeses:
        if name in NETNS_NEMESES and not netns:
            raise HarnessError(
                f"nemesis {name!r} cuts the network between nodes: it needs per-node network "
                "namespaces (deploy.cluster.netns: root, ip and iptables), which are not available here"
            )
        if name in PROXY_NEMESES and not proxies:
            raise HarnessError(f"nemesis {name!r} needs the fault proxies (deploy.cluster.proxy)")


@dataclass
class NemesisStats:
    injected: int = 0
    healed: int = 0
    failed: int = 0
    by_nemesis: dict[str, int] = field(default_factory=dict)
    verified: dict[str, int] = field(default_factory=dict)
    """Per check ("leader-moved", "isr-shrunk", "cut", ...): how many times it held."""

    def to_json(self) -> dict[str, Any]:
        return {
            "injected": self.injected,
            "healed": self.healed,
            "failed": self.failed,
            "by_nemesis": dict(self.by_nemesis),
            "verified": dict(self.verified),
        }


async def to_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A blocking backend call (signals and /proc, docker's HTTP API) off the trio thread."""
    return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))


class Nemesis:
    def __init__(
        self,
        control: NodeControl,
        history: History,
        *,
        topic: str,
        seed: int,
        acks: Acknowledgements | None = None,
        proxies: ProxySet | None = None,
    ) -> None:
        self.control = control
        self.history = history
        self.topic = topic
        self.rng = random.Random(seed ^ 0x5EED)
        self.acks = acks
        """The workload's acknowledgements: UNCLEAN waits for writes the leader takes alone."""
        self.proxies = proxies
        self.stats = NemesisStats()
        self._down: set[int] = set()
        """Brokers this nemesis has stopped or killed now: left out of its own requests (a
        paused broker would hold them until request.timeout.ms)."""

    # -- the schedule ------------------------------------------------------------------------

    async def run(self, schedule: Schedule, t0: float) -> None:
        """Each fault at `t0 + start_s` (trio time), healed after its duration. A fault that
        cannot be done (no leader to pause, a node that will not restart) is recorded with its
        error and the schedule goes on."""
        for fault in schedule.faults:
            await trio.sleep_until(t0 + fault.start_s)
            try:
                await self.apply(fault)
            except (TriokaError, OSError, trio.TooSlowError) as exc:
                self.stats.failed += 1
                log.warning("nemesis fault failed", fault=fault.describe(), error=str(exc))
                self.record(fault.nemesis, (), {"fault": fault.describe()}, error=str(exc))

    async def apply(self, fault: Fault) -> None:
        self.stats.injected += 1
        self.stats.by_nemesis[fault.nemesis] = self.stats.by_nemesis.get(fault.nemesis, 0) + 1
        if fault.action is Action.KILL:
            await self._kill(fault)
        elif fault.action is Action.PAUSE:
            await self._pause(fault)
        elif fault.action is Action.DELAY:
            await self._delay(fault)
        elif fault.action is Action.UNCLEAN:
            await self._unclean(fault)
        elif fault.action is Action.CUT:
            await self._cut(fault)
        else:
            raise HarnessError(f"nemesis {fault.nemesis!r} ({fault.action}) is not available")
        self.stats.healed += 1

    def record(self, fault: str, targets: tuple[str, ...], detail: Mapping[str, Any],
               error: str | None = None) -> None:  # fmt: skip
        self.history.nemesis(NemesisValue(fault, targets, dict(detail)), error=error)
        log.info("nemesis", fault=fault, targets=list(targets), error=error, detail=dict(detail))

    def verified(self, check: str) -> None:
        self.stats.verified[check] = self.stats.verified.get(check, 0) + 1

    # -- the cluster, as it is now ---------------------------------------------------------------

    def _admin(self, exclude: Collection[int] = ()) -> Admin:
        return Admin(
            {
                **self.control.client_config(),
                "bootstrap.servers": self.control.broker_bootstrap(self._down | set(exclude)),
                "default.api.timeout.ms": 5000,
                "request.timeout.ms": 3000,
                "socket.connection.setup.timeout.ms": 1000,
            }
        )

    async def partitions(self) -> dict[int, PartitionInfo]:
        async with self._admin() as admin:
            (topic,) = await admin.describe_topics([self.topic])
        return {p.partition: p for p in topic.partitions}

    async def _partition(self, partition: int) -> PartitionInfo:
        return (await self.partitions())[partition]

    async def _active_controller(self) -> int:
        if self.control.mode == "raft":
            return await self.control.raft_leader()
        async with self._admin() as admin:
            return (await admin.describe_cluster()).controller_id

    async def _live(self, nodes: list[int]) -> list[int]:
        return [n for n in nodes if await self.control.alive(n)]

    async def resolve(self, fault: Fault) -> int:
        """The node a KILL/PAUSE/UNCLEAN fault hits now."""
        selector = fault.selector
        if selector is Selector.RANDOM_BROKER:
            live = await self._live(self.control.brokers())
            if not live:
                raise HarnessError("no live broker to pick")
            return self.rng.choice(live)
        if selector is Selector.PARTITION_LEADER:
            assert fault.partition is not None
            leader = (await self._partition(fault.partition)).leader
            if leader < 0:
                raise HarnessError(f"{self.topic}-{fault.partition} has no leader now")
            return leader
        if selector is Selector.ACTIVE_CONTROLLER:
            active = await self._active_controller()
            if active < 0:
                raise HarnessError("no active controller now")
            return active
        if selector is Selector.QUORUM_FOLLOWER:
            leader = await self._active_controller()
            others = await self._live([c for c in self.control.controllers() if c != leader])
            if not others:
                raise HarnessError("no live quorum member other than the leader")
            return self.rng.choice(others)
        raise HarnessError(f"{selector} does not name one node")

    def _name(self, node_id: int) -> str:
        return self.control.node_name(node_id)

    # -- faults ------------------------------------------------------------------------------

    async def _kill(self, fault: Fault) -> None:
        node_id = await self.resolve(fault)
        before = await self._leaders_led_by(node_id)
        done = await self._stop(node_id, self.control.kill)
        self.record(fault.nemesis, (self._name(node_id),), {"action": "kill", **done,
                    "selector": fault.selector.value, "partition": fault.partition,
                    "leads": sorted(before)})  # fmt: skip
        await trio.sleep(fault.duration_s)
        await self._verify_moved(fault, node_id, before, "killed")
        await self._restart(fault.nemesis, node_id)

    async def _verify_moved(self, fault: Fault, node_id: int, led: set[int], how: str) -> None:
        """Count what the fault made happen: the partitions it led got new leaders, the
        active controller moved."""
        if led and await self._moved(led, node_id):
            self.verified(f"leader-moved-from-{how}")
        if fault.selector is Selector.ACTIVE_CONTROLLER:
            try:
                if await self._active_controller() not in (node_id, -1):
                    self.verified(f"controller-moved-from-{how}")
            except (TriokaError, OSError):
                pass

    async def _stop(self, node_id: int, how: Callable[[int], Any]) -> dict[str, Any]:
        """Kill or pause `node_id`, left out of the nemesis's own requests until it is back."""
        self._down.add(node_id)
        done: dict[str, Any] = await how(node_id)
        return done

    async def _resume(self, node_id: int) -> dict[str, Any]:
        done = await self.control.resume(node_id)
        self._down.discard(node_id)
        return done

    async def _restart(self, nemesis: str, node_id: int) -> None:
        done = await self.control.start(node_id)
        self._down.discard(node_id)
        self.record(nemesis, (self._name(node_id),), {"action": "restart", **done})

    async def _pause(self, fault: Fault) -> None:
        node_id = await self.resolve(fault)
        before = await self._leaders_led_by(node_id)
        done = await self._stop(node_id, self.control.pause)
        self.record(fault.nemesis, (self._name(node_id),), {"action": "pause", **done,
                    "selector": fault.selector.value, "partition": fault.partition,
                    "leads": sorted(before)})  # fmt: skip
        await trio.sleep(fault.duration_s)
        moved = await self._moved(before, node_id)
        await self._verify_moved(fault, node_id, before, "paused")
        done = await self._resume(node_id)
        self.record(fault.nemesis, (self._name(node_id),), {"action": "resume", **done,
                    "leadership_moved": sorted(moved)})  # fmt: skip

    async def _leaders_led_by(self, node_id: int) -> set[int]:
        try:
            return {p for p, info in (await self.partitions()).items() if info.leader == node_id}
        except (TriokaError, OSError):
            return set()

    async def _moved(self, led: set[int], node_id: int) -> set[int]:
        """Partitions `node_id` led that now have another leader (asked of the live ones)."""
        try:
            now = await self.partitions()
        except (TriokaError, OSError):
            return set()
        return {p for p in led if now[p].leader not in (node_id, -1)}

    async def _delay(self, fault: Fault) -> None:
        if self.proxies is None:
            raise HarnessError("nemesis 'latency' needs the fault proxies")
        delay = Delay(delay_ms=fault.delay_ms, jitter_ms=fault.delay_ms // 4)
        self.proxies.set_policy(ProxyPolicy(requests=delay))
        self.record(fault.nemesis, ("brokers",), {"action": "delay",
                    "delay_ms": fault.delay_ms, "jitter_ms": fault.delay_ms // 4})  # fmt: skip
        await trio.sleep(fault.duration_s)
        self.proxies.set_policy(ProxyPolicy())
        delayed = sum(p.counters.frames_delayed for p in self.proxies.all())
        if delayed:
            self.verified("delayed")
        self.record(fault.nemesis, ("brokers",), {"action": "no-delay", "frames_delayed": delayed})

    async def _unclean(self, fault: Fault) -> None:
        """Followers of the partition paused until the ISR is the leader alone, writes the
        leader alone acknowledges, the leader killed, the followers resumed: with
        unclean.leader.election.enable=true one of them becomes leader without those writes."""
        assert fault.partition is not None
        info = await self._partition(fault.partition)
        leader = info.leader
        if leader < 0:
            raise HarnessError(f"{self.topic}-{fault.partition} has no leader now")
        followers = [r for r in info.replicas if r != leader]
        names = tuple(self._name(f) for f in followers)
        for f in followers:
            await self._stop(f, self.control.pause)
        self.record(fault.nemesis, names, {"action": "pause-followers",
                    "partition": fault.partition, "leader": leader,
                    "isr": list(info.isr)})  # fmt: skip
        try:
            await self._wait_isr_alone(fault.partition, leader, fault.duration_s + 30)
            self.verified("isr-shrunk-to-leader")
            if self.acks is None:
                raise HarnessError("nemesis 'unclean-kill' needs the workload's acknowledgements")
            await self._writes_taken_alone(fault.partition)
            done = await self._stop(leader, self.control.kill)
            self.record(fault.nemesis, (self._name(leader),), {"action": "kill-leader",
                        "partition": fault.partition, **done})  # fmt: skip
        finally:
            for f in followers:
                await self._resume(f)
            self.record(fault.nemesis, names, {"action": "resume-followers"})
        new_leader = await self._wait_new_leader(fault.partition, leader, 60)
        self.verified("unclean-election")
        self.record(fault.nemesis, (self._name(new_leader),), {"action": "elected",
                    "partition": fault.partition, "old_leader": leader})  # fmt: skip
        await self._restart(fault.nemesis, leader)

    async def _writes_taken_alone(self, partition: int) -> None:
        """Some acknowledgements from the leader alone: the writes an unclean election loses
        (the ISR was the leader when they were acknowledged)."""
        assert self.acks is not None
        with trio.fail_after(30):
            await self.acks.wait_acked(partition, self.acks.acked[partition] + UNCLEAN_WRITES)
        self.verified("acked-by-leader-alone")

    async def _wait_isr_alone(self, partition: int, leader: int, within: float) -> None:
        with trio.fail_after(within):
            while True:
                try:
                    info = await self._partition(partition)
                    if info.leader == leader and tuple(info.isr) == (leader,):
                        return
                except (TriokaError, OSError):
                    pass  # the metadata a broker in the middle of it gives; ask again
                await trio.sleep(0.1)

    async def _wait_new_leader(self, partition: int, old: int, within: float) -> int:
        with trio.fail_after(within):
            while True:
                try:
                    info = await self._partition(partition)
                    if info.leader not in (old, -1):
                        return info.leader
                except (TriokaError, OSError):
                    pass
                await trio.sleep(0.1)

    async def _sides(self, fault: Fault) -> tuple[list[int], list[int]]:
        """(the cut-off side, the other side) of a CUT fault, by node id (0: ZooKeeper)."""
        brokers = self.control.brokers()
        metadata = self.control.metadata_nodes()
        selector = fault.selector
        if selector is Selector.LEADER_FROM_FOLLOWERS:
            assert fault.partition is not None
            info = await self._partition(fault.partition)
            if info.leader < 0:
                raise HarnessError(f"{self.topic}-{fault.partition} has no leader now")
            return [info.leader], [r for r in info.replicas if r != info.leader]
        if selector is Selector.CONTROLLER_FROM_METADATA and self.control.mode == "zk":
            # ZK mode's controller broker losing its session: the zombie-controller case.
            active = await self._active_controller()
            broker = active if active in brokers else self.rng.choice(brokers)
            return [broker], metadata
        broker = self.rng.choice(await self._live(brokers) or brokers)
        if selector is Selector.BROKER_FROM_BROKERS:
            return [broker], [b for b in brokers if b != broker]
        if selector in (Selector.BROKER_FROM_METADATA, Selector.CONTROLLER_FROM_METADATA):
            return [broker], metadata
        raise HarnessError(f"{selector} is not a network partition")

    async def _cut(self, fault: Fault) -> None:
        """Cut one side from the other (the backend: iptables in the nodes' namespaces, or the
        container off the compose network), checked with a TCP probe across; heal after the
        duration, probed again. Past the session timeout the cut-off broker is expected out of
        the live brokers."""
        side, other = await self._sides(fault)
        done = await self.control.cut(side, other)
        names = tuple(self._name(n) for n in (*side, *other))
        cut = not await self.control.probe(side[0], other[0])
        if cut:
            self.verified("cut")
        self.record(fault.nemesis, names, {"action": "cut", "side": side, "other": other,
                    "selector": fault.selector.value, "partition": fault.partition,
                    "probe_cut": cut, **done})  # fmt: skip
        try:
            await trio.sleep(fault.duration_s)
            gone = await self._out_of_metadata(side[0])
        finally:
            await self.control.heal_network()
        if gone:
            self.verified("out-of-live-brokers")
        healed = await self.control.probe(side[0], other[0])
        if healed:
            self.verified("healed")
        self.record(fault.nemesis, names, {"action": "heal", "probe_ok": healed,
                    "was_out_of_live_brokers": gone})  # fmt: skip

    async def _out_of_metadata(self, broker: int) -> bool:
        """Whether the live side no longer lists `broker` (its ZooKeeper session expired, or
        the controllers fenced it), asking brokers that are not cut off."""
        try:
            async with self._admin(exclude={broker}) as admin:
                cluster = await admin.describe_cluster()
        except (TriokaError, OSError):
            return False
        return broker not in {b.node_id for b in cluster.brokers}

    # -- healing -----------------------------------------------------------------------------

    async def heal_all(self) -> list[str]:
        """Undo whatever a cancelled fault left: heal the network, resume every live broker
        and controller, start every dead one, no proxy delay. Returns what it did."""
        done: list[str] = []
        if self.proxies is not None:
            self.proxies.set_policy(ProxyPolicy())
        if await self.control.heal_network():
            done.append("healed the network")
        for node_id in [*self.control.controllers(), *self.control.brokers()]:
            if await self.control.alive(node_id):
                await self._resume(node_id)
            else:
                await self._restart("heal", node_id)
                done.append(f"restarted {self._name(node_id)}")
        self.record("heal", (), {"action": "heal-all", "done": done})
        return done
