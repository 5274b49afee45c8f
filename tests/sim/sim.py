"""The simulation loop: one seeded Random, one event heap, N nodes, the checkers after every
event. Faults (crash, torn crash, restart, graceful resignation, symmetric and asymmetric
partitions, heal) come at random intervals until `heal_fraction` of the event budget is spent;
then everything heals and restarts, and liveness is measured (a soft report: how long until a
leader that every voter follows, not a failure). With the raft core, nodes also take snapshots
at random applied offsets and drop their logs below them (so lagging and restarted nodes catch
up by FetchSnapshot), and `observers` non-voters fetch and apply beside the voters."""

from __future__ import annotations

import random
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from raft.core import FetchSnapshotResponse, RaftConfig
from tests.sim.checkers import Checkers, InvariantViolation
from tests.sim.events import (
    Crash,
    Deliver,
    Event,
    EventQueue,
    Heal,
    Partition,
    Propose,
    Resign,
    Restart,
    TakeSnapshot,
    Tick,
)
from tests.sim.network import Network, NetworkConfig
from tests.sim.nodes import Applied, RaftNode, SimNode, ToyNode
from tests.sim.toy_raft import ToyConfig

RERUN = ".venv/bin/python -m tests.sim"


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 3
    check_log_up_to_date: bool = True
    """False plants the bug: voters ignore the candidate's log (the simulator must catch it)."""
    send_before_flush: bool = False
    """True plants a driver bug (raft core only): a node dying inside a Ready has already sent
    its messages (e.g. a Fetch claiming entries it never flushed)."""
    snapshot_off_by_one: bool = False
    """True plants a state-machine bug (raft core only): a snapshot holds the state one entry
    past its offset (the checkers must catch it)."""
    snapshot_above_hw: bool = False
    """True plants a driver bug (raft core only): some snapshots fold the log beyond the high
    watermark (uncommitted entries), stored behind the core's back."""
    core: str = "raft"
    """raft: raft.core.RaftCore; toy: the small reference core (tests/sim/toy_raft.py)."""
    observers: int | None = None
    """Non-voters that fetch and apply (raft core only); None: 1 with raft, 0 with toy."""
    snapshot_every_ms: tuple[int, int] | None = (50, 300)
    """A node takes a snapshot this often (raft core only; the toy core ignores it); None: never."""
    delete_log_rate: float = 0.7
    """How often a snapshot is followed by dropping the log below it."""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    propose_every_ms: tuple[int, int] = (5, 60)
    fault_every_ms: tuple[int, int] = (50, 500)
    heal_fraction: float = 0.8
    liveness_ms: int = 3000
    """A leader should be followed by all nodes within this long after the final heal (a
    soft report: `SimResult.live`)."""

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"SimConfig.nodes must be >= 1, got {self.nodes}")
        if not 0.0 <= self.heal_fraction <= 1.0:
            raise ValueError(f"SimConfig.heal_fraction must be in [0, 1], got {self.heal_fraction}")
        if self.core not in CORES:
            raise ValueError(f"SimConfig.core must be one of {sorted(CORES)}, got {self.core!r}")
        if self.observers is not None and self.observers < 0:
            raise ValueError(f"SimConfig.observers must be >= 0, got {self.observers}")
        if self.core == "toy" and (
            self.observers or self.snapshot_off_by_one or self.snapshot_above_hw
        ):
            raise ValueError("SimConfig: the toy core has no observers and no snapshots")
        if not 0.0 <= self.delete_log_rate <= 1.0:
            raise ValueError(
                f"SimConfig.delete_log_rate must be in [0, 1], got {self.delete_log_rate}"
            )
        every = self.snapshot_every_ms
        if every is not None and not 1 <= every[0] <= every[1]:
            raise ValueError(f"SimConfig.snapshot_every_ms needs 1 <= lo <= hi, got {every}")

    @property
    def observer_count(self) -> int:
        if self.observers is not None:
            return self.observers
        return 1 if self.core == "raft" else 0

    @property
    def snapshots(self) -> bool:
        return self.core == "raft" and self.snapshot_every_ms is not None

    def rerun_flags(self) -> list[str]:
        flags = []
        if not self.check_log_up_to_date:
            flags.append("--no-log-up-to-date-check")
        if self.send_before_flush:
            flags.append("--send-before-flush")
        if self.snapshot_off_by_one:
            flags.append("--snapshot-off-by-one")
        if self.snapshot_above_hw:
            flags.append("--snapshot-above-hw")
        if self.observers is not None:
            flags += ["--observers", str(self.observers)]
        if self.snapshot_every_ms is None:
            flags.append("--no-snapshots")
        elif self.snapshot_every_ms != SimConfig.snapshot_every_ms:
            flags += ["--snapshot-every-ms", *map(str, self.snapshot_every_ms)]
        if self.delete_log_rate != SimConfig.delete_log_rate:
            flags += ["--delete-log-rate", str(self.delete_log_rate)]
        if self.core != SimConfig.core:
            flags += ["--core", self.core]
        if self.nodes != SimConfig.nodes:
            flags += ["--nodes", str(self.nodes)]
        return flags


def _toy_nodes(config: SimConfig, rng: random.Random) -> list[SimNode]:
    voters = tuple(range(1, config.nodes + 1))
    core_config = ToyConfig(check_log_up_to_date=config.check_log_up_to_date)
    return [ToyNode(i, voters, rng, core_config) for i in voters]


def _raft_nodes(config: SimConfig, rng: random.Random) -> list[SimNode]:
    voters = tuple(range(1, config.nodes + 1))
    observers = tuple(range(config.nodes + 1, config.nodes + 1 + config.observer_count))
    return [
        RaftNode(
            i,
            voters,
            rng,
            RaftConfig(
                node_id=i,
                voters=frozenset(voters),
                **RAFT_TIMING,
                check_log_up_to_date=config.check_log_up_to_date,
            ),
            send_before_flush=config.send_before_flush,
            snapshot_off_by_one=config.snapshot_off_by_one,
            snapshot_above_hw=config.snapshot_above_hw,
        )
        for i in voters + observers
    ]


RAFT_TIMING = dict(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    election_backoff_max_ms=150,
    request_timeout_ms=200,
    retry_backoff_ms=20,
    append_linger_ms=5,
    fetch_max_wait_ms=50,
    fetch_snapshot_max_bytes=16,
)
"""Kafka's controller.quorum.* defaults scaled down ~7x, so that elections, fetch timeouts and
resignations happen often within a few hundred events (message delays are 1-30 ms). Snapshots
(~40 bytes) come in chunks of 16 bytes, so a transfer takes several FetchSnapshot rounds."""

CORES: dict[str, Callable[[SimConfig, random.Random], list[SimNode]]] = {
    "raft": _raft_nodes,
    "toy": _toy_nodes,
}


class SafetyViolation(AssertionError):
    def __init__(self, seed: int, event_index: int, max_events: int, config: SimConfig,
                 violation: InvariantViolation, event: Event, now_ms: int) -> None:  # fmt: skip
        self.seed, self.event_index, self.violation = seed, event_index, violation
        cmd = shlex.join(["--seed", str(seed), "--events", str(max_events), *config.rerun_flags()])
        self.rerun = f"{RERUN} {cmd}"
        super().__init__(
            f"seed {seed}, event {event_index} at {now_ms} ms ({event!r}): {violation}\n"
            f"rerun: {self.rerun}"
        )


@dataclass
class SimResult:
    seed: int
    events: int
    now_ms: int
    committed: int
    leaders: int
    """Epochs that had a leader."""
    healed_at_ms: int | None
    stable_leader_after_heal_ms: int | None
    """None: no stable leader by the end (a liveness report, not a failure)."""
    messages_sent: int
    faults: Counter[str]
    """How often each fault happened (crash, torn crash, entries lost in crashes, ...)."""

    @property
    def live(self) -> bool:
        """A stable leader within liveness_ms of the final heal (or no heal in the budget)."""
        return self.healed_at_ms is None or self.stable_leader_after_heal_ms is not None


class Simulation:
    def __init__(self, seed: int, max_events: int, config: SimConfig | None = None) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self.seed, self.max_events = seed, max_events
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.queue = EventQueue()
        self.network = Network(self.rng, self.config.network)
        self.checkers = Checkers()
        self.nodes = {n.node_id: n for n in CORES[self.config.core](self.config, self.rng)}
        self._tick_at: dict[int, int | None] = {}
        self._incarnation: dict[int, int] = dict.fromkeys(self.nodes, 0)
        self._torn_next: set[int] = set()
        self._proposals = 0
        self._healing = False
        self.healed_at_ms: int | None = None
        self.stable_after_heal_ms: int | None = None
        self.now_ms = 0
        self.trace: list[str] | None = None
        self.faults: Counter[str] = Counter()

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> SimResult:
        for node in self.nodes.values():
            node.start(0)
            self._after(node, node.drain())
        self._schedule_proposal()
        self._schedule_fault()
        self._schedule_snapshot()
        heal_at = int(self.max_events * self.config.heal_fraction)
        index = 0
        while self.queue and (index < self.max_events or self._awaiting_leader(index)):
            at, event = self.queue.pop()
            if isinstance(event, Tick) and not self._tick_is_current(event, at):
                continue  # a deadline that moved, or an earlier incarnation's: not an event
            self.now_ms = at
            index += 1
            if index >= heal_at and not self._healing:
                self._healing = True
                self.queue.push(at, Heal(restart_all=True))
            if self.trace is not None:
                self.trace.append(f"{index} {at}ms {event!r}")
            try:
                touched = self._handle(event)
                for node_id in touched:
                    self.checkers.observe(self.nodes[node_id].view())
            except InvariantViolation as violation:
                raise SafetyViolation(self.seed, index, self.max_events, self.config, violation,
                                      event, at) from None  # fmt: skip
            self._watch_liveness()
        return SimResult(
            seed=self.seed, events=index, now_ms=self.now_ms,
            committed=len(self.checkers.committed), leaders=len(self.checkers.leaders),
            healed_at_ms=self.healed_at_ms, stable_leader_after_heal_ms=self.stable_after_heal_ms,
            messages_sent=self.network.sent, faults=self.faults,
        )  # fmt: skip

    def _handle(self, event: Event) -> list[int]:
        now = self.now_ms
        if isinstance(event, Deliver):
            node = self.nodes[event.dst]
            if not node.up or not self.network.can_deliver(event.src, event.dst):
                return []
            message = event.message
            if (
                isinstance(message, FetchSnapshotResponse)
                and message.error is ErrorCode.SNAPSHOT_NOT_FOUND
            ):
                self.faults["snapshot not found"] += 1  # the leader dropped it mid-transfer
            node.step(message, now)
            return self._drain(node)
        if isinstance(event, Tick):
            node = self.nodes[event.node]
            self._tick_at[event.node] = None
            node.tick(now)
            return self._drain(node)
        if isinstance(event, Propose):
            self._schedule_proposal()
            target = self._proposal_target()
            if target is None:
                return []
            promised = target.propose(event.data, now)
            if promised is not None:
                self.checkers.proposed(*promised, event.data)
            return self._drain(target)
        if isinstance(event, TakeSnapshot):
            self._schedule_snapshot()
            return self._take_snapshot(event)
        self._schedule_fault()
        if self._healing and not (isinstance(event, Heal) and event.restart_all):
            return []  # a fault scheduled before the final heal: the network stays whole
        if isinstance(event, Crash):
            if event.torn:
                self._torn_next.add(event.node)  # it dies inside its next Ready
                return []
            return self._crash(self.nodes[event.node])
        if isinstance(event, Restart):
            return self._restart(self.nodes[event.node])
        if isinstance(event, Resign):
            leader = self._leader()
            if leader is None or not leader.resign(now):
                return []
            self.faults["resign"] += 1
            return self._drain(leader)
        if isinstance(event, Partition):
            self.network.partition(event.a, event.b, symmetric=event.symmetric)
            self.faults["partition" if event.symmetric else "asymmetric partition"] += 1
            return []
        if isinstance(event, Heal):
            self.network.heal()
            touched = []
            if event.restart_all:
                self._torn_next.clear()
                for node in self.nodes.values():
                    if not node.up:
                        touched += self._restart(node)
                self.healed_at_ms = now
            return touched
        raise AssertionError(f"unknown event {event!r}")

    def _drain(self, node: SimNode, *, starting: bool = False) -> list[int]:
        out = node.drain(torn=node.node_id in self._torn_next)
        if out.died:
            self._torn_next.discard(node.node_id)
            self.faults["torn crash"] += 1
            out.next_deadline_ms = None
            self._after(node, out)  # only a buggy driver has messages to send here
            return self._crash(node)
        checkers, node_id = self.checkers, node.node_id
        for op in out.applied:
            if isinstance(op, Applied):
                checkers.apply(node_id, op.offset, op.data, op.digest)
            else:
                checkers.snapshot_loaded(node_id, *op.snapshot_id, op.data)
                self.faults["snapshot loaded at start-up" if starting else "snapshot fetched"] += 1
        for a in out.abandoned:
            checkers.abandoned(node_id, a.epoch, a.first_offset, a.last_offset)
            self.faults["proposals abandoned"] += a.last_offset - a.first_offset + 1
        self._after(node, out)
        return [node.node_id]

    def _after(self, node: SimNode, out: object) -> None:
        """Send what the Ready said (after it was persisted) and schedule the next tick."""
        net, queue, now = self.network, self.queue, self.now_ms
        for dst, message in out.messages:  # type: ignore[attr-defined]
            for delay in net.delays(node.node_id, dst):
                queue.push(now + delay, Deliver(node.node_id, dst, message))
        deadline = out.next_deadline_ms  # type: ignore[attr-defined]
        if deadline is not None and deadline != self._tick_at.get(node.node_id):
            self._tick_at[node.node_id] = max(deadline, now)
            queue.push(max(deadline, now), Tick(node.node_id, self._incarnation[node.node_id]))

    def _tick_is_current(self, tick: Tick, at: int) -> bool:
        return (
            self.nodes[tick.node].up
            and tick.incarnation == self._incarnation[tick.node]
            and self._tick_at.get(tick.node) == at
        )

    def _crash(self, node: SimNode) -> list[int]:
        if not node.up:
            return []
        view = node.view()
        before = view.log_start + len(view.log)
        flushed_end = node.crash()
        self.faults["crash"] += 1
        self.faults["entries lost in crashes"] += before - flushed_end
        self._incarnation[node.node_id] += 1
        self._tick_at[node.node_id] = None
        self.checkers.crashed(node.node_id, flushed_end)
        return [node.node_id]

    def _restart(self, node: SimNode) -> list[int]:
        if node.up:
            return []
        node.start(self.now_ms)
        return self._drain(node, starting=True)

    # -- workload and faults -----------------------------------------------------------------
    def _schedule_proposal(self) -> None:
        lo, hi = self.config.propose_every_ms
        self._proposals += 1
        self.queue.push(self.now_ms + self.rng.randint(lo, hi), Propose(b"%d" % self._proposals))

    def _leader(self) -> SimNode | None:
        """The live leader of the highest epoch (a stale one at times), if any."""
        leaders = [n for n in self.nodes.values() if n.up and n.is_leader()]
        return max(leaders, key=lambda n: n.view().epoch) if leaders else None

    def _proposal_target(self) -> SimNode | None:
        """The client asks the leader of the highest epoch it can find (a stale one at times),
        else a random live node, which refuses."""
        up = [n for n in self.nodes.values() if n.up]
        if not up:
            return None
        return self._leader() or self.rng.choice(up)

    def _schedule_snapshot(self) -> None:
        if not self.config.snapshots:
            return
        lo, hi = self.config.snapshot_every_ms  # type: ignore[misc]
        delete_log = self.rng.random() < self.config.delete_log_rate
        self.queue.push(self.now_ms + self.rng.randint(lo, hi), TakeSnapshot(delete_log))

    def _take_snapshot(self, event: TakeSnapshot) -> list[int]:
        up = [n for n in self.nodes.values() if n.up]
        if not up:
            return []
        node = self.rng.choice(up)
        assert isinstance(node, RaftNode)
        start = node.store.start_offset
        taken = node.take_snapshot(self.rng, event.delete_log)
        if taken is None:
            return []
        (end_offset, epoch), data = taken
        self.checkers.snapshot_created(node.node_id, end_offset, epoch, data)
        self.faults["snapshot taken"] += 1
        if node.store.start_offset > start:
            self.faults["log deleted below a snapshot"] += 1
        return [node.node_id]

    def _schedule_fault(self) -> None:
        if self._healing:
            return
        lo, hi = self.config.fault_every_ms
        at = self.now_ms + self.rng.randint(lo, hi)
        ids = sorted(self.nodes)
        down = [i for i in ids if not self.nodes[i].up]
        roll = self.rng.random()
        if roll < 0.25:
            event: Event = Crash(self.rng.choice(ids), torn=self.rng.random() < 0.3)
        elif roll < 0.32:
            event = Resign()
        elif roll < 0.5 and down:
            event = Restart(self.rng.choice(down))
        elif roll < 0.8:
            shuffled = ids.copy()
            self.rng.shuffle(shuffled)
            cut = self.rng.randint(1, max(1, len(ids) - 1))
            a, b = frozenset(shuffled[:cut]), frozenset(shuffled[cut:])
            event = Partition(a, b, symmetric=self.rng.random() < 0.6)
        else:
            event = Heal()
        self.queue.push(at, event)

    def _awaiting_leader(self, index: int) -> bool:
        """Past the event budget, a healed run goes on until it has a stable leader or
        `liveness_ms` has passed (at most another budget of events), so the liveness report
        says yes or no rather than 'ran out of events'."""
        return (
            self.healed_at_ms is not None
            and self.stable_after_heal_ms is None
            and self.now_ms < self.healed_at_ms + self.config.liveness_ms
            and index < 2 * self.max_events
        )

    def _watch_liveness(self) -> None:
        if self.healed_at_ms is None or self.stable_after_heal_ms is not None:
            return
        voters = self.config.nodes  # node ids 1..nodes; observers come after
        views = [n.view() for n in self.nodes.values() if n.node_id <= voters]
        leaders = [v for v in views if v.role == "leader"]
        if len(leaders) == 1 and all(
            v.epoch == leaders[0].epoch and v.role in ("leader", "follower") for v in views
        ):
            self.stable_after_heal_ms = self.now_ms - self.healed_at_ms
