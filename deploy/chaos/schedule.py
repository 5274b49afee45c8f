"""The nemesis schedule of a chaos run: from (seed, nemeses, time limit, cluster shape) a
deterministic list of faults, each with a start time, a duration, a kind and a target
*selector* that the runner resolves against the live cluster when the fault starts ("the leader
of partition 3" is only known then).

    schedule = plan_schedule(7, ("kill", "pause"), 30.0, ClusterShape("raft", partitions=6))
    print(schedule.describe())      # the same seed always prints the same schedule

Faults run one at a time with quiet periods between them (the cluster recovers and the
workload makes progress), and the last one heals `final_quiet_s` before the time limit. Pure:
no I/O, no trio.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "NEMESES",
    "NETNS_NEMESES",
    "PROXY_NEMESES",
    "Action",
    "ClusterShape",
    "Fault",
    "Schedule",
    "Selector",
    "parse_nemeses",
    "plan_schedule",
]

NEMESES = ("kill", "pause", "partition", "controller", "zk-expiry", "latency", "unclean-kill")
"""Every nemesis `trioka chaos run --nemesis` knows. `unclean-kill` is the one that is meant to
lose writes (with unclean.leader.election.enable=true): it shows the checker can fail."""
NETNS_NEMESES = frozenset({"partition", "zk-expiry"})
"""Nemeses that cut the network: they need per-node network namespaces (deploy.cluster.netns)."""
PROXY_NEMESES = frozenset({"latency"})
"""Nemeses that need the fault proxies in front of the brokers (deploy.cluster.proxy)."""


class Action(StrEnum):
    KILL = "kill"
    """SIGKILL the target, start it again after the duration."""
    PAUSE = "pause"
    """SIGSTOP the target, SIGCONT after the duration."""
    CUT = "cut"
    """Drop traffic between the target and the other side, heal after the duration."""
    DELAY = "delay"
    """Delay every broker's traffic through its proxy."""
    UNCLEAN = "unclean"
    """Shrink a partition's ISR to its leader (pause the followers), SIGKILL the leader, resume
    the followers: an unclean election loses the leader's unreplicated writes."""


class Selector(StrEnum):
    RANDOM_BROKER = "a random broker"
    PARTITION_LEADER = "the leader of a partition"
    ACTIVE_CONTROLLER = "the active controller"
    QUORUM_FOLLOWER = "a quorum member that is not the leader"
    BROKER_FROM_BROKERS = "a random broker vs the other brokers"
    LEADER_FROM_FOLLOWERS = "the leader of a partition vs its followers"
    BROKER_FROM_METADATA = "a broker vs ZooKeeper / the controllers"
    CONTROLLER_FROM_METADATA = (
        "the controller broker (else a broker) vs ZooKeeper / the controllers"
    )
    ALL_BROKERS = "every broker"


@dataclass(frozen=True, slots=True)
class ClusterShape:
    mode: str
    """"raft" or "zk"."""
    brokers: int = 3
    controllers: int = 3
    partitions: int = 6
    session_timeout_s: float = 3.0
    """zookeeper.session.timeout.ms (zk) or broker.session.timeout.ms (raft): a pause or an
    isolation meant to expire a session lasts longer than this."""


@dataclass(frozen=True, slots=True)
class Fault:
    start_s: float
    """Seconds after the workload started."""
    duration_s: float
    """How long the fault lasts before it is healed (restart, SIGCONT, heal, no delay)."""
    nemesis: str
    """The --nemesis name that produced it."""
    action: Action
    selector: Selector
    partition: int | None = None
    """The partition whose leader a PARTITION_LEADER / LEADER_FROM_FOLLOWERS / UNCLEAN selector
    means."""
    delay_ms: int = 0
    """DELAY: the added latency (jitter is a quarter of it)."""

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def describe(self) -> str:
        target = str(self.selector)
        if self.partition is not None:
            target += f" (partition {self.partition})"
        extra = f" +{self.delay_ms} ms" if self.action is Action.DELAY else ""
        return (
            f"{self.start_s:6.1f} s  {self.nemesis:<12} {self.action.value:<7} "
            f"{target}{extra} for {self.duration_s:.1f} s"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            "nemesis": self.nemesis,
            "action": self.action.value,
            "selector": self.selector.value,
            "partition": self.partition,
            "delay_ms": self.delay_ms,
        }


@dataclass(frozen=True, slots=True)
class Schedule:
    seed: int
    nemeses: tuple[str, ...]
    time_limit_s: float
    faults: tuple[Fault, ...]

    def describe(self) -> str:
        head = (
            f"nemesis schedule (seed {self.seed}, {', '.join(self.nemeses) or 'none'}, "
            f"time limit {self.time_limit_s:g} s): {len(self.faults)} fault(s)"
        )
        return "\n".join([head, *(f"  {f.describe()}" for f in self.faults)])

    def to_json(self) -> list[dict[str, object]]:
        return [f.to_json() for f in self.faults]


def parse_nemeses(names: str | Iterable[str], mode: str) -> tuple[str, ...]:
    """`kill,pause` -> ("kill", "pause"), in the given order, without repeats. ValueError naming
    an unknown nemesis, or one the mode has no use for."""
    items = names.split(",") if isinstance(names, str) else list(names)
    out: list[str] = []
    for raw in items:
        name = raw.strip()
        if not name:
            continue
        if name not in NEMESES:
            raise ValueError(f"unknown nemesis {name!r} (known: {', '.join(NEMESES)})")
        if name not in out:
            out.append(name)
    if mode not in ("raft", "zk"):
        raise ValueError(f"mode must be raft or zk, not {mode!r}")
    return tuple(out)


def _seconds(value: float) -> float:
    # Tenths of a second: a printed schedule reads the same on every machine.
    return round(value, 1)


def _pause_s(rng: random.Random, shape: ClusterShape) -> float:
    """Past the session timeout, so the paused node is declared dead: a zombie when it wakes."""
    return shape.session_timeout_s + rng.uniform(1.0, 3.0)


def _fault(rng: random.Random, nemesis: str, start: float, shape: ClusterShape) -> Fault:
    partition = rng.randrange(shape.partitions)
    if nemesis == "kill":
        selector = rng.choice((Selector.RANDOM_BROKER, Selector.PARTITION_LEADER))
        return Fault(start, rng.uniform(2.0, 5.0), nemesis, Action.KILL, selector,
                     partition if selector is Selector.PARTITION_LEADER else None)  # fmt: skip
    if nemesis == "pause":
        return Fault(start, _pause_s(rng, shape), nemesis, Action.PAUSE,
                     Selector.PARTITION_LEADER, partition)  # fmt: skip
    if nemesis == "controller":
        choices = [(Action.KILL, Selector.ACTIVE_CONTROLLER),
                   (Action.PAUSE, Selector.ACTIVE_CONTROLLER)]  # fmt: skip
        if shape.mode == "raft" and shape.controllers > 1:
            choices.append((Action.KILL, Selector.QUORUM_FOLLOWER))
        action, selector = rng.choice(choices)
        duration = _pause_s(rng, shape) if action is Action.PAUSE else rng.uniform(2.0, 5.0)
        return Fault(start, duration, nemesis, action, selector)
    if nemesis == "partition":
        selector = rng.choice((Selector.BROKER_FROM_BROKERS, Selector.LEADER_FROM_FOLLOWERS,
                               Selector.BROKER_FROM_METADATA))  # fmt: skip
        return Fault(start, rng.uniform(4.0, 8.0), nemesis, Action.CUT, selector,
                     partition if selector is Selector.LEADER_FROM_FOLLOWERS else None)  # fmt: skip
    if nemesis == "zk-expiry":
        duration = shape.session_timeout_s * 1.5 + rng.uniform(1.0, 2.0)
        return Fault(start, duration, nemesis, Action.CUT, Selector.CONTROLLER_FROM_METADATA)
    if nemesis == "latency":
        return Fault(start, rng.uniform(4.0, 8.0), nemesis, Action.DELAY, Selector.ALL_BROKERS,
                     delay_ms=rng.choice((50, 100, 200, 300)))  # fmt: skip
    if nemesis == "unclean-kill":
        # The followers stay paused past the session timeout (they leave the ISR), the leader
        # takes writes alone, then dies; the duration is the followers' pause.
        return Fault(start, _pause_s(rng, shape) + 8.0, nemesis, Action.UNCLEAN,
                     Selector.PARTITION_LEADER, partition)  # fmt: skip
    raise ValueError(f"unknown nemesis {nemesis!r}")


def plan_schedule(
    seed: int,
    nemeses: Iterable[str],
    time_limit_s: float,
    shape: ClusterShape,
    *,
    first_quiet_s: float = 3.0,
    quiet_s: tuple[float, float] = (2.0, 5.0),
    final_quiet_s: float = 3.0,
) -> Schedule:
    """Faults one after another from `first_quiet_s` on, a random quiet gap between two, the
    last one healed `final_quiet_s` before `time_limit_s`. No nemeses: an empty schedule.
    ValueError when the time limit leaves no room for a single fault."""
    names = tuple(nemeses)
    rng = random.Random(seed)
    faults: list[Fault] = []
    start = first_quiet_s
    while names:
        fault = _fault(rng, rng.choice(names), _seconds(start), shape)
        fault = Fault(fault.start_s, _seconds(fault.duration_s), fault.nemesis, fault.action,
                      fault.selector, fault.partition, fault.delay_ms)  # fmt: skip
        if fault.end_s > time_limit_s - final_quiet_s:
            break
        faults.append(fault)
        start = fault.end_s + rng.uniform(*quiet_s)
    if names and not faults:
        raise ValueError(
            f"a time limit of {time_limit_s:g} s leaves no room for a fault of "
            f"{', '.join(names)} (faults start after {first_quiet_s:g} s and heal "
            f"{final_quiet_s:g} s before the end): raise --time-limit"
        )
    return Schedule(seed, names, time_limit_s, tuple(faults))
