"""Failover benchmark (issue 3): a broker's and the controller's SIGKILL with N partitions.

    .venv/bin/python bench/run_failover.py --partitions 3000 [--topics K] [--sample 50]
        [--session-timeout-ms 6000] [--broker-override k=v ...] [--no-controller-kill] [--json]

1. A ZK-mode cluster of 3 brokers as `trioka cluster up` starts it (Debian's ZooKeeper, broker
   processes, data in a temporary directory); `auto.leader.rebalance.enable=false` so nothing
   but the failures moves leadership. N partitions, RF=3, min.insync.replicas=2, in K topics
   (default: 100 partitions per topic), created through the controller in batches; the script
   waits until every partition has a leader and its full ISR (Metadata from a broker).
2. Broker failover: the broker (not the controller) with the most leaderships is the victim.
   A sampler process (bench/failover_sampler.py) writes acks=all records to `--sample` of its
   partitions, one at a time each. SIGKILL the victim. Reported, from the controller noticing
   the ZooKeeper session expiry (the start of its BrokerChange event: the "brokers changed" log
   event's time minus its event_s; kill time + zookeeper.session.timeout.ms as a cross-check):
   (a) the controller's BrokerChange event committed (its event_s, and the mean of
   LeaderElectionRateAndTimeMs observed meanwhile on /metrics) and its LeaderAndIsr /
   UpdateMetadata answered ("controller requests answered");
   (b) every live broker's metadata (a Metadata request to each) shows a live leader for every
   partition;
   (c) every sampled partition accepted an acks=all write again (and each one's gap between
   its last acknowledgement before the kill and its first after).
3. The victim is started again; the time until it is back in every ISR is reported.
4. Controller failover: the same with the controller's broker as the victim; reported from the
   new controller's "controller active" event (ZooKeeper read, replay, load) and its
   ControllerChangeRateAndTimeMs on /metrics, its failover requests answered, and (b), (c) as
   above.

Every process started is SIGKILLed by pid at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
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
from cluster_support import ROOT, BenchCluster, metadata_of, parse_time

from client import Admin, NewTopic
from deploy.cli_options import parse_key_values
from deploy.cluster import read_state, start_broker
from deploy.logging_config import configure_logging
from deploy.transport import PooledTransport
from protocol.messages.metadata import MetadataResponse

STATS = "kafka_controller_ControllerStats_"
ELECTION_METRIC = STATS + "LeaderElectionRateAndTimeMs"
"""The BrokerChange event's timer (Kafka kept the historical name)."""
FAILOVER_METRIC = STATS + "ControllerChangeRateAndTimeMs"
"""A ZK-mode failover (load and first requests) or resignation."""
TOPIC_PREFIX = "fo"


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


async def create_topics(bootstrap: str, names: list[str], per_topic: list[int]) -> float:
    started = time.monotonic()
    config = {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 600_000,
              "request.timeout.ms": 600_000}  # fmt: skip
    async with Admin(config) as admin:
        batch = 10  # topics per CreateTopics request: about 1,000 partitions
        for i in range(0, len(names), batch):
            await admin.create_topics(
                [NewTopic(n, c, 3, {"min.insync.replicas": "2"})
                 for n, c in zip(names[i : i + batch], per_topic[i : i + batch], strict=True)],
                timeout_ms=600_000,
            )  # fmt: skip
    return time.monotonic() - started


async def wait_all(
    cluster: BenchCluster,
    topics: set[str],
    expected: int,
    condition: Any,
    *,
    within: float,
    what: str,
    node_ids: list[int] | None = None,
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
                    await trio.sleep(0.1)  # polling a condition under the deadline
    if len(done) < len(ids):
        raise RuntimeError(f"no {what} within {within:g} s: {last}")
    return done


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
                env={**os.environ, "PYTHONPATH": str(ROOT), "TRIOKA_LOG_LEVEL": "ERROR"},
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
) -> dict[str, Any]:
    survivors = [i for i in cluster.live_ids() if i != victim]
    async with PooledTransport.open(client_id="bench-failover") as transport:
        node = cluster.node(survivors[0])
        meta = await metadata_of(transport, node.host, node.port, timeout_s=60)
    led = sorted(k for k, p in partitions_of(meta, topics).items() if p.leader_id == victim)
    # A spread sample: every len(led)/sample-th partition the victim leads.
    step = max(1, len(led) // args.sample)
    sample = led[::step][: args.sample]
    sampler = Sampler(cluster, sample, cluster.dir / f"sampler-{label}.jsonl")  # type: ignore[operator]
    result: dict[str, Any] = {"victim": victim, "victim_leaderships": len(led),
                              "sampled": len(sample)}  # fmt: skip
    try:
        wanted = set(sample)
        await sampler.wait(
            lambda lines: wanted <= {(x["topic"], x["partition"]) for x in lines if x["ok"]},
            120,
            "first acknowledgement on every sampled partition",
        )
        before_metrics = {i: scrape_elections(cluster.node(i).host, cluster.node(i).metrics_port)
                          for i in survivors}  # fmt: skip
        before_failover = {
            i: scrape_elections(cluster.node(i).host, cluster.node(i).metrics_port, FAILOVER_METRIC)
            for i in survivors
        }
        offsets = {i: cluster.log_size(i) for i in survivors}
        log(f"{label}: SIGKILL broker {victim} (leads {len(led)}; sampling {len(sample)})")
        t_kill = cluster.kill(victim)
        result["kill_time"] = t_kill

        # (b) every live broker's metadata shows a live leader for every partition.
        def led_live(p: Any) -> bool:
            return p.leader_id >= 0 and p.leader_id != victim

        meta_done = await wait_all(cluster, topics, expected, led_live,
                                   within=args.wait_s, what="live leaders",
                                   node_ids=survivors)  # fmt: skip
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

    # (a) the controller's own account, from its log events and /metrics.
    with trio.move_on_after(args.wait_s):
        while True:
            found = find_events(cluster, survivors, offsets, victim)
            # A new controller elects the dead one's partitions in its failover (it loads a
            # /brokers/ids without the victim), the old one in a BrokerChange.
            key = "answered_failover" if label == "controller" else "answered_broker_change"
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
            elif name == "controller requests answered" and at is not None:
                key = "answered_" + str(e.get("trigger", "")).replace(" ", "_")
                found.setdefault(key, {**e, "broker": i, "at": at})
    return found


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
            f"  session expiry noticed (BrokerChange started) {start - t_kill:.2f} s after the "
            f"kill (kill + zookeeper.session.timeout.ms = {session_s:.2f} s)"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--topics", type=int, default=0, help="default: 100 partitions each")
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--wait-s", type=float, default=900.0, help="deadline of every wait")
    parser.add_argument("--broker-override", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-controller-kill", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    args = parser.parse_args(argv)
    if args.partitions < 1 or args.sample < 1 or args.topics < 0:
        parser.error("--partitions and --sample must be at least 1, --topics at least 0")
    if args.session_timeout_ms < 2000:
        parser.error(f"--session-timeout-ms must be at least 2000, not {args.session_timeout_ms}")
    n_topics = args.topics or math.ceil(args.partitions / 100)
    if n_topics > args.partitions:
        parser.error(f"--topics {n_topics} is more than --partitions {args.partitions}")
    overrides = {"auto.leader.rebalance.enable": "false",
                 **parse_key_values(args.broker_override, "--broker-override")}  # fmt: skip
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)
    names = [f"{TOPIC_PREFIX}-{i:04d}" for i in range(n_topics)]
    per_topic = [args.partitions // n_topics + (i < args.partitions % n_topics)
                 for i in range(n_topics)]  # fmt: skip
    topics = set(names)
    session_s = args.session_timeout_ms / 1000

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"trioka failover benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC,"
          f" commit {commit}, {platform.node()}, {os.cpu_count()} CPUs; 3 brokers, "
          f"{args.partitions:,} partitions in {n_topics} topics, RF=3, min.insync.replicas=2, "
          f"zookeeper.session.timeout.ms={args.session_timeout_ms}", flush=True)  # fmt: skip
    report: dict[str, Any] = {"partitions": args.partitions, "topics": n_topics}
    lines: list[str] = []
    with BenchCluster(brokers=3, session_timeout_ms=args.session_timeout_ms,
                      overrides=overrides, keep=args.keep) as cluster:  # fmt: skip
        cluster.up()
        trio.run(cluster.wait_ready)
        log(f"cluster up: {cluster.bootstrap}; creating topics")
        report["create_s"] = trio.run(create_topics, cluster.bootstrap, names, per_topic)
        log(f"created {args.partitions:,} partitions in {report['create_s']:.1f} s")
        t0 = time.time()
        trio.run(lambda: wait_all(cluster, topics, args.partitions,
                                  lambda p: p.leader_id >= 0 and len(p.isr_nodes) == 3,
                                  within=args.wait_s, what="full ISRs"))  # fmt: skip
        report["full_isr_s"] = time.time() - t0
        log(f"all led with full ISRs {report['full_isr_s']:.1f} s after creation")

        async def controller() -> int:
            async with PooledTransport.open(client_id="bench-failover") as transport:
                node = cluster.node(1)
                return (await metadata_of(transport, node.host, node.port, ())).controller_id

        ctrl = trio.run(controller)
        others = [i for i in cluster.live_ids() if i != ctrl]
        victim = max(others)  # leaders are striped: each broker leads about a third
        broker_result = trio.run(kill_and_measure, cluster, victim, topics, args.partitions,
                                 args, "broker")  # fmt: skip
        lines += describe(broker_result, session_s, "broker failover")
        report["broker_failover"] = broker_result
        print("\n".join(lines), flush=True)

        if not args.no_controller_kill:
            log(f"restarting broker {victim}")
            t0 = time.time()
            start_broker(cluster.dir / "cluster", victim, timeout=args.wait_s)  # type: ignore[operator]
            cluster.state = read_state(cluster.dir / "cluster")  # type: ignore[operator]
            trio.run(lambda: wait_all(cluster, topics, args.partitions,
                                      lambda p: p.leader_id >= 0 and len(p.isr_nodes) == 3,
                                      within=args.wait_s, what="full ISRs after the restart"))  # fmt: skip
            report["rejoin_s"] = time.time() - t0
            line = f"broker {victim} restarted: back in every ISR after {report['rejoin_s']:.1f} s"
            print(line, flush=True)
            lines.append(line)
            ctrl = trio.run(controller)
            ctrl_result = trio.run(kill_and_measure, cluster, ctrl, topics, args.partitions,
                                   args, "controller")  # fmt: skip
            more = describe(ctrl_result, session_s, "controller failover")
            print("\n".join(more), flush=True)
            lines += more
            report["controller_failover"] = ctrl_result
    print("\nsummary\n" + "\n".join(lines))
    if args.json:
        print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
