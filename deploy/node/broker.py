"""The broker process, whatever its metadata mode: `trioka broker start` and

    python -m deploy.node.broker --config FILE [--override key=value ...]

`run_broker(config)` serves /metrics (when trioka.metrics.port is set), runs the telemetry
shipper beside the broker (unless trioka.telemetry.enable is off) and the broker of the
configured mode: ZooKeeper (deploy.node.broker_zk), a Raft-mode broker (deploy.node.broker_raft),
a KRaft combined node (deploy.node.combined) or standalone (deploy.node.broker_standalone).
SIGTERM/SIGINT is a graceful shutdown (stop accepting, finish in-flight requests, checkpoint,
write the clean-shutdown marker). `task_status.started(bound listeners)` is called once the
broker is serving.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence

import trio

from broker.config import BrokerConfig
from broker.server import BoundListener
from deploy.node import gc_policy
from deploy.node.broker_raft import run_raft_broker
from deploy.node.broker_standalone import run_standalone_broker
from deploy.node.broker_zk import run_zk_broker
from deploy.node.combined import run_combined_broker, single_node_defaults
from deploy.node.config import load_broker_config
from deploy.node.runtime import NodeRuntime
from deploy.node.startup import exit_on_user_error, run_process, startup_parser
from deploy.telemetry.event_loop import watch_event_loop
from deploy.telemetry.logs import configure_logging
from deploy.telemetry.metrics_server import serve_metrics
from deploy.telemetry.wiring import broker_shipper, own_listener_bootstrap, run_beside
from protocol.errors import TriokaError


async def run_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
    runtime: NodeRuntime | None = None,
) -> None:
    """Run one broker until SIGTERM/SIGINT (or cancellation)."""
    runtime = runtime if runtime is not None else NodeRuntime()
    # First, so that the "metrics serving" event precedes "broker listening": whoever waits
    # for the listener (tests, `trioka cluster`) finds the metrics port already logged.
    with serve_metrics(config), watch_event_loop(runtime.clock):
        serve = functools.partial(_run_mode, config, handle_signals=handle_signals, runtime=runtime)
        shipper = broker_shipper(config, clock=runtime.clock)
        if shipper is not None and config.combined_mode:
            shipper = broker_shipper(single_node_defaults(config), clock=runtime.clock)
        if shipper is None:
            await serve(task_status=task_status)
        else:
            bootstrap = functools.partial(own_listener_bootstrap, config)
            await run_beside(serve, shipper, bootstrap, task_status=task_status)


async def _run_mode(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
    runtime: NodeRuntime,
) -> None:
    """The broker of the configured mode (metadata.mode, process.roles)."""
    if config.zk_mode:
        run = run_zk_broker
    elif config.combined_mode:
        run = run_combined_broker
    elif config.raft_mode:
        run = run_raft_broker
    else:
        run = run_standalone_broker
    await run(config, task_status=task_status, handle_signals=handle_signals, runtime=runtime)


def start(config_file: str | None, overrides: Sequence[str]) -> None:
    """Load the config, configure logging and run the broker in the foreground; a user error
    (bad config, port in use, bad log dir) exits with one line on stderr."""
    config = load_broker_config(config_file, list(overrides))
    configure_logging(
        role="broker",
        node_id=config.node_id,
        metadata_mode=config.metadata_mode,
        **({"process_roles": ",".join(config.process_roles)} if config.combined_mode else {}),
    )
    runtime = NodeRuntime.from_environ(os.environ)
    gc_policy.install()
    run_process(
        functools.partial(run_broker, runtime=runtime),
        config,
        what="the broker",
        user_errors=(TriokaError, OSError),
    )


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m deploy.node.broker` (tests, benchmarks, `trioka cluster`): `trioka broker start`."""
    parser = startup_parser("python -m deploy.node.broker", "Run one broker.")
    args = parser.parse_args(argv)
    with exit_on_user_error(config_exit_code=1):
        start(args.config, args.override)


if __name__ == "__main__":
    main(sys.argv[1:])
