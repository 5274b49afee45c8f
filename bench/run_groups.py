"""Consumer group benchmark (issue 5): OffsetCommit, rebalance, coordinator failover.

    .venv/bin/python bench/run_groups.py [--mode zk|raft|both] [--parts commits,rebalance,failover]
        [--groups 1,8] [--seconds 10] [--members 1,3,10] [--delays 3000,0]
        [--failover-members 3] [--consumer-props k=v ...] [--json]

A 3-broker cluster per metadata mode as `trioka cluster up --mode zk|raft` starts it
(`__consumer_offsets`: 50 partitions, RF=3, created by the first FindCoordinator). The members
are `client.Consumer`s with a group.id, trio tasks of this process (each its own connections),
with Kafka's consumer defaults (range assignor, session.timeout.ms 45000, heartbeat.interval.ms
3000) unless `--consumer-props` says otherwise.

(a) commits: for C concurrent groups (one member each, all reading a prefilled 6-partition
    topic), each member polls (at most `--poll-records` records) and commits its positions
    after every poll (commitSync: answered once the commit is replicated, HW past it), for
    `--seconds`; reported: commits/s over all groups, commit latency p50/p99/max.
(b) rebalance: a group of N members on a 12-partition topic is formed and Stable; then one
    more consumer subscribes. Reported: the time from its subscribe() until every member
    (N + 1) has its new assignment (on_partitions_assigned after the join, the assignments
    disjoint and covering the topic); and, for reference, the time the N members took to form
    the group from nothing. Run once per broker group.initial.rebalance.delay.ms in `--delays`
    (Kafka's default 3000, and 0 as its shipped dev config): each value is its own cluster,
    since the delay is a static broker config. Kafka applies the delay only to the first
    rebalance of an Empty group, so it shows in the formation, not in the join.
(c) failover: M members commit after every poll; the broker leading the group's
    `__consumer_offsets` partition (its coordinator; in ZK mode a group whose coordinator is
    not the controller's broker, so that this is a broker failover) is SIGKILLed. Times from
    the kill: detection (ZK: the session expiry as the controller saw it, the `brokers changed`
    event's time minus its event_s; Raft: the active controller's `brokers fenced`), the new
    leader of the offsets partition starting its load (`group coordinator loading`), the load
    done (`offsets partition loaded`, with its duration_ms), the first and the last member's
    first successful commit begun after the kill.

Every process started is SIGKILLed by pid at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import ROOT, BenchCluster, parse_time

from broker.group.hashing import OFFSETS_TOPIC, partition_for
from client import Admin, Consumer, NewTopic, Producer, TopicPartition
from client.consumer_coordinator import ConsumerRebalanceListener
from deploy.cli.options import parse_key_values
from deploy.telemetry.logs import configure_logging
from tests.support.waiting import wait_until

COMMIT_TOPIC, COMMIT_PARTITIONS, COMMIT_RECORDS = "bench-commits", 6, 60_000
REBALANCE_PARTITIONS = 12
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, Kafka's default (the cluster's too)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def latency_summary(latencies: list[float]) -> dict[str, float | None]:
    lat = sorted(latencies)
    if not lat:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"p50_ms": percentile(lat, 0.5) * 1000, "p99_ms": percentile(lat, 0.99) * 1000,
            "max_ms": lat[-1] * 1000}  # fmt: skip


async def wait_for(predicate: Callable[[], bool], within: float, what: str) -> None:
    """Poll a condition until it holds; a clear error naming `what` after `within` s."""
    try:
        await wait_until(predicate, within=within, every=0.02)
    except trio.TooSlowError:
        raise TimeoutError(f"{what}: not within {within:g} s") from None


class Recorder(ConsumerRebalanceListener):
    """A member's assignments, each with the wall-clock time it arrived."""

    def __init__(self) -> None:
        self.assigned: list[tuple[float, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.assigned.append((time.time(), frozenset(partitions)))

    def latest_since(self, t0: float) -> tuple[float, frozenset[TopicPartition]] | None:
        later = [a for a in self.assigned if a[0] >= t0]
        return later[-1] if later else None


class Member:
    """One Consumer in a group, polling (and optionally committing) until stopped."""

    def __init__(self, config: dict[str, Any], topic: str, *, commit: bool, poll_records: int,
                 poll_timeout_ms: float = 100) -> None:  # fmt: skip
        self.consumer = Consumer(config)
        self.topic = topic
        self.commit = commit
        self.poll_records = poll_records
        self.poll_timeout_ms = poll_timeout_ms
        self.records = 0
        self.listener = Recorder()
        self.commits: list[tuple[float, float]] = []  # (start, end) wall-clock, successes
        self.commit_errors: list[str] = []
        self.subscribed_at = 0.0
        self.stop = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.consumer as consumer:
            self.subscribed_at = time.time()
            consumer.subscribe([self.topic], self.listener)
            task_status.started()
            while not self.stop.is_set():
                polled = await consumer.poll(self.poll_timeout_ms, max_records=self.poll_records)
                self.records += len(polled)
                # Only once there are positions: an empty commit would send nothing.
                if self.commit and consumer.consumed_offsets():
                    await self._commit(consumer)

    async def _commit(self, consumer: Consumer) -> None:
        started = time.time()
        try:
            await consumer.commit()
        except Exception as exc:  # a failed commit is a finding: counted and shown
            self.commit_errors.append(f"{time.time():.3f} {exc!r}"[:200])
            return
        self.commits.append((started, time.time()))


async def prepare_topic(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    async with Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 60_000}) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 3, {"min.insync.replicas": "2"})])
        with trio.fail_after(60):
            while True:  # until every partition is led with its full ISR
                with contextlib.suppress(Exception):
                    parts = [p for t in await admin.describe_topics([topic]) for p in t.partitions]
                    if len(parts) == partitions and all(
                        p.leader >= 0 and len(p.isr) == 3 for p in parts
                    ):
                        break
                await trio.sleep(0.1)  # polling a condition under the deadline above
    if records:
        async with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
            for i in range(records):
                await producer.send(topic, b"x" * 100, key=str(i).encode())
            await producer.flush()


# -- (a) commits --------------------------------------------------------------------------------


async def bench_commits(bootstrap: str, groups: int, args: argparse.Namespace,
                        label: str) -> dict[str, Any]:  # fmt: skip
    config = {**args.consumer_config, "bootstrap.servers": bootstrap,
              "auto.offset.reset": "earliest", "enable.auto.commit": "false"}  # fmt: skip
    members = [Member({**config, "group.id": f"commits-{label}-{groups}-{i}"}, COMMIT_TOPIC,
                      commit=True, poll_records=args.poll_records,
                      poll_timeout_ms=args.poll_timeout_ms) for i in range(groups)]  # fmt: skip
    async with trio.open_nursery() as nursery:
        for m in members:
            await nursery.start(m.run)
        # Warm-up: every group formed and has committed once (coordinator found, loaded).
        await wait_for(lambda: all(m.commits for m in members), 120, "every group's first commit")
        t0 = time.time()
        await trio.sleep(args.seconds)  # the measuring window: load runs meanwhile
        t1 = time.time()
        for m in members:
            m.stop.set()
    records = sum(m.records for m in members)
    inside = [end - start for m in members for start, end in m.commits if start >= t0 and end <= t1]
    errors = [e for m in members for e in m.commit_errors]
    return {"groups": groups, "commits": len(inside), "seconds": t1 - t0,
            "commits_per_s": len(inside) / (t1 - t0), "records_polled": records,
            "errors": len(errors), "error_samples": errors[:3], **latency_summary(inside)}  # fmt: skip


# -- (b) rebalance ------------------------------------------------------------------------------


def settled_since(members: list[Member], t0: float, partitions: int) -> float | None:
    """When every member had an assignment arriving after t0 and together they cover the topic
    once (the new generation's), the time the last one arrived; else None."""
    latest = [m.listener.latest_since(t0) for m in members]
    if any(a is None for a in latest):
        return None
    sets = [a[1] for a in latest if a is not None]
    union = frozenset().union(*sets)
    if len(union) != partitions or sum(len(s) for s in sets) != partitions:
        return None
    return max(a[0] for a in latest if a is not None)


async def bench_rebalance(bootstrap: str, n: int, delay_ms: int, args: argparse.Namespace,
                          label: str) -> dict[str, Any]:  # fmt: skip
    topic = f"rebal-{label}"
    group = f"rebal-{label}-{n}-{delay_ms}"
    config = {**args.consumer_config, "bootstrap.servers": bootstrap, "group.id": group}
    members = [Member(config, topic, commit=False, poll_records=100) for _ in range(n)]
    async with trio.open_nursery() as nursery:
        t_form = time.time()
        for m in members:
            await nursery.start(m.run)
        await wait_for(lambda: settled_since(members, t_form, REBALANCE_PARTITIONS) is not None,
                       120, f"a group of {n} formed")  # fmt: skip
        formed = settled_since(members, t_form, REBALANCE_PARTITIONS)
        assert formed is not None
        joiner = Member(config, topic, commit=False, poll_records=100)
        await nursery.start(joiner.run)
        t0 = joiner.subscribed_at
        everyone = [*members, joiner]
        await wait_for(lambda: settled_since(everyone, t0, REBALANCE_PARTITIONS) is not None,
                       120, f"the group of {n} + 1 rebalanced")  # fmt: skip
        done = settled_since(everyone, t0, REBALANCE_PARTITIONS)
        assert done is not None
        for m in everyone:
            m.stop.set()
    return {"members": n, "delay_ms": delay_ms, "form_s": formed - t_form, "join_s": done - t0}


# -- (c) coordinator failover -------------------------------------------------------------------


async def offsets_leaders(bootstrap: str) -> tuple[dict[int, int], int]:
    """Leader per __consumer_offsets partition, and the controller id (ZK mode's controller
    broker; a controller node id in Raft mode)."""
    async with Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 60_000}) as admin:
        with trio.fail_after(60):
            while True:
                with contextlib.suppress(Exception):
                    (topic,) = await admin.describe_topics([OFFSETS_TOPIC])
                    leaders = {p.partition: p.leader for p in topic.partitions}
                    if len(leaders) == OFFSETS_PARTITIONS and min(leaders.values()) >= 0:
                        return leaders, (await admin.describe_cluster()).controller_id
                await trio.sleep(0.2)  # polling a condition under the deadline above


def pick_group(prefix: str, leaders: dict[int, int], avoid: int) -> tuple[str, int]:
    """A group id whose offsets partition is not led by broker `avoid`."""
    for i in range(1000):
        group = f"{prefix}-{i}"
        partition = partition_for(group, OFFSETS_PARTITIONS)
        if leaders[partition] != avoid:
            return group, partition
    raise RuntimeError("no group id found off the controller's broker")


def failover_events(cluster: BenchCluster, mode: str, victim: int, partition: int,
                    after: float) -> dict[str, float]:  # fmt: skip
    """Wall-clock times of the failover's steps from the nodes' JSON logs."""
    found: dict[str, float] = {}
    nodes = cluster.live_controller_ids() if mode == "raft" else cluster.live_ids()
    for node in nodes:
        for e in cluster.events(node):
            at = parse_time(e["timestamp"]) if "timestamp" in e else 0.0
            if at < after:
                continue
            name = e.get("event")
            if mode == "zk" and name == "brokers changed" and victim in (e.get("dead") or ()):
                found.setdefault("detected", at - float(e.get("event_s", 0.0)))
            if (
                mode == "raft"
                and name == "brokers fenced"
                and victim in (e.get("broker_ids") or ())
            ):
                found.setdefault("detected", at)
    tp = f"{OFFSETS_TOPIC}-{partition}"
    for node in cluster.live_ids():
        for e in cluster.events(node):
            at = parse_time(e["timestamp"]) if "timestamp" in e else 0.0
            if at < after:
                continue
            name = e.get("event")
            if name == "group coordinator loading" and e.get("partition") == partition:
                found.setdefault("load_started", at)
                found.setdefault("new_coordinator", float(node))
            if name == "offsets partition loaded" and e.get("topic_partition") == tp:
                found.setdefault("loaded", at)
                found.setdefault("load_ms", float(e.get("duration_ms", 0)))
    return found


async def bench_failover(cluster: BenchCluster, mode: str, args: argparse.Namespace
                         ) -> dict[str, Any]:  # fmt: skip
    bootstrap = cluster.bootstrap
    leaders, controller = await offsets_leaders(bootstrap)
    group, partition = pick_group(f"failover-{mode}", leaders, controller if mode == "zk" else -1)
    victim = leaders[partition]
    config = {**args.consumer_config, "bootstrap.servers": bootstrap, "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": "false"}  # fmt: skip
    members = [Member(config, COMMIT_TOPIC, commit=True, poll_records=args.poll_records,
                      poll_timeout_ms=args.poll_timeout_ms)
               for _ in range(args.failover_members)]  # fmt: skip
    async with trio.open_nursery() as nursery:
        for m in members:
            await nursery.start(m.run)
        await wait_for(lambda: all(m.commits for m in members), 120, "every member's commit")
        await trio.sleep(1.0)  # a second of steady commits before the kill (the baseline)
        killed_at = await trio.to_thread.run_sync(cluster.kill, victim)
        log(f"{mode}: killed broker {victim}, coordinator of {group} (offsets partition "
            f"{partition})")  # fmt: skip
        await wait_for(lambda: all(any(s > killed_at for s, _ in m.commits) for m in members),
                       args.failover_wait, "every member committed after the kill")  # fmt: skip
        for m in members:
            m.stop.set()
    firsts = [min(e for s, e in m.commits if s > killed_at) for m in members]
    ev = failover_events(cluster, mode, victim, partition, killed_at)

    def since(key: str) -> float | None:
        return ev[key] - killed_at if key in ev else None

    return {"mode": mode, "group": group, "partition": partition, "victim": victim,
            "new_coordinator": int(ev["new_coordinator"]) if "new_coordinator" in ev else None,
            "detected_s": since("detected"), "load_started_s": since("load_started"),
            "loaded_s": since("loaded"), "load_ms": ev.get("load_ms"),
            "first_commit_s": min(firsts) - killed_at, "all_committed_s": max(firsts) - killed_at,
            "commit_errors": sum(len(m.commit_errors) for m in members)}  # fmt: skip


# -- running ------------------------------------------------------------------------------------


def run_cluster(mode: str, delay_ms: int, parts: set[str], args: argparse.Namespace
                ) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {"mode": mode, "delay_ms": delay_ms}
    overrides = {"group.initial.rebalance.delay.ms": str(delay_ms)}
    with BenchCluster(mode=mode, brokers=3, keep=args.keep, overrides=overrides) as cluster:
        cluster.up()
        trio.run(cluster.wait_ready)
        log(f"{mode}: cluster up (group.initial.rebalance.delay.ms={delay_ms}): "
            f"{cluster.bootstrap}")  # fmt: skip
        bootstrap = cluster.bootstrap
        if "commits" in parts or "failover" in parts:
            trio.run(prepare_topic, bootstrap, COMMIT_TOPIC, COMMIT_PARTITIONS, COMMIT_RECORDS)
        if "commits" in parts:
            out["commits"] = []
            for c in args.groups:
                r = trio.run(bench_commits, bootstrap, c, args, f"{mode}{delay_ms}")
                log(f"{mode}: commits C={c}: {r['commits_per_s']:,.0f}/s p50 {r['p50_ms']:.1f} "
                    f"p99 {r['p99_ms']:.1f} ms, errors {r['errors']}")  # fmt: skip
                out["commits"].append(r)
        if "rebalance" in parts:
            out["rebalance"] = []
            for n in args.members:
                topic = f"rebal-{mode}{delay_ms}-{n}"
                trio.run(prepare_topic, bootstrap, topic, REBALANCE_PARTITIONS, 0)
                r = trio.run(bench_rebalance, bootstrap, n, delay_ms, args, f"{mode}{delay_ms}-{n}")
                log(f"{mode}: rebalance N={n} delay={delay_ms}: formed in {r['form_s']:.2f} s, "
                    f"join -> all assigned in {r['join_s']:.2f} s")  # fmt: skip
                out["rebalance"].append(r)
        if "failover" in parts:
            out["failover"] = trio.run(bench_failover, cluster, mode, args)
            log(f"{mode}: failover {out['failover']}")
    return out


def fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def tables(results: list[dict[str, Any]]) -> str:
    lines = []
    commits = [(r["mode"], c) for r in results for c in r.get("commits", [])]
    if commits:
        lines += ["", "(a) OffsetCommit after every poll",
                  "| mode | groups C | commits/s | p50 ms | p99 ms | max ms | errors |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {m} | {c['groups']} | {c['commits_per_s']:,.0f} | {fmt(c['p50_ms'])} | "
                  f"{fmt(c['p99_ms'])} | {fmt(c['max_ms'])} | {c['errors']} |"
                  for m, c in commits]  # fmt: skip
    rebal = [(r["mode"], b) for r in results for b in r.get("rebalance", [])]
    if rebal:
        lines += ["", "(b) rebalance: one consumer joins a Stable group of N",
                  "| mode | N | group.initial.rebalance.delay.ms | join -> all N+1 assigned (s) | "
                  "forming the N-member group (s) |", "|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {m} | {b['members']} | {b['delay_ms']} | {b['join_s']:.2f} | "
                  f"{b['form_s']:.2f} |" for m, b in rebal]  # fmt: skip
    fails = [r["failover"] for r in results if "failover" in r]
    if fails:
        lines += ["", "(c) coordinator failover: SIGKILL of the coordinator's broker "
                  "(seconds from the kill)",
                  "| mode | detected | new leader loading | loaded (load ms) | first member "
                  "commits | all members commit | commit errors |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {f['mode']} | {fmt(f['detected_s'])} | {fmt(f['load_started_s'])} | "
                  f"{fmt(f['loaded_s'])} ({f['load_ms']}) | {f['first_commit_s']:.2f} | "
                  f"{f['all_committed_s']:.2f} | {f['commit_errors']} |" for f in fails]  # fmt: skip
    return "\n".join(lines)


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("zk", "raft", "both"), default="both")
    parser.add_argument("--parts", default="commits,rebalance,failover")
    parser.add_argument("--groups", type=int_list, default=[1, 8], help="C values for (a)")
    parser.add_argument("--seconds", type=float, default=10.0, help="(a)'s measuring window")
    parser.add_argument("--poll-records", type=int, default=10, help="max records per poll")
    parser.add_argument("--poll-timeout-ms", type=float, default=0,
                        help="poll timeout of the committing members (0: commits are never "
                        "held up by an idle fetch)")  # fmt: skip
    parser.add_argument("--members", type=int_list, default=[1, 3, 10], help="N values for (b)")
    parser.add_argument("--delays", type=int_list, default=[3000, 0],
                        help="group.initial.rebalance.delay.ms values for (b)")  # fmt: skip
    parser.add_argument("--failover-members", type=int, default=3)
    parser.add_argument("--failover-wait", type=float, default=90.0)
    parser.add_argument("--consumer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directories")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"commits", "rebalance", "failover"}
    if unknown or not parts:
        parser.error(f"--parts takes commits, rebalance, failover; not {sorted(unknown)}")
    if any(v < 1 for v in [*args.groups, *args.members, args.failover_members]):
        parser.error("--groups, --members and --failover-members must be at least 1")
    if max(args.members) + 1 > REBALANCE_PARTITIONS:
        parser.error(f"--members: at most {REBALANCE_PARTITIONS - 1} (a {REBALANCE_PARTITIONS}-"
                     f"partition topic, every member assigned)")  # fmt: skip
    try:
        args.consumer_config = parse_key_values(args.consumer_props, "--consumer-props")
    except Exception as exc:
        parser.error(str(exc))
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)
    modes = ["zk", "raft"] if args.mode == "both" else [args.mode]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"trioka consumer group benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
          f" UTC, commit {commit}, {platform.node()}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}; modes {', '.join(modes)}; parts {', '.join(sorted(parts))}"
          f"; consumer props {args.consumer_props or 'defaults'}", flush=True)  # fmt: skip
    started = time.monotonic()
    results = []
    for mode in modes:
        # The delay is a static broker config, so one cluster per value: the last value's
        # (0 by default, as the dev configs) runs every part, the others only the rebalance.
        for i, delay in enumerate(args.delays if "rebalance" in parts else args.delays[-1:]):
            mine = parts if i == len(args.delays) - 1 or "rebalance" not in parts else {
                "rebalance"}  # fmt: skip
            results.append(run_cluster(mode, delay, mine, args))
    print(tables(results))
    print(f"done in {time.monotonic() - started:.1f} s, load {os.getloadavg()[0]:.1f}")
    if args.json:
        print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
