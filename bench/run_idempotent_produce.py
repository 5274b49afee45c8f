"""Idempotent produce benchmark (issue 5): acks=all with enable.idempotence on vs off, same load.

    .venv/bin/python bench/run_idempotent_produce.py [--mode zk|raft|both] [--no-combined]
        [--runs 2] [--records 100000] [--record-size 1024] [--partitions 6]
        [--latency-seconds 10] [--profile-seconds 0] [--producer-props k=v ...] [--json]

Setups: a 3-broker cluster per metadata mode (`trioka cluster up --mode zk|raft`: RF=3,
min.insync.replicas=2) and the single combined broker (`python -m deploy.node.broker`, Raft mode's
default one-node process: RF=1). In each, per run, two fresh topics of P partitions get the same
load from `trioka perf produce --acks all` client processes (never the brokers' event loop), one
with `enable.idempotence=true` (Kafka 3's default) and one with `false`; odd runs start with
idempotence on, even runs off. Several batches are in flight: the producer's defaults
(max.in.flight.requests.per.connection 5, batch.size 16384, linger.ms 5) over P partitions led
by every broker. Per run and setting:

1. throughput: N records as fast as the producer offers them (kafka-producer-perf-test's
   throughput -1); latency there is mostly time queued in buffer.memory;
2. latency of the acks: the same producer at a fixed rate of half the idempotence-off
   throughput just measured, for `--latency-seconds`: p50/p99 from send() to the acks=all
   acknowledgement.

`--profile-seconds S` runs `py-spy record --nonblocking` on one leader (broker 1 of the cluster,
the combined node) for S seconds during each throughput phase and prints the share of its
(non-idle) samples in the idempotence code (storage/producer_state.py, storage/producer_snapshots.py,
broker/producer_ids.py) and in the leader's append; raw stacks are kept in the output
directory printed. Every process started is SIGKILLed by pid at the end, also on Ctrl-C or
SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import ROOT, BenchCluster, run_json
from run_single_broker import Broker

from client import Admin, NewTopic
from deploy.cli.options import parse_key_values
from deploy.telemetry.logs import configure_logging

# What counts as "the cost of idempotence" in a leader's profile, by source file or function.
PROFILE_BUCKETS = {
    "sequence check + producer state": (
        "Log._check_producer",
        "producer_state.py",
        "producer_snapshots.py",
    ),
    "producer ids": ("producer_ids.py",),
    "Log.append_as_leader": ("Log.append_as_leader",),
    "Log.append_as_follower": ("Log.append_as_follower",),
    "ProduceHandler.produce": ("ProduceHandler.produce",),
    "replica fetcher": ("ReplicaFetcher",),
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def perf_command(bootstrap: str, topic: str, records: int, size: int, idempotence: bool,
                 props: list[str], rate: float | None = None) -> list[str]:  # fmt: skip
    cmd = [sys.executable, "-m", "deploy.cli", "perf", "produce", "-t", topic, "-b", bootstrap,
           "-n", str(records), "-s", str(size), "--acks", "all", "--json", "--no-progress",
           f"-Xenable.idempotence={'true' if idempotence else 'false'}"]  # fmt: skip
    if rate is not None:
        cmd += ["--throughput", f"{rate:.0f}"]
    return cmd + [f"-X{p}" for p in props]


async def create_topics(bootstrap: str, names: list[str], partitions: int, rf: int) -> None:
    configs = {"min.insync.replicas": "2"} if rf >= 3 else {}
    async with Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 60_000}) as admin:
        await admin.create_topics([NewTopic(n, partitions, rf, configs) for n in names],
                                  timeout_ms=60_000)  # fmt: skip
        with trio.fail_after(120):
            while True:  # until every partition has a leader and its whole replica set in sync
                with contextlib.suppress(Exception):  # a broker without the topic yet
                    parts = [p for t in await admin.describe_topics(names) for p in t.partitions]
                    if len(parts) == partitions * len(names) and all(
                        p.leader >= 0 and len(p.isr) == rf for p in parts
                    ):
                        return
                await trio.sleep(0.2)  # polling a condition under the deadline above


@contextlib.contextmanager
def profiled(pid: int | None, seconds: float, out: Path) -> Iterator[None]:
    """py-spy on `pid` for `seconds` (non-blocking: the broker is never stopped) while the body
    runs; the raw (collapsed) stacks land in `out`."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if pid is None or seconds <= 0 or not Path(spy).exists():
        yield
        return
    proc = subprocess.Popen([spy, "record", "--nonblocking", "-r", "100", "-d", str(max(1, round(seconds))),
                             "-p", str(pid), "-f", "raw", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=out.with_suffix(".err").open("wb"),
                            start_new_session=True)  # fmt: skip
    try:
        yield
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=seconds + 30)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def profile_shares(path: Path) -> dict[str, Any] | None:
    """Share of the samples (stacks; py-spy keeps only non-idle ones by default) that pass
    through each bucket of PROFILE_BUCKETS."""
    if not path.exists():
        return None
    total = 0
    hits = dict.fromkeys(PROFILE_BUCKETS, 0)
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        for bucket, needles in PROFILE_BUCKETS.items():
            if any(n in stack for n in needles):
                hits[bucket] += count
    return {"samples": total, "share": {k: v / max(1, total) for k, v in hits.items()}}


def one_setup(name: str, bootstrap: str, rf: int, leader_pid: int | None,
              args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:  # fmt: skip
    results = []
    for run in range(1, args.runs + 1):
        topics = {True: f"idem-on-r{run}", False: f"idem-off-r{run}"}
        trio.run(create_topics, bootstrap, list(topics.values()), args.partitions, rf)
        order = [True, False] if run % 2 else [False, True]
        out: dict[str, Any] = {"setup": name, "run": run}
        for idem in order:
            key = "on" if idem else "off"
            prof = workdir / f"{name.split()[0]}-r{run}-{key}.raw"
            cmd = perf_command(bootstrap, topics[idem], args.records, args.record_size, idem,
                               args.producer_props)  # fmt: skip
            with profiled(leader_pid, args.profile_seconds, prof):
                out[key] = run_json(cmd, timeout=args.client_timeout)
            out[key]["profile"] = profile_shares(prof)
            report(name, run, f"idempotence {key}, max rate", out[key])
        rate = max(1.0, out["off"]["records_per_sec"] / 2)
        count = max(1, int(rate * args.latency_seconds))
        for idem in order:
            key = "on" if idem else "off"
            cmd = perf_command(bootstrap, topics[idem], count, args.record_size, idem,
                               args.producer_props, rate)  # fmt: skip
            out[f"lat_{key}"] = run_json(cmd, timeout=args.client_timeout)
            out[f"lat_{key}"]["target_rate"] = rate
            report(name, run, f"idempotence {key}, {rate:,.0f} rec/s", out[f"lat_{key}"])
        results.append(out)
    return results


def report(setup: str, run: int, what: str, r: dict[str, Any]) -> None:
    failed = f"  FAILED {r['failed']}" if r.get("failed") else ""
    log(f"{setup} run {run} {what:30} {r['records_per_sec']:>9,.0f} rec/s "
        f"{r['mb_per_sec']:>6.1f} MB/s  p50 {r['latency_p50_ms']:6.1f}  p99 "
        f"{r['latency_p99_ms']:7.1f} ms{failed}")  # fmt: skip


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| setup | run | off: MB/s (rec/s) | on: MB/s (rec/s) | on/off | acks p50 / p99 "
            "off (ms) | acks p50 / p99 on (ms) | at rate |",
            "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        off, on, lo, ln = r["off"], r["on"], r["lat_off"], r["lat_on"]
        ratio = on["records_per_sec"] / off["records_per_sec"] if off["records_per_sec"] else 0
        rows.append(
            f"| {r['setup']} | {r['run']} | {off['mb_per_sec']:.1f} ({off['records_per_sec']:,.0f})"
            f" | {on['mb_per_sec']:.1f} ({on['records_per_sec']:,.0f}) | {ratio:.2f} | "
            f"{lo['latency_p50_ms']:.1f} / {lo['latency_p99_ms']:.1f} | "
            f"{ln['latency_p50_ms']:.1f} / {ln['latency_p99_ms']:.1f} | "
            f"{lo['target_rate']:,.0f} rec/s |"
        )
    for setup in dict.fromkeys(r["setup"] for r in results):
        mine = [r for r in results if r["setup"] == setup]
        if len(mine) > 1:
            ratio = statistics.median(r["on"]["records_per_sec"] / r["off"]["records_per_sec"]
                                      for r in mine)  # fmt: skip
            rows.append(f"| {setup} | median | | | **{ratio:.2f}** | | | |")
    return "\n".join(rows)


def profile_table(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        for key in ("off", "on"):
            p = r[key].get("profile")
            if not p:
                continue
            shares = ", ".join(f"{k} {v:.1%}" for k, v in p["share"].items())
            lines.append(f"{r['setup']} run {r['run']} idempotence {key}: {p['samples']} "
                         f"samples: {shares}")  # fmt: skip
    return "\n".join(lines)


def run_cluster_setup(mode: str, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    with BenchCluster(mode=mode, brokers=3, keep=args.keep) as cluster:
        cluster.up()
        trio.run(cluster.wait_ready)
        log(f"{mode}: 3-broker cluster up: {cluster.bootstrap}")
        return one_setup(f"{mode} 3 brokers RF=3", cluster.bootstrap, 3, cluster.node(1).pid,
                         args, workdir)  # fmt: skip


def run_combined_setup(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="trioka-bench-combined-") as tmp:
        broker = Broker(Path(tmp), {})
        try:
            trio.run(broker.wait_ready)
            log(f"combined node up: {broker.bootstrap}")
            return one_setup("combined RF=1", broker.bootstrap, 1, broker.proc.pid, args,
                             workdir)  # fmt: skip
        finally:
            broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("zk", "raft", "both", "none"), default="both",
                        help="3-broker cluster(s) to run; none: only the combined node")  # fmt: skip
    parser.add_argument("--no-combined", action="store_true", help="skip the combined node")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--records", type=int, default=100_000, help="records per max-rate run")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--profile-seconds", type=float, default=0.0,
                        help="py-spy the leader for this long during each max-rate phase")  # fmt: skip
    parser.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--client-timeout", type=float, default=900.0)
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    args = parser.parse_args(argv)
    for flag, value in (("--runs", args.runs), ("--records", args.records),
                        ("--partitions", args.partitions)):  # fmt: skip
        if value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    try:
        parse_key_values(args.producer_props, "--producer-props")
    except Exception as exc:
        parser.error(str(exc))
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)
    modes = {"both": ["zk", "raft"], "none": []}.get(args.mode, [args.mode])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"trioka idempotent produce benchmark, "
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit}, {platform.node()}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}; acks=all, {args.records:,} x {args.record_size} B, "
          f"{args.partitions} partitions, producer props {args.producer_props or 'defaults'}",
          flush=True)  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="trioka-bench-idem-"))
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    for mode in modes:
        results += run_cluster_setup(mode, args, workdir)
    if not args.no_combined:
        results += run_combined_setup(args, workdir)
    print()
    print(table(results))
    if args.profile_seconds > 0:
        print(profile_table(results))
        print(f"py-spy raw stacks: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"done in {time.monotonic() - started:.1f} s, load {os.getloadavg()[0]:.1f}")
    if args.json:
        print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
