"""`python -m deploy.docker.healthcheck broker|controller ...`: the containers' HEALTHCHECK.

- `broker HOST:PORT NODE_ID`: healthy when the broker answers Metadata and lists itself among the
  live brokers (registered and, in Raft mode, unfenced: clients can use it).
- `controller HOST:PORT`: healthy when the quorum names a leader (DescribeQuorum through it).

Both take the client settings of the listener they dial, as every `trioka` client command does:
`--command-config FILE` (a client.properties: Java properties, Kafka's client names) and
`-X KEY=VALUE` (repeatable, wins over the file). docker-compose.yml passes
/etc/trioka/config/node-client.properties: PLAINTEXT in the base file, TLS with the node's own
certificate under docker-compose.secure.yml.

Exit 0 healthy, 1 not (the reason on stderr), 2 bad arguments: what Docker's HEALTHCHECK reads.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import javaproperties
import trio

from deploy.cluster.raft import quorum_report
from deploy.cluster.status import describe_cluster

USAGE = (
    "usage: python -m deploy.docker.healthcheck broker HOST:PORT NODE_ID | controller HOST:PORT"
    " [--command-config FILE] [-X KEY=VALUE ...]"
)


class UsageError(Exception):
    pass


async def broker_healthy(
    bootstrap: str, node_id: int, *, timeout_s: float, client: Mapping[str, Any] | None = None
) -> str | None:
    """None when healthy, else why not."""
    report = await describe_cluster(bootstrap, timeout_ms=int(timeout_s * 1000), client=client)
    live = sorted(b.node_id for b in report.brokers)
    if node_id not in live:
        return f"broker {node_id} is not among the live brokers {live}"
    return None


async def controller_healthy(
    bootstrap: str, *, timeout_s: float, client: Mapping[str, Any] | None = None
) -> str | None:
    report = await quorum_report(bootstrap, timeout_s=timeout_s, client=client)
    if report.leader_id < 0:
        return "the quorum has no leader"
    return None


def split_client_options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(the positional arguments, the client settings of `--command-config FILE` and `-X
    KEY=VALUE`, each -X winning over the file); UsageError for a bad option, OSError or
    ValueError for a file that cannot be read as properties."""
    positional: list[str] = []
    from_file: dict[str, str] = {}
    from_x: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg in ("--command-config", "-X"):
            value = next(args, None)
            if value is None:
                raise UsageError(f"{arg} needs a value")
        elif arg.startswith("--command-config="):
            arg, value = "--command-config", arg.partition("=")[2]
        else:
            positional.append(arg)
            continue
        if arg == "--command-config":
            with open(value, encoding="utf-8") as f:
                from_file.update(javaproperties.load(f))
        else:
            key, sep, setting = value.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"-X {value!r} is not KEY=VALUE")
            from_x[key.strip()] = setting.strip()
    return positional, {**from_file, **from_x}


def main(argv: list[str], *, timeout_s: float = 5.0) -> int:
    try:
        positional, client = split_client_options(argv)
    except UsageError as e:
        print(f"{USAGE}\nerror: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"error: --command-config: {e}", file=sys.stderr)
        return 2
    check: Callable[[], Awaitable[str | None]]
    match positional:
        case ["broker", bootstrap, node_id] if node_id.isdigit():
            check = partial(
                broker_healthy, bootstrap, int(node_id), timeout_s=timeout_s, client=client
            )
        case ["controller", bootstrap]:
            check = partial(controller_healthy, bootstrap, timeout_s=timeout_s, client=client)
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
