"""Standalone broker process: `python -m deploy.broker_app --config FILE --override k=v`."""

from __future__ import annotations

import argparse
import signal
import sys

import structlog
import trio

from broker.apis import ApiVersionsOnly
from broker.config import BrokerConfig
from broker.server import BrokerServer, ServerLimits
from deploy.config import ConfigError, load_broker_config
from deploy.logging_config import configure_logging

log = structlog.get_logger("deploy.broker_app")


async def run_broker(config: BrokerConfig, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    server = BrokerServer(ApiVersionsOnly(), config.listeners, ServerLimits())
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.serve)
        task_status.started(bound)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                break
        await server.drain()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.broker_app")
    parser.add_argument("--config")
    parser.add_argument("--override", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        config = load_broker_config(args.config, args.override)
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    configure_logging(role="broker", node_id=config.node_id)
    trio.run(run_broker, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
