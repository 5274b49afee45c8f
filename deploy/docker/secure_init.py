"""`python -m deploy.docker.secure_init`: docker-compose.secure.yml's one-shot `secure-init`
service: the admin's SCRAM login, as `trioka cluster up --secure` makes it
(deploy.cluster.secure.create_admin; the same create_login and wait_login).

    python -m deploy.docker.secure_init --admin-config /etc/trioka/tls/client.properties \\
        --command-config /etc/trioka/config/node-client.properties \\
        --bootstrap-server broker-1:9092,broker-2:9092,broker-3:9092 \\
        --login broker-1:19092 --login broker-2:19093 --login broker-3:19094

1. Upserts the SCRAM credential of `sasl.username` (`sasl.mechanism`, `sasl.password`) of the
   --admin-config file (build/tls/client.properties, made by deploy.docker.secure_setup) through
   the brokers' INTERNAL listeners (--bootstrap-server), dialled with --command-config's
   settings: TLS with the admin's certificate (CN=admin, a super user; the only way in before
   any SCRAM user exists). Re-running it sets the same password again.
2. Waits until the login works on every --login address (the brokers' EXTERNAL listeners, as
   seen on the compose network: each broker applies the credential from its own metadata), so
   host clients can use client.properties once this service has exited 0.

Exit 0 done, 1 failed (the reason on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

import trio

from deploy.cluster.client_properties import read_properties
from deploy.cluster.secure import create_login, wait_login
from protocol.errors import KafkaError, TriokaError

LOGIN_KEYS = ("sasl.mechanism", "sasl.username", "sasl.password")


class InitError(Exception):
    pass


def login_settings(admin: Mapping[str, str], node: Mapping[str, str]) -> dict[str, str]:
    """The admin's SASL_SSL login as seen from a container: its SCRAM keys, the CA of `node`
    (the admin file names the host's path to it)."""
    missing = [k for k in LOGIN_KEYS if not admin.get(k)]
    if missing:
        raise InitError(f"the admin's client.properties lacks {', '.join(missing)}")
    return {
        "security.protocol": "SASL_SSL",
        **{k: admin[k] for k in LOGIN_KEYS},
        **({"ssl.ca.location": node["ssl.ca.location"]} if "ssl.ca.location" in node else {}),
    }


async def run(args: argparse.Namespace) -> None:
    node = read_properties(args.command_config)
    login = login_settings(read_properties(args.admin_config), node)
    await create_login(login, node, args.bootstrap_server, within=args.within)
    print(f"secure-init: SCRAM login {login['sasl.username']!r} ({login['sasl.mechanism']}) set")
    await wait_login(login, args.login, within=args.within)
    print(f"secure-init: the login works on {', '.join(args.login)}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m deploy.docker.secure_init",
                                description=__doc__.split("\n\n")[0])  # fmt: skip
    p.add_argument("--admin-config", required=True, metavar="FILE",
                   help="the admin's client.properties (sasl.username, sasl.mechanism, "
                        "sasl.password)")  # fmt: skip
    p.add_argument("--command-config", required=True, metavar="FILE",
                   help="client settings for the INTERNAL listeners (TLS, the admin's "
                        "certificate)")  # fmt: skip
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]",
                   help="the brokers' INTERNAL listeners")  # fmt: skip
    p.add_argument("--login", action="append", default=[], metavar="HOST:PORT",
                   help="an EXTERNAL listener where the login must work (repeatable)")  # fmt: skip
    p.add_argument("--within", type=float, default=60.0, metavar="S",
                   help="seconds for each step (default 60)")  # fmt: skip
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)  # exits 2 on bad arguments
    try:
        trio.run(run, args)
    except (InitError, TriokaError, KafkaError, OSError, trio.TooSlowError) as exc:
        reason = str(exc) or type(exc).__name__
        print(f"secure-init: error: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
