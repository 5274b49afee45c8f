"""The shipper beside a broker or a controller: what each process kind ships to, and running it.

    await run_beside(serve, shipper, bootstrap_of, task_status=task_status)

runs `serve` (a `nursery.start`-style callable that reports the bound listeners) with the
shipper capturing log events from the start, shipping once `serve` reported it started, and
stopping (spooling what is left) when `serve` returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from broker.config import BrokerConfig
from deploy.telemetry.settings import TelemetrySettings
from deploy.telemetry.shipper import Bootstrap, TelemetryShipper, local_source
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.metadata.image import ClusterImage

Serve = Callable[..., Awaitable[None]]


def broker_shipper(
    config: BrokerConfig, role: str = "broker", *, clock: Clock = SYSTEM_CLOCK
) -> TelemetryShipper | None:
    """The shipper of a broker process (any mode) on the process's clock, None when
    trioka.telemetry.enable is off."""
    settings = TelemetrySettings.from_values(config.values, config.log_dirs[0])
    if not settings.enable:
        return None
    return TelemetryShipper(settings, local_source(role, config.node_id), clock=clock)


def own_listener_bootstrap(config: BrokerConfig, bound: Sequence[Any]) -> Bootstrap:
    """A broker ships to its own cluster through its own listener (the inter-broker one when
    bound, else the first): always up while the process is, and the client learns the other
    brokers from it."""
    chosen = next((b for b in bound if b.name == config.inter_broker_listener_name), None)
    chosen = chosen or (bound[0] if bound else None)
    if chosen is None:
        return lambda: ()
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(chosen.host, chosen.host)
    server = f"[{host}]:{chosen.port}" if ":" in host else f"{host}:{chosen.port}"
    return lambda: (server,)


def registered_brokers_bootstrap(image: Callable[[], ClusterImage]) -> Bootstrap:
    """A controller process ships through the brokers registered in its metadata image (every
    controller replays the log, the standbys too): the first endpoint of each usable broker."""

    def servers() -> tuple[str, ...]:
        out = []
        for broker in image().usable_brokers():
            if broker.endpoints:
                e = broker.endpoints[0]
                out.append(f"[{e.host}]:{e.port}" if ":" in e.host else f"{e.host}:{e.port}")
        return tuple(out)

    return servers


async def run_beside(
    serve: Serve,
    shipper: TelemetryShipper,
    bootstrap_of: Callable[[Any], Bootstrap],
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """`serve` with the shipper beside it (see the module doc). A configured
    trioka.telemetry.bootstrap.servers wins over `bootstrap_of(started value)`."""
    shipper.capture()
    try:
        async with trio.open_nursery() as nursery:

            async def serve_then_stop(*, task_status: trio.TaskStatus[Any]) -> None:
                await serve(task_status=task_status)
                nursery.cancel_scope.cancel()  # the shipper spools what is left and stops

            started = await nursery.start(serve_then_stop)
            if not shipper.settings.bootstrap_servers:
                shipper.bootstrap = bootstrap_of(started)
            await nursery.start(shipper.run)
            task_status.started(started)
    finally:
        shipper.release()
