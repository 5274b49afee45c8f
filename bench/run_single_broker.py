"""Single-broker benchmark (issue 2): acks=1 produce and consume, 100 B and 1 KiB records.

    .venv/bin/python bench/run_single_broker.py [--records-100b N] [--records-1k N]
        [--partitions P] [--producer-props k=v ...] [--consumer-props k=v ...] [--json]

Starts one single-node broker (`python -m deploy.node.broker`, KRaft combined by default) on a free loopback port with its
data in a temporary directory, creates one topic per record size, runs the same code as
`trioka perf produce` / `trioka perf consume` in this process, prints the figures next to the
issue's targets, and stops the broker (SIGTERM; SIGKILL by pid if it lingers).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from client import Admin  # noqa: E402
from deploy.cli.options import parse_key_values  # noqa: E402
from deploy.cli.perf import PerfResult, run_consume_perf, run_produce_perf  # noqa: E402
from deploy.telemetry.logs import configure_logging  # noqa: E402

TARGETS = {
    ("produce", 100): ("records/s", 300_000),
    ("produce", 1024): ("MB/s", 100),
    ("consume", 1024): ("MB/s", 200),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tls_setup(work: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(broker overrides, client settings) of an SSL listener with a test CA (trustme)."""
    import trustme  # a dev dependency, as this benchmark

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(work / "broker.pem"))
    broker = {"ssl.keystore.location": str(work / "broker.pem")}
    client = {"security.protocol": "SSL", "ssl.ca.location": str(work / "ca.pem")}
    return broker, client


class Broker:
    def __init__(self, work: Path, overrides: dict[str, str], *, tls: bool = False) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = work / "broker.log"
        self.client: dict[str, str] = {}
        """Client settings for the listener benchmarked (TLS ones with --tls)."""
        listeners = f"PLAINTEXT://{self.bootstrap}"
        if tls:
            # Clients on the SSL listener; the PLAINTEXT one stays for what needs it.
            tls_overrides, self.client = tls_setup(work)
            overrides = {
                **tls_overrides,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                **overrides,
            }
            listeners = f"SSL://{self.bootstrap},PLAINTEXT://127.0.0.1:{free_port()}"
        cmd = [sys.executable, "-m", "deploy.node.broker",
               "--override", f"listeners={listeners}",
               "--override", f"log.dirs={work / 'data'}"]  # fmt: skip
        for key, value in overrides.items():
            cmd += ["--override", f"{key}={value}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TRIOKA_LOG_FORMAT": "json",
               "TRIOKA_LOG_LEVEL": "WARNING"}  # fmt: skip
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                         env=env, start_new_session=True)  # fmt: skip

    async def wait_ready(self) -> None:
        with trio.fail_after(30):
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"broker exited:\n{self.log.read_text()[-2000:]}")
                try:
                    async with Admin(bootstrap_servers=self.bootstrap, **self.client):
                        return
                except Exception:  # not listening yet
                    await trio.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def verdict(kind: str, size: int, r: PerfResult) -> str:
    target = TARGETS.get((kind, size))
    if target is None:
        return ""
    unit, goal = target
    value = r.records_per_sec if unit == "records/s" else r.mb_per_sec
    mark = "meets" if value >= goal else "below"
    return f"{mark} target {goal:,} {unit}"


async def bench(
    args: argparse.Namespace, bootstrap: str, client: dict[str, str]
) -> list[tuple[str, int, PerfResult]]:
    producer_props = {**client, **parse_key_values(args.producer_props, "--producer-props")}
    consumer_props = {**client, **parse_key_values(args.consumer_props, "--consumer-props")}
    results = []
    for size, count in ((100, args.records_100b), (1024, args.records_1k)):
        if count <= 0:
            continue
        topic = f"bench-{size}b"
        async with Admin(bootstrap_servers=bootstrap, **client) as admin:
            await admin.create_topic(topic, args.partitions, 1)
        pconf = {**producer_props, "bootstrap.servers": bootstrap, "acks": "1"}
        produced = await run_produce_perf(pconf, topic, count, size, show_progress=args.progress)
        results.append(("produce", size, produced))
        report("produce", size, produced)
        cconf = {**consumer_props, "bootstrap.servers": bootstrap}
        consumed = await run_consume_perf(cconf, topic, count, show_progress=args.progress)
        results.append(("consume", size, consumed))
        report("consume", size, consumed)
    return results


def report(kind: str, size: int, r: PerfResult) -> None:
    print(f"{kind:8} {size:>5} B: {r.records_per_sec:>10,.0f} records/s {r.mb_per_sec:>8.1f} MB/s"
          f"  p50 {r.latency_p50_ms:6.1f} ms  p99 {r.latency_p99_ms:7.1f} ms"
          f"  max {r.latency_max_ms:7.1f} ms  {verdict(kind, size, r)}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records-100b", type=int, default=1_000_000)
    parser.add_argument("--records-1k", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--consumer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--broker-override", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--tls", action="store_true", help="clients on an SSL listener (a test CA's certificate)"
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    args = parser.parse_args(argv)
    configure_logging(role="bench", level="WARNING", stream=sys.stderr)

    print(f"trioka single-broker benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
          f" UTC, {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
          f" acks=1, {args.partitions} partition(s), {'SSL' if args.tls else 'PLAINTEXT'}",
          flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="trioka-bench-") as tmp:
        broker = Broker(
            Path(tmp), parse_key_values(args.broker_override, "--broker-override"), tls=args.tls
        )
        try:
            trio.run(broker.wait_ready)
            started = time.monotonic()
            results = trio.run(bench, args, broker.bootstrap, broker.client)
        finally:
            broker.stop()
    print(f"done in {time.monotonic() - started:.1f} s")
    if args.json:
        out: dict[str, Any] = {f"{k}_{s}B": asdict(r) for k, s, r in results}
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
