"""A stand-in broker process for session-expiry tests: registers /brokers/ids/<id> with
zkstore's BrokerRegistrar and prints one JSON line per registration ({"broker_epoch": czxid,
"session_id": ...}). The test freezes it with SIGSTOP past the session timeout, so ZooKeeper
really expires the session, then lets it run again and watches it re-register.

Usage: python zk_registrant.py HOSTS BROKER_ID SESSION_TIMEOUT_S
"""

from __future__ import annotations

import json
import sys

import trio

from protocol.metadata.records import BrokerEndpoint
from zkstore.client import ZkClient
from zkstore.registration import BrokerRegistrar, ensure_persistent_paths
from zkstore.znodes import BrokerInfo


async def main(hosts: str, broker_id: int, session_timeout_s: float) -> None:
    async with ZkClient(hosts, session_timeout_s=session_timeout_s) as zk:
        await ensure_persistent_paths(zk)
        info = BrokerInfo(
            broker_id, (BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092),)
        )
        registrar = BrokerRegistrar(zk, info)

        def report(epoch: int) -> None:
            print(json.dumps({"broker_epoch": epoch, "session_id": zk.session_id}), flush=True)

        registrar.on_registered(report)
        await registrar.run()


if __name__ == "__main__":
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    trio.run(main, sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
