"""The top of a py-spy profile in collapsed-stack form (`py-spy record --format raw`, as
`bench/run_failover.py --profile-dir` writes them): functions by inclusive and by self share of
the samples, idle samples (the event loop waiting in epoll, threads waiting) counted apart.

    .venv/bin/python bench/spy_top.py FILE [FILE ...] [--top 25] [--under FUNCTION]

`--under FUNCTION` keeps only the stacks passing through a function whose name contains it.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")
IDLE = ("epoll.poll", "select.select", "_wait_for_tstate_lock", "Condition.wait", "get_events")


def frame_name(frame: str) -> str:
    """`func (path/to/module.py:12)` -> `module.func`, line numbers merged."""
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    module = m["file"].rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{m['func']}"


def read_stacks(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(frame_name(f) for f in stack.split(";"))] += int(count)
    return stacks


def summary(path: Path, top: int, under: str) -> list[str]:
    stacks = read_stacks(path)
    if under:
        stacks = Counter({s: n for s, n in stacks.items() if any(under in f for f in s)})
    total = sum(stacks.values())
    idle = sum(n for s, n in stacks.items() if any(i in s[-1] for i in IDLE))
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for stack, n in stacks.items():
        for name in set(stack):
            inclusive[name] += n
        own[stack[-1]] += n
    busy = max(1, total - idle)
    lines = [f"== {path.name}: {total} samples, {idle} idle; shares of the {busy} busy ones"]
    lines.append("  inclusive:")
    lines += [f"    {100 * n / busy:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    lines.append("  self:")
    lines += [f"    {100 * n / busy:5.1f}%  {name}" for name, n in own.most_common(top)
              if not any(i in name for i in IDLE)]  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--under", default="")
    args = parser.parse_args()
    for path in args.files:
        print("\n".join(summary(path, args.top, args.under)))


if __name__ == "__main__":
    main()
