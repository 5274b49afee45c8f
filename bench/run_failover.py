"""Failover benchmark (issues 3 and 4): a broker's and the controller's SIGKILL with N partitions,
ZooKeeper mode and Raft mode side by side.

    .venv/bin/python bench/run_failover.py [--mode zk|raft|both] --partitions 3000 [--topics K]
        [--brokers 3] [--sample 50] [--session-timeout-ms MS] [--election-timeout-ms 1000]
        [--broker-override k=v ...] [--idle-s S] [--no-controlled-shutdown]
        [--no-controller-kill] [--json]

For each mode (default both, ZK first; one table at the end with a column per mode):
1. The cluster `trioka cluster up --mode zk|raft` starts (ZK mode: Debian's ZooKeeper and 3
   brokers; Raft mode: 3 controller processes and 3 brokers; data in a temporary directory);
   `auto.leader.rebalance.enable=false` so nothing but the failures moves leadership. N
   partitions, RF=3, min.insync.replicas=2, in K topics (default: 100 partitions per topic),
   created through a broker in batches; the script waits until every partition has a leader
   and its full ISR (Metadata from a broker). With --idle-s S: 10 s to settle, then each
   broker's CPU over S seconds and its RSS (/proc).
2. Broker failover: the broker with the most leaderships (ZK mode: not the controller's) is
   the victim. A sampler process (bench/failover_sampler.py) writes acks=all records to
   `--sample` of its partitions, one at a time each. SIGKILL the victim. Detection is the
   controller's "broker fenced early" event when the fast fencing fenced the victim
   (broker.session.fast.fencing.enable, on by default; its time minus its fence_s), else, in
   ZK mode, the controller noticing the ZooKeeper session expiry (the start of its BrokerChange
   event: the "brokers changed" log event's time minus its event_s), in Raft mode the active
   controller's "brokers fenced" event (logged once the fencing records, which re-elect the
   victim's partitions, committed; ~ broker.session.timeout.ms after its last heartbeat).
   Reported from detection:
   (a) ZK mode: the controller's BrokerChange event committed (its event_s, and the mean of
   LeaderElectionRateAndTimeMs observed meanwhile on /metrics) and its LeaderAndIsr /
   UpdateMetadata answered ("controller requests answered");
   (b) every live broker's metadata (a Metadata request to each) shows a live leader for every
   partition;
   (c) every sampled partition accepted an acks=all write again (and each one's gap between
   its last acknowledgement before the kill and its first after).
3. The victim is started again; the time until it is back in every ISR is reported (or that it
   was not within --rejoin-wait-s).
4. Controlled shutdown (unless --no-controlled-shutdown): SIGTERM to the broker leading most
   (ZK mode: not the controller's); reported: when every live broker's Metadata shows its
   partitions led elsewhere, when it logged that the controller allowed the shutdown and when
   it exited, and each sampled partition's longest gap between two acknowledgements; then it
   is started again and timed back into every ISR (a restart after a clean shutdown). After
   each restart a preferred leader election puts leadership back where the placement put it
   (a third per broker), as the cluster had it before the first kill.
5. Controller failover. ZK mode: the same as 2 with the controller's broker as the victim;
   reported from the new controller's "controller active" event (ZooKeeper read, replay, load)
   and its ControllerChangeRateAndTimeMs on /metrics, its failover requests answered, (b), (c).
   Raft mode: SIGKILL the active controller (the quorum leader in DescribeQuorum, `trioka quorum
   describe`'s code); reported: the new leader's "raft role changed" event, when DescribeQuorum
   names it, its "controller active" event (load_s: its epoch's NoOp committed and the term
   started). Both modes: a CreateTopics of a fresh 1-partition topic through a live broker with
   the Admin client (resent on NOT_CONTROLLER), sent at the kill: the time until it completes.

Every process started is SIGKILLed by pid at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import itertools
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import ROOT, BenchCluster, cpu_s, metadata_of, parse_time, rss_bytes
from telemetry_export import export_run

from client import Admin, NewTopic
from deploy.cli.options import parse_key_values
from deploy.cluster.raft import quorum_report
from deploy.cluster.supervisor import read_state, start_broker
from deploy.node.transport import PooledTransport
from deploy.telemetry.logs import configure_logging
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.metadata import MetadataResponse
from protocol.metric_names import CONTROLLER_CHANGE_RATE_AND_TIME, LEADER_ELECTION_RATE_AND_TIME

KAFKA_SESSION_TIMEOUT_MS = {"zk": 18_000, "raft": 9_000}
"""Kafka's zookeeper.session.timeout.ms and broker.session.timeout.ms: the goals are measured
at these, so that a shorter timeout cannot be what meets them."""
ELECTION_METRIC = LEADER_ELECTION_RATE_AND_TIME
"""The BrokerChange event's timer, LeaderElectionRateAndTimeMs (Kafka kept the historical name)."""
FAILOVER_METRIC = CONTROLLER_CHANGE_RATE_AND_TIME
"""A ZK-mode failover (load and first requests) or resignation."""
TOPIC_PREFIX = "fo"
SHUTDOWN_DONE = ("controlled shutdown succeeded", "controlled shutdown allowed by the controller")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- asking the cluster ----------------------------------------------------------------------


def partitions_of(meta: MetadataResponse, topics: set[str]) -> dict[tuple[str, int], Any]:
    return {(t.name, p.index): p for t in meta.topics if t.name in topics for p in t.partitions}


def scrape_elections(
    host: str, port: int, metric: str = ELECTION_METRIC
) -> tuple[float, float] | None:
    """(sum ms, count) of a controller timer on a broker's /metrics; None without."""
    if not port:
        return None
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(metric + "_sum"):
            total = float(line.split()[-1])
        elif line.startswith(metric + "_count"):
            count = float(line.split()[-1])
    return total, count


async def create_topics(
    bootstrap: str, names: list[str], per_topic: list[int]
) -> tuple[float, float]:
    """(seconds until RF=3 was placeable, seconds creating the topics)."""
    started = time.monotonic()
    config = {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 600_000,
              "request.timeout.ms": 600_000}  # fmt: skip
    async with Admin(config) as admin:
        await wait_placeable(admin)
        placeable = time.monotonic() - started
        started = time.monotonic()
        batch = 10  # topics per CreateTopics request: about 1,000 partitions
        for i in range(0, len(names), batch):
            pending = [NewTopic(n, c, 3, {"min.insync.replicas": "2"})
                       for n, c in zip(names[i : i + batch], per_topic[i : i + batch],
                                       strict=True)]  # fmt: skip
            while pending:
                try:
                    await admin.create_topics(pending, timeout_ms=600_000)
                    break
                except KafkaError as exc:
                    # A resent batch (the first attempt's answer was lost, e.g. a broker's
                    # forward that timed out) finds some topics created: create the rest.
                    if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise
                    log(f"CreateTopics resent: {exc.message}")
                    existing = set(await admin.list_topics())
                    pending = [t for t in pending if t.name not in existing]
    return placeable, time.monotonic() - started


async def wait_placeable(admin: Admin, within: float = 60.0) -> None:
    """Until the controller can place RF=3 (a 1-partition RF=3 topic, not one of the measured
    ones, is created): in Raft mode a broker's Metadata may list a broker the active controller
    has not unfenced yet. (Not validate_only: in Raft mode that got no answer, 2026-11-22.)"""
    last: KafkaError | None = None
    with trio.move_on_after(within):
        while True:
            try:
                await admin.create_topics([NewTopic(f"{TOPIC_PREFIX}-placeable", 1, 3)])
                return
            except KafkaError as exc:
                if exc.code is not ErrorCode.INVALID_REPLICATION_FACTOR:
                    raise
                last = exc
            await trio.sleep(0.1)  # polling a condition under the deadline
    raise RuntimeError(f"RF=3 not placeable within {within:g} s: {last}")


async def wait_all(
    cluster: BenchCluster,
    topics: set[str],
    expected: int,
    condition: Any,
    *,
    within: float,
    what: str,
    node_ids: list[int] | None = None,
    poll_s: float = 0.1,
) -> dict[int, float]:
    """Poll Metadata on each broker in `node_ids` (default: the live ones) until
    `condition(partition)` holds for all `expected` partitions of `topics`; returns the wall
    time at which each broker first answered so."""
    ids = node_ids if node_ids is not None else cluster.live_ids()
    done: dict[int, float] = {}
    last: dict[int, str] = {}
    async with PooledTransport.open(client_id="bench-failover") as transport:
        with trio.move_on_after(within):
            while len(done) < len(ids):
                for node_id in ids:
                    if node_id in done:
                        continue
                    node = cluster.node(node_id)
                    try:
                        meta = await metadata_of(transport, node.host, node.port, timeout_s=60)
                    except Exception as exc:  # not answering yet: ask again
                        last[node_id] = repr(exc)
                        continue
                    at = time.time()
                    parts = partitions_of(meta, topics)
                    bad = [k for k, p in parts.items() if not condition(p)]
                    if len(parts) == expected and not bad:
                        done[node_id] = at
                    else:
                        last[node_id] = f"{len(parts)} partitions, {len(bad)} not yet"
                if len(done) < len(ids):
                    await trio.sleep(poll_s)  # polling a condition under the deadline
    if len(done) < len(ids):
        raise RuntimeError(f"no {what} within {within:g} s: {last}")
    return done


class RunRecord:
    """What the benchmark did, for --telemetry-dir: every sampler outcome and each fault or
    restart, as bench/telemetry_export.py takes them."""

    def __init__(self) -> None:
        self.sampler_lines: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []

    def did(self, at: float, action: str, node: str) -> None:
        self.faults.append({"time": at, "action": action, "node": node})


# -- the sampler ----------------------------------------------------------------------------


class Sampler:
    """bench/failover_sampler.py in its own process, killed by pid."""

    def __init__(self, cluster: BenchCluster, partitions: list[tuple[str, int]], out: Path):
        self.out = out
        self.partitions = partitions
        out.write_text("")
        cmd = [sys.executable, str(ROOT / "bench" / "failover_sampler.py"),
               "--bootstrap", cluster.live_bootstrap(), "--out", str(out),
               *(f"{t}:{p}" for t, p in partitions)]  # fmt: skip
        self.stderr = out.with_suffix(".stderr")
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={
                    **os.environ,
                    "PYTHONPATH": str(ROOT),
                    "TRIOKA_LOG_LEVEL": os.environ.get("BENCH_SAMPLER_LOG_LEVEL", "ERROR"),
                },
                start_new_session=True,
            )

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.out.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    async def wait(self, condition: Any, within: float, what: str) -> list[dict[str, Any]]:
        with trio.move_on_after(within):
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"sampler exited: {self.stderr.read_text()[-2000:]}")
                lines = self.lines()
                if condition(lines):
                    return lines
                await trio.sleep(0.1)  # polling a condition under the deadline
        raise RuntimeError(f"sampler: no {what} within {within:g} s")

    async def wait_first_acks(self) -> None:
        """Until every sampled partition has had one acknowledgement (the cluster takes
        writes everywhere before the fault)."""
        wanted = set(self.partitions)
        await self.wait(
            lambda lines: wanted <= {(x["topic"], x["partition"]) for x in lines if x["ok"]},
            120,
            "first acknowledgement on every sampled partition",
        )

    def acked_after(self, lines: list[dict[str, Any]], t: float) -> dict[tuple[str, int], float]:
        first: dict[tuple[str, int], float] = {}
        for x in lines:
            key = (x["topic"], x["partition"])
            if x["ok"] and x["done"] > t and key not in first:
                first[key] = x["done"]
        return first

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


# -- one kill ---------------------------------------------------------------------------------


async def kill_and_measure(
    cluster: BenchCluster,
    victim: int,
    topics: set[str],
    expected: int,
    args: argparse.Namespace,
    label: str,
    *,
    probe: bool = False,
    record: RunRecord,
) -> dict[str, Any]:
    survivors = [i for i in cluster.live_ids() if i != victim]
    led = await leaderships_of(cluster, victim, topics, survivors[0])
    sample = spread_sample(led, args.sample)
    sampler = Sampler(cluster, sample, cluster.dir / f"sampler-{label}.jsonl")  # type: ignore[operator]
    result: dict[str, Any] = {"victim": victim, "victim_leaderships": len(led),
                              "sampled": len(sample)}  # fmt: skip
    try:
        await sampler.wait_first_acks()
        before_metrics = {i: scrape_elections(cluster.node(i).host, cluster.node(i).metrics_port)
                          for i in survivors}  # fmt: skip
        before_failover = {
            i: scrape_elections(cluster.node(i).host, cluster.node(i).metrics_port, FAILOVER_METRIC)
            for i in survivors
        }
        offsets = {i: cluster.log_size(i) for i in survivors}
        ctl_offsets = {i: cluster.log_size(i) for i in cluster.live_controller_ids()}
        profilers = start_profilers(cluster, victim, label, args)
        log(f"{label}: SIGKILL broker {victim} (leads {len(led)}; sampling {len(sample)})")
        t_kill = cluster.kill(victim)
        result["kill_time"] = t_kill
        record.did(t_kill, "kill", f"broker-{victim}")

        async def run_probe() -> None:
            # ZK mode's controller kill: when does a new controller complete CreateTopics?
            result["create_s_after_kill"] = await create_probe(cluster, args.wait_s, label)

        # (b) every live broker's metadata shows a live leader for every partition.
        def led_live(p: Any) -> bool:
            return p.leader_id >= 0 and p.leader_id != victim

        async with trio.open_nursery() as nursery:
            if probe:
                nursery.start_soon(run_probe)
            meta_done = await wait_all(cluster, topics, expected, led_live,
                                       within=args.wait_s, what="live leaders",
                                       node_ids=survivors, poll_s=args.poll_s)  # fmt: skip
        result["metadata_s_after_kill"] = {i: t - t_kill for i, t in meta_done.items()}
        # (c) every sampled partition accepts acks=all writes again.
        margin = t_kill + 0.1  # an answer read just after the kill was sent before it
        lines = await sampler.wait(
            lambda ls: len(sampler.acked_after(ls, margin)) == len(sample),
            args.wait_s,
            "acknowledgement after the kill on every sampled partition",
        )
        first_after = sampler.acked_after(lines, margin)
        last_before: dict[tuple[str, int], float] = {}
        for x in lines:
            if x["ok"] and x["done"] <= t_kill:
                last_before[(x["topic"], x["partition"])] = x["done"]
        gaps = sorted(first_after[k] - last_before.get(k, t_kill) for k in sample)
        result["sample_all_s_after_kill"] = max(first_after.values()) - t_kill
        result["sample_gap_median_s"] = statistics.median(gaps)
        result["sample_gap_max_s"] = gaps[-1]
        # Writes that failed although the producer retries within delivery.timeout.ms (e.g. a
        # Metadata request that timed out); those before the kill say the cluster was slow.
        result["sample_errors"] = sum(1 for x in lines if not x["ok"] and x["done"] > t_kill)
        result["sample_errors_before_kill"] = sum(
            1 for x in lines if not x["ok"] and x["done"] <= t_kill
        )
    finally:
        sampler.stop()
        record.sampler_lines += sampler.lines()
        for proc in profilers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=args.profile_s + 30)  # py-spy writes its file at the end

    # (a) the controller's own account, from its log events and /metrics. (Raft mode: the
    # failover is over by now; "brokers fenced" is missing only when the controller's own
    # fencing request timed out although its records committed later.)
    with trio.move_on_after(args.wait_s if cluster.mode == "zk" else 30):
        while True:
            if cluster.mode == "raft":
                found = find_raft_events(cluster, ctl_offsets, victim)
                key = "brokers_fenced"
            else:
                found = find_events(cluster, survivors, offsets, victim)
                # A new controller elects the dead one's partitions in its failover (it loads
                # a /brokers/ids without the victim), the old one in a BrokerChange.
                key = "answered_failover" if label == "controller" else "answered_broker_change"
                if key == "answered_broker_change" and (found.get("brokers_changed") or {}).get(
                    "fast"
                ):
                    break  # fast fencing: no BrokerChange event to wait for
            if found.get(key) is not None:
                break
            await trio.sleep(0.2)  # polling a condition under the deadline
    result.update(found)
    for key, metric, before in (("election_metric", ELECTION_METRIC, before_metrics),
                                ("failover_metric", FAILOVER_METRIC, before_failover)):  # fmt: skip
        for i in survivors:
            node = cluster.node(i)
            b, a = before.get(i), scrape_elections(node.host, node.metrics_port, metric)
            if a is None:
                continue
            b = b or (0.0, 0.0)
            if a[1] > b[1]:
                result[key] = {
                    "broker": i,
                    "events": a[1] - b[1],
                    "mean_ms": (a[0] - b[0]) / (a[1] - b[1]),
                }
    return result


async def shutdown_and_measure(
    cluster: BenchCluster,
    victim: int,
    topics: set[str],
    expected: int,
    args: argparse.Namespace,
    record: RunRecord,
) -> dict[str, Any]:
    """Controlled shutdown (SIGTERM) of `victim`: when every live broker's Metadata shows its
    partitions led elsewhere, when the broker logged "controlled shutdown succeeded" and
    exited, and each sampled partition's longest gap between two acknowledgements from the
    signal until it was acknowledged again after the move (the sampler's 0.1 s pacing
    included)."""
    survivors = [i for i in cluster.live_ids() if i != victim]
    led = await leaderships_of(cluster, victim, topics, survivors[0])
    sample = spread_sample(led, args.sample)
    sampler = Sampler(cluster, sample, cluster.dir / "sampler-shutdown.jsonl")  # type: ignore[operator]
    result: dict[str, Any] = {"victim": victim, "victim_leaderships": len(led),
                              "sampled": len(sample)}  # fmt: skip
    try:
        await sampler.wait_first_acks()
        offset = cluster.log_size(victim)
        log(f"controlled shutdown: SIGTERM broker {victim} (leads {len(led)})")
        t_stop = result["stop_time"] = cluster.terminate(victim)
        record.did(t_stop, "shutdown", f"broker-{victim}")
        meta_done = await wait_all(cluster, topics, expected,
                                   lambda p: p.leader_id >= 0 and p.leader_id != victim,
                                   within=args.wait_s, what="leaders moved off the broker",
                                   node_ids=survivors, poll_s=args.poll_s)  # fmt: skip
        t_moved = max(meta_done.values())
        result["moved_s"] = t_moved - t_stop
        lines = await sampler.wait(
            lambda ls: len(sampler.acked_after(ls, t_moved)) == len(sample),
            args.wait_s,
            "acknowledgement after the move on every sampled partition",
        )
        gaps = sorted(longest_gap(lines, key, t_stop, t_moved) for key in sample)
        result["sample_gap_median_s"] = statistics.median(gaps)
        result["sample_gap_max_s"] = gaps[-1]
        result["sample_errors"] = sum(1 for x in lines if not x["ok"] and x["done"] > t_stop)
    finally:
        sampler.stop()
        record.sampler_lines += sampler.lines()
    gone = await trio.to_thread.run_sync(lambda: cluster.wait_gone(victim, within=args.wait_s))
    result["exit_s"] = None if gone is None else gone - t_stop
    # ZK mode's ControlledShutdown answered / Raft mode's heartbeat answer allowing it.
    for e in cluster.events(victim, offset=offset):
        if e.get("event") in SHUTDOWN_DONE and "timestamp" in e:
            result["succeeded_s"] = parse_time(e["timestamp"]) - t_stop
    return result


def longest_gap(
    lines: list[dict[str, Any]], key: tuple[str, int], start: float, end: float
) -> float:
    """The longest time between two acknowledgements of partition `key` from its last one
    before `start` to its first one after `end`."""
    acked = sorted(x["done"] for x in lines if x["ok"] and (x["topic"], x["partition"]) == key)
    before = [t for t in acked if t <= start]
    after = [t for t in acked if t > end]
    window = [t for t in acked if (before and t >= before[-1]) or t > start]
    window = [t for t in window if not after or t <= after[0]]
    if not before:
        window = [start, *window]
    return max((b - a for a, b in itertools.pairwise(window)), default=0.0)


def spread_sample(led: list[tuple[str, int]], n: int) -> list[tuple[str, int]]:
    """At most `n` of `led`, spread over it: every len(led)/n-th."""
    return led[:: max(1, len(led) // n)][:n]


async def leaderships_of(
    cluster: BenchCluster, broker: int, topics: set[str], ask: int
) -> list[tuple[str, int]]:
    """The partitions of `topics` that broker `ask`'s Metadata shows `broker` leading."""
    async with PooledTransport.open(client_id="bench-failover") as transport:
        node = cluster.node(ask)
        meta = await metadata_of(transport, node.host, node.port, timeout_s=60)
    return sorted(k for k, p in partitions_of(meta, topics).items() if p.leader_id == broker)


def start_profilers(
    cluster: BenchCluster, victim: int, label: str, args: argparse.Namespace
) -> list[subprocess.Popen[bytes]]:
    """With --profile-dir: `py-spy record --nonblocking` (collapsed stacks) of every live
    broker and controller but the victim for --profile-s seconds from just before the kill.
    Non-blocking so that the profiled processes keep their timing (a blocking py-spy stopped a
    quorum leader long enough to lose its epoch)."""
    if not args.profile_dir:
        return []
    out = Path(args.profile_dir)
    out.mkdir(parents=True, exist_ok=True)
    assert cluster.state is not None
    nodes = [n for n in (*cluster.state.brokers, *cluster.state.controllers)
             if n.node_id != victim and n.node_id in (*cluster.live_ids(),
                                                       *cluster.live_controller_ids())]  # fmt: skip
    spy = Path(sys.executable).parent / "py-spy"
    procs = []
    for n in nodes:
        command = [str(spy), "record", "--nonblocking", "--format", "raw", "--rate", "100",
                   "--duration", str(args.profile_s), "--pid", str(n.pid),
                   "--output", str(out / f"{cluster.mode}-{label}-{n.name}.txt")]  # fmt: skip
        procs.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    time.sleep(0.5)  # py-spy attaches before the kill; not synchronisation of the cluster
    return procs


def find_events(
    cluster: BenchCluster, survivors: list[int], offsets: dict[int, int], victim: int
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for i in survivors:
        for e in cluster.events(i, offset=offsets[i]):
            name = e.get("event")
            at = parse_time(e["timestamp"]) if "timestamp" in e else None
            if name == "controller active":
                found["controller_active"] = {**e, "broker": i, "at": at}
            elif name == "brokers changed" and victim in (e.get("dead") or ()):
                found["brokers_changed"] = {**e, "broker": i, "at": at}
            elif name == "broker fenced early" and e.get("broker_id") == victim:
                # Fast fencing: the BrokerChange of the victim, before its session expired.
                found["brokers_changed"] = {**e, "broker": i, "at": at, "fast": True,
                                            "event_s": e.get("fence_s", 0.0)}  # fmt: skip
            elif name == "controller requests answered" and at is not None:
                key = "answered_" + str(e.get("trigger", "")).replace(" ", "_")
                found.setdefault(key, {**e, "broker": i, "at": at})
    return found


def find_raft_events(cluster: BenchCluster, offsets: dict[int, int], victim: int) -> dict[str, Any]:
    """Raft mode: the active controller's "brokers fenced" naming `victim` (logged once the
    fencing records, with the victim's partitions re-elected, committed)."""
    found: dict[str, Any] = {}
    for i, offset in offsets.items():
        for e in cluster.events(i, "brokers fenced", offset=offset):
            if victim in (e.get("broker_ids") or ()) and "timestamp" in e:
                found["brokers_fenced"] = {**e, "controller": i, "at": parse_time(e["timestamp"])}
        for e in cluster.events(i, "broker fenced early", offset=offset):
            if e.get("broker_id") == victim and "timestamp" in e:
                found["brokers_fenced"] = {**e, "controller": i, "fast": True,
                                           "at": parse_time(e["timestamp"])}  # fmt: skip
    return found


# -- the controller's failover in Raft mode ---------------------------------------------------


async def create_probe(cluster: BenchCluster, within: float, label: str) -> float:
    """CreateTopics of a fresh 1-partition topic through the live brokers with the Admin
    client (which resends on NOT_CONTROLLER, as a broker's forward does) until it succeeds;
    returns the seconds it took from the call."""
    started = time.time()
    name = f"probe-{label}-{int(started * 1000)}"
    config = {"bootstrap.servers": cluster.live_bootstrap(),
              "default.api.timeout.ms": int(within * 1000), "request.timeout.ms": 30_000}  # fmt: skip
    async with Admin(config) as admin:
        await admin.create_topics([NewTopic(name, 1, 1)], timeout_ms=30_000)
    return time.time() - started


async def quorum_leader(cluster: BenchCluster) -> tuple[int, int]:
    """(leader id, epoch) from DescribeQuorum (`trioka quorum describe`'s code); (-1, -1)
    when no live controller knows a leader."""
    try:
        report = await quorum_report(cluster.live_controller_bootstrap(), timeout_s=2.0)
    except (KafkaError, OSError):
        return -1, -1
    return report.leader_id, report.leader_epoch


async def raft_controller_failover(
    cluster: BenchCluster, args: argparse.Namespace
) -> dict[str, Any]:
    """SIGKILL the active controller; time until DescribeQuorum names a new leader, until the
    new one logs "controller active", and until a fresh topic's CreateTopics completes."""
    old, epoch = await quorum_leader(cluster)
    if old < 0:
        raise RuntimeError("no active controller before the kill")
    survivors = [i for i in cluster.live_controller_ids() if i != old]
    offsets = {i: cluster.log_size(i) for i in survivors}
    log(f"controller: SIGKILL the active controller {old} (epoch {epoch})")
    t_kill = cluster.kill(old)
    result: dict[str, Any] = {"victim": old, "old_epoch": epoch, "kill_time": t_kill}

    async def watch_quorum() -> None:
        with trio.move_on_after(args.wait_s):
            while True:
                leader, new_epoch = await quorum_leader(cluster)
                if leader >= 0 and leader != old:
                    result["quorum_leader"] = leader
                    result["quorum_epoch"] = new_epoch
                    result["quorum_seen_s_after_kill"] = time.time() - t_kill
                    return
                await trio.sleep(0.05)  # polling a condition under the deadline

    async def probe() -> None:
        result["create_s_after_kill"] = await create_probe(cluster, args.wait_s, "controller")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_quorum)
        nursery.start_soon(probe)
    for i in survivors:
        for e in cluster.events(i, offset=offsets[i]):
            name, stamp = e.get("event"), e.get("timestamp")
            if stamp is None:
                continue
            if name == "raft role changed" and e.get("raft_role") == "leader":
                result["raft_leader"] = {**e, "at": parse_time(stamp)}
            elif name == "controller active":
                result["controller_active"] = {**e, "at": parse_time(stamp)}
    return result


# -- the report -------------------------------------------------------------------------------


def describe(result: dict[str, Any], session_s: float, label: str) -> list[str]:
    t_kill = result["kill_time"]
    out = [f"{label}: SIGKILL broker {result['victim']}, leader of "
           f"{result['victim_leaderships']:,} partitions"]  # fmt: skip
    changed = result.get("brokers_changed")
    active = result.get("controller_active")
    if active:
        out.append(
            f"  new controller broker {active['broker']} active {active['at'] - t_kill:.2f} s "
            f"after the kill: loaded {active.get('partitions', '?')} partitions "
            f"({active.get('records', '?')} records) in {active['load_s']:.2f} s (ZooKeeper "
            f"reads {active.get('zk_read_s', float('nan')):.2f} s, replay "
            f"{active.get('replay_s', float('nan')):.2f} s)"
        )
        failover = result.get("answered_failover")
        if failover:
            out.append(
                f"  its failover LeaderAndIsr/UpdateMetadata answered by every broker "
                f"{failover['since_s']:.2f} s after the load started "
                f"({failover['at'] - t_kill:.2f} s after the kill)"
            )
    if changed:
        start = changed["at"] - changed.get("event_s", 0.0)
        expiry = start
        out.append(
            f"  fast fencing decided (its BrokerChange started) {start - t_kill:.2f} s after the "
            f"kill ({changed.get('evidence')}; zookeeper.session.timeout.ms = {session_s:.2f} s)"
            if changed.get("fast")
            else f"  session expiry noticed (BrokerChange started) {start - t_kill:.2f} s after "
            f"the kill (kill + zookeeper.session.timeout.ms = {session_s:.2f} s)"
        )
        out.append(
            f"  (a) BrokerChange elections committed in {changed.get('event_s', float('nan')):.3f}"
            f" s (controller broker {changed['broker']})"
        )
        answered = result.get("answered_broker_change")
        if answered:
            out.append(
                f"      its LeaderAndIsr/UpdateMetadata answered {answered['at'] - expiry:.2f} s "
                "after the expiry"
            )
    elif active:
        expiry = active["at"] - active["load_s"]
        out.append(
            f"  session expiry noticed (election won, load started) {expiry - t_kill:.2f} s after"
            f" the kill (kill + zookeeper.session.timeout.ms = {session_s:.2f} s)"
        )
    else:
        expiry = t_kill + session_s
        out.append("  no controller event found: expiry taken as kill + session timeout")
    for key, name in (("election_metric", "LeaderElectionRateAndTimeMs"),
                      ("failover_metric", "ControllerChangeRateAndTimeMs")):  # fmt: skip
        metric = result.get(key)
        if metric:
            out.append(
                f"      {name} on broker {metric['broker']}: "
                f"{metric['events']:.0f} event(s), mean {metric['mean_ms']:.0f} ms"
            )
    meta = result["metadata_s_after_kill"]
    out.append(
        "  (b) every live broker's metadata shows live leaders "
        + ", ".join(f"broker {i}: {t_kill + s - expiry:.2f} s" for i, s in sorted(meta.items()))
        + " after the expiry"
    )
    out.append(
        f"  (c) all {result['sampled']} sampled partitions accept acks=all "
        f"{t_kill + result['sample_all_s_after_kill'] - expiry:.2f} s after the expiry "
        f"({result['sample_all_s_after_kill']:.2f} s after the kill); per-partition "
        f"unavailability median {result['sample_gap_median_s']:.2f} s, max "
        f"{result['sample_gap_max_s']:.2f} s; failed writes: {result['sample_errors']} after "
        f"the kill, {result['sample_errors_before_kill']} before it"
    )
    result["expiry_time"] = expiry
    return out


def describe_raft_broker(result: dict[str, Any], session_s: float) -> list[str]:
    """Raft mode's broker failover, measured from the active controller's fencing (the issue's
    definition: "from fencing until all its former leaderships are led again")."""
    t_kill = result["kill_time"]
    out = [f"broker failover: SIGKILL broker {result['victim']}, leader of "
           f"{result['victim_leaderships']:,} partitions"]  # fmt: skip
    fenced = result.get("brokers_fenced")
    if fenced:
        start = fenced["at"]
        how = (
            f"fast fencing: {fenced.get('evidence')}" if fenced.get("fast") else "its session ended"
        )
        out.append(
            f"  fenced by controller {fenced['controller']} {start - t_kill:.2f} s after the kill "
            f"({how}; broker.session.timeout.ms = {session_s:.2f} s; the event is logged once "
            "the fencing and its re-elections committed)"
        )
    else:
        start = t_kill + session_s
        out.append('  no "brokers fenced" event found: fencing taken as kill + session timeout')
    meta = result["metadata_s_after_kill"]
    out.append(
        "  (b) every live broker's metadata shows live leaders "
        + ", ".join(f"broker {i}: {t_kill + s - start:.2f} s" for i, s in sorted(meta.items()))
        + " after the fencing"
    )
    out.append(
        f"  (c) all {result['sampled']} sampled partitions accept acks=all "
        f"{t_kill + result['sample_all_s_after_kill'] - start:.2f} s after the fencing "
        f"({result['sample_all_s_after_kill']:.2f} s after the kill); per-partition "
        f"unavailability median {result['sample_gap_median_s']:.2f} s, max "
        f"{result['sample_gap_max_s']:.2f} s; failed writes: {result['sample_errors']} after "
        f"the kill, {result['sample_errors_before_kill']} before it"
    )
    result["expiry_time"] = start
    return out


def describe_raft_controller(result: dict[str, Any], election_timeout_s: float) -> list[str]:
    t_kill = result["kill_time"]
    out = [f"controller failover: SIGKILL the active controller {result['victim']} "
           f"(epoch {result['old_epoch']})"]  # fmt: skip
    raft_leader = result.get("raft_leader")
    if raft_leader:
        out.append(
            f"  controller {raft_leader['node_id']} won the election (epoch "
            f"{raft_leader['epoch']}) {raft_leader['at'] - t_kill:.2f} s after the kill "
            f"(election timeout {election_timeout_s:.2f} s, randomized in [T, 2T))"
        )
    if "quorum_seen_s_after_kill" in result:
        out.append(
            f"  DescribeQuorum named it {result['quorum_seen_s_after_kill']:.2f} s after the kill"
        )
    active = result.get("controller_active")
    if active:
        out.append(
            f'  "controller active" {active["at"] - t_kill:.2f} s after the kill: its epoch\'s '
            f"NoOp committed and the term started in {active['load_s']:.3f} s "
            f"({active.get('partitions', '?')} partitions, {active.get('records', '?')} records "
            "already replayed as a standby)"
        )
    create = result.get("create_s_after_kill")
    if create is not None:
        won = f"{create - (raft_leader['at'] - t_kill):.2f}" if raft_leader else "?"
        out.append(
            f"  CreateTopics of a fresh topic (sent at the kill, through a broker) completed "
            f"{create:.2f} s after the kill, {won} s after the election was won (a follower "
            "starts an election once controller.quorum.fetch.timeout.ms passes without the "
            "leader, then waits a randomized election timeout at most)"
        )
    return out


def run_mode(mode: str, args: argparse.Namespace, report: dict[str, Any], lines: list[str]) -> None:
    """One cluster in `mode`: create, broker failover, rejoin, controller failover; fills
    `report` and `lines` as it goes (what was measured survives a failed step)."""
    n_topics = args.topics or math.ceil(args.partitions / 100)
    names = [f"{TOPIC_PREFIX}-{i:04d}" for i in range(n_topics)]
    per_topic = [args.partitions // n_topics + (i < args.partitions % n_topics)
                 for i in range(n_topics)]  # fmt: skip
    topics = set(names)
    session_ms = args.session_timeout_ms or KAFKA_SESSION_TIMEOUT_MS[mode]
    session_s = session_ms / 1000
    overrides = {"auto.leader.rebalance.enable": "false",
                 **parse_key_values(args.broker_override, "--broker-override")}  # fmt: skip
    report.update(mode=mode, partitions=args.partitions, topics=n_topics, brokers=args.brokers)
    lines.append(f"== {mode} mode ==")
    election = {"controller.quorum.election.timeout.ms": str(args.election_timeout_ms)}
    with BenchCluster(mode=mode, brokers=args.brokers, session_timeout_ms=session_ms,
                      overrides=overrides, keep=args.keep,
                      controller_overrides=election if mode == "raft" else {}) as cluster:  # fmt: skip
        record = RunRecord()
        try:
            cluster.up()
            trio.run(cluster.wait_ready)
            log(f"{mode}: cluster up: {cluster.bootstrap}; creating topics")
            placeable, report["create_s"] = trio.run(
                create_topics, cluster.bootstrap, names, per_topic
            )
            report["placeable_wait_s"] = placeable
            log(f"RF=3 placeable after {placeable:.1f} s; created {args.partitions:,} partitions in "
                f"{report['create_s']:.1f} s")  # fmt: skip
            t0 = time.time()
            trio.run(lambda: wait_all(cluster, topics, args.partitions,
                                      lambda p: p.leader_id >= 0 and len(p.isr_nodes) == 3,
                                      within=args.wait_s, what="full ISRs"))  # fmt: skip
            report["full_isr_s"] = time.time() - t0
            log(f"all led with full ISRs {report['full_isr_s']:.1f} s after creation")
            if args.idle_s:
                report["idle"] = measure_idle(cluster, args.partitions, args.idle_s)

            async def controller() -> int:
                async with PooledTransport.open(client_id="bench-failover") as transport:
                    node = cluster.node(1)
                    return (await metadata_of(transport, node.host, node.port, ())).controller_id

            async def most_leaderships(exclude: int) -> int:
                async with PooledTransport.open(client_id="bench-failover") as transport:
                    node = cluster.node(cluster.live_ids()[0])
                    meta = await metadata_of(transport, node.host, node.port, timeout_s=60)
                counts = {i: 0 for i in cluster.live_ids() if i != exclude}
                for p in partitions_of(meta, topics).values():
                    if p.leader_id in counts:
                        counts[p.leader_id] += 1
                return max(counts, key=lambda i: (counts[i], i))

            # ZK mode: the victim is not the controller's broker (that is the second kill).
            victim = trio.run(most_leaderships, trio.run(controller) if mode == "zk" else -1)
            result = trio.run(functools.partial(
                kill_and_measure, cluster, victim, topics, args.partitions, args, "broker",
                record=record))  # fmt: skip
            more = (describe(result, session_s, "broker failover") if mode == "zk"
                    else describe_raft_broker(result, session_s))  # fmt: skip
            print("\n".join(more), flush=True)
            lines += more
            report["broker_failover"] = result

            if not (args.no_controller_kill and args.no_controlled_shutdown):
                lines.append(restart_and_rejoin(cluster, victim, topics, args, report,
                                                "rejoin_s", record))  # fmt: skip
                print(lines[-1], flush=True)
            if not args.no_controlled_shutdown:
                target = trio.run(most_leaderships, trio.run(controller) if mode == "zk" else -1)
                result = trio.run(shutdown_and_measure, cluster, target, topics, args.partitions,
                                  args, record)  # fmt: skip
                report["controlled_shutdown"] = result
                more = describe_shutdown(result)
                more.append(restart_and_rejoin(cluster, target, topics, args, report,
                                               "rejoin_after_shutdown_s", record))  # fmt: skip
                print("\n".join(more), flush=True)
                lines += more
            if not args.no_controller_kill:
                if mode == "zk":
                    ctrl = trio.run(controller)
                    result = trio.run(functools.partial(
                        kill_and_measure, cluster, ctrl, topics, args.partitions, args,
                        "controller", probe=True, record=record))  # fmt: skip
                    more = describe(result, session_s, "controller failover")
                    if "create_s_after_kill" in result:
                        more.append(f"  CreateTopics of a fresh topic (sent at the kill) completed "
                                    f"{result['create_s_after_kill']:.2f} s after the kill")  # fmt: skip
                else:
                    result = trio.run(raft_controller_failover, cluster, args)
                    record.did(result["kill_time"], "kill", f"controller-{result['victim']}")
                    more = describe_raft_controller(result, args.election_timeout_ms / 1000)
                print("\n".join(more), flush=True)
                lines += more
                report["controller_failover"] = result
        finally:
            if args.telemetry_dir:
                report["telemetry"] = export_telemetry(cluster, record, args)


def export_telemetry(
    cluster: BenchCluster, record: RunRecord, args: argparse.Namespace
) -> dict[str, Any]:
    """--telemetry-dir: the cluster's telemetry topics and what the benchmark did (sampler
    outcomes, kills, restarts) as a spool for `trioka report --spool DIR/<mode>-<N>`; a failure
    is reported in the JSON, it does not fail the run."""
    out = Path(args.telemetry_dir) / f"{cluster.mode}-{args.partitions}"
    log(f"exporting the telemetry to {out}")
    try:
        counts = export_run(cluster.live_bootstrap(), out, sampler_lines=record.sampler_lines,
                            faults=record.faults)  # fmt: skip
    except Exception as exc:  # reported, not fatal: the figures are measured already
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    log(f"telemetry exported: {counts}")
    return counts


def measure_idle(cluster: BenchCluster, partitions: int, window_s: float) -> dict[str, Any]:
    """Each broker's CPU (share of one core) over `window_s` of a quiet cluster, after 10 s to
    settle, and its RSS at the end (per partition replica: RF=3, so a broker holds
    3 * partitions / brokers replicas)."""
    log(f"idle: settling 10 s, then measuring {window_s:g} s")
    time.sleep(10)  # a quiet cluster is what is measured, not a condition
    assert cluster.state is not None
    pids = {b.node_id: b.pid for b in cluster.state.brokers}
    before = {i: cpu_s(pid) for i, pid in pids.items()}
    time.sleep(window_s)  # the measurement window itself
    replicas = 3 * partitions / len(pids)
    per = {i: {"cpu": (cpu_s(pid) - before[i]) / window_s, "rss": rss_bytes(pid)}
           for i, pid in pids.items()}  # fmt: skip
    return {
        "window_s": window_s,
        "brokers": per,
        "cpu_max": max(x["cpu"] for x in per.values()),
        "rss_max": max(x["rss"] for x in per.values()),
        "rss_per_replica_max": max(x["rss"] for x in per.values()) / replicas,
    }


def restart_and_rejoin(
    cluster: BenchCluster,
    broker: int,
    topics: set[str],
    args: argparse.Namespace,
    report: dict[str, Any],
    key: str,
    record: RunRecord,
) -> str:
    """Start `broker` again and time it until it is back in every ISR: report[key] (seconds),
    or report[key minus "_s" + "_error"] when not within --rejoin-wait-s (reported, not fatal: what
    follows does not need full ISRs)."""
    log(f"restarting broker {broker}")
    t0 = time.time()
    record.did(t0, "restart", f"broker-{broker}")
    start_broker(cluster.dir / "cluster", broker, timeout=args.wait_s)  # type: ignore[operator]
    cluster.state = read_state(cluster.dir / "cluster")  # type: ignore[operator]
    try:
        trio.run(lambda: wait_all(cluster, topics, args.partitions,
                                  lambda p: p.leader_id >= 0 and len(p.isr_nodes) == 3,
                                  within=args.rejoin_wait_s,
                                  what="full ISRs after the restart"))  # fmt: skip
    except RuntimeError as exc:
        report[key.removesuffix("_s") + "_error"] = str(exc)[:300]
        return (f"broker {broker} restarted: NOT back in every ISR within "
                f"{args.rejoin_wait_s:g} s ({str(exc)[:200]})")  # fmt: skip
    report[key] = time.time() - t0
    line = f"broker {broker} restarted: back in every ISR after {report[key]:.1f} s"
    # Leadership back where the placement put it (auto.leader.rebalance.enable is off), so
    # that the next step meets the balanced cluster of a first start.
    t0 = time.time()
    try:
        trio.run(balance_leaders, cluster, topics, args)
    except RuntimeError as exc:
        return f"{line}; preferred leaders NOT restored ({str(exc)[:200]})"
    return f"{line}; preferred leaders restored in {time.time() - t0:.1f} s"


async def balance_leaders(
    cluster: BenchCluster, topics: set[str], args: argparse.Namespace
) -> None:
    """A preferred leader election of every partition (`trioka partitions elect`'s), then wait
    until every live broker's Metadata shows each partition led by its first replica."""
    async with Admin({"bootstrap.servers": cluster.live_bootstrap()}) as admin:
        await admin.elect_leaders("preferred", None, timeout_ms=int(args.wait_s * 1000))
    await wait_all(cluster, topics, args.partitions,
                   lambda p: bool(p.replica_nodes) and p.leader_id == p.replica_nodes[0],
                   within=args.wait_s, what="preferred leaders")  # fmt: skip


def describe_shutdown(result: dict[str, Any]) -> list[str]:
    return [
        f"controlled shutdown: SIGTERM broker {result['victim']}, leader of "
        f"{result['victim_leaderships']:,} partitions",
        f"  every live broker's Metadata shows them led elsewhere {result['moved_s']:.2f} s "
        f"after the signal; the broker logged its controlled shutdown succeeded after "
        f"{_f(result.get('succeeded_s'))} s and exited after {_f(result.get('exit_s'))} s",
        f"  longest gap between acknowledgements of the {result['sampled']} sampled partitions, "
        f"median {result['sample_gap_median_s']:.2f} s, max {result['sample_gap_max_s']:.2f} s "
        f"(0.1 s is the sampler's pacing); failed writes: {result['sample_errors']}",
    ]


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def shutdown_cell(report: dict[str, Any]) -> str:
    s = report.get("controlled_shutdown")
    if not s or "moved_s" not in s:
        return "-"
    return (f"{s['victim_leaderships']:,} / {s['moved_s']:.2f} / {_f(s.get('exit_s'))} / "
            f"{_f(s.get('sample_gap_median_s'))}, {_f(s.get('sample_gap_max_s'))}")  # fmt: skip


def side_by_side(reports: list[dict[str, Any]]) -> list[str]:
    """One markdown table, a column per mode: the measures both modes share."""
    cols = []
    for r in reports:
        b = r.get("broker_failover", {})
        c = r.get("controller_failover", {})
        t_kill = b.get("kill_time", 0.0)
        start = b.get("expiry_time", t_kill)
        ck = c.get("kill_time", 0.0)
        after_election = None
        if r["mode"] == "zk":
            active = c.get("controller_active") or {}
            elected = active.get("at", ck) - active.get("load_s", 0.0) - ck if active else None
            if active and "create_s_after_kill" in c:
                after_election = c["create_s_after_kill"] - elected
            load = active.get("load_s")
            sample_c = c.get("sample_all_s_after_kill")
        else:
            leader = c.get("raft_leader")
            elected = leader["at"] - ck if leader else None
            if leader and "create_s_after_kill" in c:
                after_election = c["create_s_after_kill"] - elected
            active = c.get("controller_active") or {}
            load = active.get("load_s")
            sample_c = None
        cols.append({
            "create": f"{_f(r.get('create_s'), 1)} / {_f(r.get('full_isr_s'), 1)}",
            "leaderships": f"{b.get('victim_leaderships', 0):,}",
            "detect": _f(start - t_kill if b else None),
            "meta": _f(max(b["metadata_s_after_kill"].values()) + t_kill - start
                       if b.get("metadata_s_after_kill") else None),
            "sample": _f(b["sample_all_s_after_kill"] + t_kill - start
                         if "sample_all_s_after_kill" in b else None),
            "gap": f"{_f(b.get('sample_gap_median_s'))} / {_f(b.get('sample_gap_max_s'))}",
            "errors": str(b.get("sample_errors", "-")),
            "rejoin": _f(r.get("rejoin_s"), 1) if "rejoin_error" not in r else "not within the deadline",
            "shutdown": shutdown_cell(r),
            "idle": (f"{100 * r['idle']['cpu_max']:.1f}% / {r['idle']['rss_max'] / 2**20:.0f} MiB"
                     f" ({r['idle']['rss_per_replica_max'] / 1024:.1f} KB)" if "idle" in r else "-"),
            "rejoin_clean": (_f(r.get("rejoin_after_shutdown_s"), 1)
                             if "rejoin_after_shutdown_error" not in r
                             else "not within the deadline"),
            "elected": _f(elected),
            "load": _f(load),
            "create_probe": _f(c.get("create_s_after_kill")),
            "after_election": _f(after_election),
            "sample_c": _f(sample_c),
            "error": r.get("error", "-").replace("|", "/")[:120],
        })  # fmt: skip
    names = [
        ("create", "create the partitions / then all led with full ISRs (s)"),
        ("idle", "idle broker (the busiest): CPU of one core / RSS (per partition replica)"),
        ("leaderships", "broker kill: leaderships of the victim"),
        ("detect", "broker: detected after the kill (ZK session expiry / Raft fenced)"),
        ("meta", "broker: (b) every live broker's Metadata shows live leaders, from detection"),
        ("sample", "broker: (c) all sampled partitions accept acks=all, from detection"),
        ("gap", "broker: per-partition unavailability from the kill, median / max"),
        ("errors", "broker: failed acks=all writes of the sampler after the kill"),
        ("rejoin", "victim restarted: back in every ISR (s)"),
        (
            "shutdown",
            "controlled shutdown: leaderships / moved (all brokers' Metadata) / "
            "exited / gap median, max (s)",
        ),
        ("rejoin_clean", "that broker restarted: back in every ISR (s)"),
        ("elected", "controller kill: new controller elected after the kill"),
        ("load", "controller: its load (ZK: reads + replay; Raft: NoOp commit + activation)"),
        ("create_probe", "controller: CreateTopics of a fresh topic completed after the kill"),
        ("after_election", "controller: ... of which after the election (Raft goal: < 1 s)"),
        ("sample_c", "controller: (ZK) all sampled partitions of its broker accept acks=all"),
        ("error", "stopped by"),
    ]
    header = "| seconds unless marked | " + " | ".join(
        f"{r['mode']} {r['partitions']:,}" for r in reports) + " |"  # fmt: skip
    out = [header, "|---|" + "---|" * len(reports)]
    for key, label in names:
        out.append(f"| {label} | " + " | ".join(c[key] for c in cols) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("zk", "raft", "both"), default="both",
                        help="ZooKeeper mode, Raft mode, or both side by side (default)")  # fmt: skip
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--topics", type=int, default=0, help="default: 100 partitions each")
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--session-timeout-ms", type=int, default=0,
                        help="zookeeper.session.timeout.ms (zk) / broker.session.timeout.ms (raft);"
                        " default: Kafka's, 18000 / 9000")  # fmt: skip
    parser.add_argument("--election-timeout-ms", type=int, default=1000,
                        help="Raft mode's controller.quorum.election.timeout.ms (Kafka's "
                        "default 1000)")  # fmt: skip
    parser.add_argument("--wait-s", type=float, default=900.0, help="deadline of every wait")
    parser.add_argument("--rejoin-wait-s", type=float, default=300.0,
                        help="deadline for the restarted victim to be back in every ISR")  # fmt: skip
    parser.add_argument("--broker-override", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-controller-kill", action="store_true")
    parser.add_argument("--no-controlled-shutdown", action="store_true",
                        help="skip the controlled shutdown (SIGTERM) of the broker leading most")  # fmt: skip
    parser.add_argument("--brokers", type=int, default=3, help="brokers (at least 3: RF=3)")
    parser.add_argument("--telemetry-dir", default="",
                        help="write the cluster's telemetry and the benchmark's own operations to "
                        "DIR/<mode>-<partitions>/spool for `trioka report --spool`")  # fmt: skip
    parser.add_argument("--poll-s", type=float, default=0.1,
                        help="interval of the Metadata polls of every live broker during a "
                        "failover (each asks for every partition: at 25,000 the polls take CPU "
                        "the brokers need)")  # fmt: skip
    parser.add_argument("--idle-s", type=float, default=0.0,
                        help="measure the brokers' idle CPU and RSS over S seconds once every "
                        "partition has its full ISR (after 10 s to settle); 0: skip")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    parser.add_argument(
        "--profile-dir",
        default="",
        help="py-spy (collapsed stacks) of every live node around the broker "
        "kill, one file per node here",
    )
    parser.add_argument("--profile-s", type=int, default=20)
    args = parser.parse_args(argv)
    if args.brokers < 3:
        parser.error(f"--brokers must be at least 3 (RF=3), not {args.brokers}")
    if args.partitions < 1 or args.sample < 1 or args.topics < 0:
        parser.error("--partitions and --sample must be at least 1, --topics at least 0")
    if args.session_timeout_ms and args.session_timeout_ms < 2000:
        parser.error(f"--session-timeout-ms must be at least 2000, not {args.session_timeout_ms}")
    n_topics = args.topics or math.ceil(args.partitions / 100)
    if n_topics > args.partitions:
        parser.error(f"--topics {n_topics} is more than --partitions {args.partitions}")
    try:
        parse_key_values(args.broker_override, "--broker-override")
    except Exception as exc:
        parser.error(str(exc))
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)
    modes = ["zk", "raft"] if args.mode == "both" else [args.mode]

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"trioka failover benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC,"
          f" commit {commit}, {platform.node()}, {os.cpu_count()} CPUs; mode(s) "
          f"{', '.join(modes)}; {args.brokers} brokers, {args.partitions:,} partitions in {n_topics} topics, "
          f"RF=3, min.insync.replicas=2, session timeout "
          f"{args.session_timeout_ms or 'Kafka default'} ms "
          "(zookeeper.session.timeout.ms / broker.session.timeout.ms)", flush=True)  # fmt: skip
    reports: list[dict[str, Any]] = []
    lines: list[str] = []
    for mode in modes:
        report: dict[str, Any] = {"mode": mode, "partitions": args.partitions}
        reports.append(report)
        try:
            run_mode(mode, args, report, lines)
        except (RuntimeError, KafkaError, trio.TooSlowError) as exc:
            # Reported with what was measured before it; the next mode still runs.
            report["error"] = f"{type(exc).__name__}: {exc}"[:500]
            line = f"{mode} mode stopped: {report['error']}"
            print(line, flush=True)
            lines.append(line)
    print("\nsummary\n" + "\n".join(lines))
    print("\n" + "\n".join(side_by_side(reports)))
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
