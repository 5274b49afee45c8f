"""`python -m deploy.docker.healthcheck broker|controller ...`: the containers' HEALTHCHECK.

- `broker HOST:PORT NODE_ID`: healthy when the broker answers Metadata and lists itself among the
  live brokers (registered and, in Raft mode, unfenced: clients can use it).
- `controller HOST:PORT`: healthy when the quorum names a leader (DescribeQuorum through it).

Exit 0 healthy, 1 not (the reason on stderr), 2 bad arguments: what Docker's HEALTHCHECK reads.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from functools import partial

import trio

from deploy.cluster.raft import quorum_report
from deploy.cluster.status import describe_cluster

USAGE = "usage: python -m deploy.docker.healthcheck broker HOST:PORT NODE_ID | controller HOST:PORT"


async def broker_healthy(bootstrap: str, node_id: int, *, timeout_s: float) -> str | None:
    """None when healthy, else why not."""
    report = await describe_cluster(bootstrap, timeout_ms=int(timeout_s * 1000))
    live = sorted(b.node_id for b in report.brokers)
    if node_id not in live:
        return f"broker {node_id} is not among the live brokers {live}"
    return None


async def controller_healthy(bootstrap: str, *, timeout_s: float) -> str | None:
    report = await quorum_report(bootstrap, timeout_s=timeout_s)
    if report.leader_id < 0:
        return "the quorum has no leader"
    return None


def main(argv: list[str], *, timeout_s: float = 5.0) -> int:
    check: Callable[[], Awaitable[str | None]]
    match argv:
        case ["broker", bootstrap, node_id] if node_id.isdigit():
            check = partial(broker_healthy, bootstrap, int(node_id), timeout_s=timeout_s)
        case ["controller", bootstrap]:
            check = partial(controller_healthy, bootstrap, timeout_s=timeout_s)
        case _:
            print(USAGE, file=sys.stderr)
            return 2
    try:
        reason = trio.run(check)
    except Exception as e:  # any failure to answer is "unhealthy", said plainly
        reason = f"{type(e).__name__}: {e}"
    if reason is not None:
        print(f"unhealthy: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
