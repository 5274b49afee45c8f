"""Run the simulator: `.venv/bin/python -m tests.sim --seed 1234 --events 5000` reruns one seed
(the command a failure prints); `--seeds 1000` runs seeds 0..999 and prints seeds/s."""

from __future__ import annotations

import argparse
import sys
import time

from tests.sim.sim import CORES, SafetyViolation, SimConfig, Simulation


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    p.add_argument("--seed", type=int, default=None, help="run this one seed")
    p.add_argument("--seeds", type=int, default=None, help="run seeds 0..N-1")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--events", type=int, default=2000, help="events per seed (the cap)")
    p.add_argument("--nodes", type=int, default=SimConfig.nodes)
    p.add_argument("--core", choices=sorted(CORES), default=SimConfig.core)
    p.add_argument("--no-log-up-to-date-check", action="store_true",
                   help="plant the bug: voters ignore the candidate's log")  # fmt: skip
    p.add_argument("--send-before-flush", action="store_true",
                   help="plant a driver bug: a torn Ready has sent its messages")  # fmt: skip
    p.add_argument("--snapshot-off-by-one", action="store_true",
                   help="plant a bug: a snapshot holds the state one entry past its offset")  # fmt: skip
    p.add_argument("--snapshot-above-hw", action="store_true",
                   help="plant a bug: snapshots fold uncommitted log entries")  # fmt: skip
    p.add_argument("--observers", type=int, default=None, help="non-voters (default: 1 on raft)")
    p.add_argument("--no-snapshots", action="store_true", help="nodes never take snapshots")
    p.add_argument("--snapshot-every-ms", type=int, nargs=2, metavar=("LO", "HI"),
                   default=SimConfig.snapshot_every_ms, help="a snapshot every LO..HI ms")  # fmt: skip
    p.add_argument("--delete-log-rate", type=float, default=SimConfig.delete_log_rate,
                   help="how often a snapshot is followed by dropping the log below it")  # fmt: skip
    p.add_argument("--trace", action="store_true", help="print every event (one seed)")
    args = p.parse_args(argv)
    config = SimConfig(
        nodes=args.nodes,
        core=args.core,
        check_log_up_to_date=not args.no_log_up_to_date_check,
        send_before_flush=args.send_before_flush,
        snapshot_off_by_one=args.snapshot_off_by_one,
        snapshot_above_hw=args.snapshot_above_hw,
        observers=args.observers,
        snapshot_every_ms=None if args.no_snapshots else tuple(args.snapshot_every_ms),
        delete_log_rate=args.delete_log_rate,
    )
    if args.seed is not None:
        seeds = range(args.seed, args.seed + 1)
    else:
        seeds = range(args.first_seed, args.first_seed + (args.seeds or 100))
    started = time.perf_counter()
    not_live = []
    for seed in seeds:
        sim = Simulation(seed, args.events, config)
        if args.trace:
            sim.trace = []
        try:
            result = sim.run()
        except SafetyViolation as e:
            if sim.trace:
                print("\n".join(sim.trace[-50:]))
            print(f"SAFETY VIOLATION {e}", file=sys.stderr)
            return 1
        finally:
            if args.trace and sim.trace:
                print("\n".join(sim.trace))
        if not result.live:
            not_live.append(seed)
        if len(seeds) == 1:
            print(result)
    elapsed = time.perf_counter() - started
    print(f"{len(seeds)} seeds, {args.events} events max each: no safety violation; "
          f"{len(seeds) / elapsed:.1f} seeds/s; no stable leader after the heal: {not_live}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
