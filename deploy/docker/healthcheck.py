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

import argparse
import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import trio

from deploy.cluster.client_properties import read_properties
from deploy.cluster.raft import quorum_report
from deploy.cluster.state import ClusterError
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m deploy.docker.healthcheck", usage=USAGE)
    p.add_argument("kind", choices=("broker", "controller"))
    p.add_argument("address", metavar="HOST:PORT")
    p.add_argument("node_id", nargs="?", type=int, help="broker: its node id")
    p.add_argument("--command-config", metavar="FILE", help="client.properties to dial with")
    p.add_argument("-X", dest="properties", action="append", default=[], metavar="KEY=VALUE",
                   help="a client setting (repeatable, wins over the file)")  # fmt: skip
    return p


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """--command-config's settings, then -X's; UsageError for a bad -X, ClusterError for a
    file that cannot be read."""
    settings = read_properties(args.command_config) if args.command_config else {}
    for item in args.properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-X {item!r} is not KEY=VALUE")
        settings[key.strip()] = value.strip()
    return settings


def main(argv: list[str], *, timeout_s: float = 5.0) -> int:
    try:
        args = parser().parse_intermixed_args(argv)
    except SystemExit as exit_:  # argparse printed the usage and the error
        return 2 if exit_.code else 0
    if (args.kind == "broker") != (args.node_id is not None):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        client = client_settings(args)
    except UsageError as e:
        print(f"{USAGE}\nerror: {e}", file=sys.stderr)
        return 2
    except ClusterError as e:
        print(f"error: --command-config: {e}", file=sys.stderr)
        return 2
    check: Callable[[], Awaitable[str | None]]
    if args.kind == "broker":
        check = partial(
            broker_healthy, args.address, args.node_id, timeout_s=timeout_s, client=client
        )
    else:
        check = partial(controller_healthy, args.address, timeout_s=timeout_s, client=client)
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
