"""Issue 15's scale curve: bench/run_failover.py at each size, both metadata modes, one table.

    .venv/bin/python bench/run_scale_curve.py [--modes raft zk] [--sizes 1000 3000 10000 25000 50000]
        [--out DIR] [--idle-s 20] [--brokers 3] [-- run_failover.py options...]

For each size (ascending) and mode (alternating, so that the machine's noise falls on both), a
fresh cluster run by `bench/run_failover.py --json --idle-s S`: creation, idle CPU and RSS, a
broker's SIGKILL (detection, propagation, first acks=all, per-partition unavailability), its
rejoin, a controlled shutdown and its rejoin, the controller's SIGKILL. Each run's whole
output goes to DIR/<mode>-<size>.txt, its JSON to DIR/<mode>-<size>.json (with
`--telemetry` the cluster's telemetry too, in DIR/telemetry/<mode>-<size>/ for
`trioka report --spool DIR/telemetry`); the table (one
column per run, the rows of run_failover.py's summary) is printed as each run ends and
written to DIR/curve.md. A run that fails keeps its column with what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_support import ROOT
from run_failover import side_by_side


def run_one(mode: str, size: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    name = f"{mode}-{size}"
    command = [sys.executable, str(ROOT / "bench" / "run_failover.py"), "--mode", mode,
               "--partitions", str(size), "--json", "--idle-s", str(args.idle_s),
               "--brokers", str(args.brokers), *args.extra]  # fmt: skip
    if args.telemetry:
        command += ["--telemetry-dir", str(out / "telemetry")]
    print(f"[{datetime.datetime.now(datetime.UTC):%H:%M:%S}] {' '.join(command[1:])}", flush=True)
    with (out / f"{name}.txt").open("w") as log:
        proc = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
        log.write(proc.stdout)
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    try:
        report: dict[str, Any] = json.loads(last[0])
    except ValueError:
        report = {"mode": mode, "partitions": size, "error": f"exit {proc.returncode}, no JSON"}
    (out / f"{name}.json").write_text(json.dumps(report, default=str, indent=1))
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", choices=("raft", "zk"), default=["raft", "zk"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 3000, 10000, 25000, 50000])
    parser.add_argument("--out", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--telemetry", action="store_true",
                        help="keep each cluster's telemetry for `trioka report --spool`")  # fmt: skip
    parser.add_argument("extra", nargs="*", help="more run_failover.py options (after --)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="trioka-scale-curve-"))
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    title = (f"trioka scale curve, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
             f"commit {commit}, {platform.node()}, {os.cpu_count()} CPUs, {args.brokers} brokers, "
             f"RF=3, Kafka's default sessions; output in {out}")  # fmt: skip
    print(title, flush=True)
    reports = []
    for size in sorted(args.sizes):
        for mode in args.modes:
            reports.append(run_one(mode, size, args, out))
            table = "\n".join(side_by_side(reports))
            (out / "curve.md").write_text(f"{title}\n\n{table}\n")
            print(table, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
