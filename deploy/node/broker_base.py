"""What every broker process kind shares: the endpoints it registers, its cluster id, and\nwaiting for a graceful shutdown.\n"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Sequence

import structlog
import trio

from broker.config import BrokerConfig
from broker.node import Broker
from broker.server import BoundListener
from controller.config import ControllerConfig
from protocol.clock import Clock
from protocol.metadata.records import BrokerEndpoint
from protocol.metadata.topic_ids import random_uuid
from storage import LogManager
from storage.meta_properties import read_meta_properties

log = structlog.get_logger("deploy.node.broker")


def registered_endpoints(
    config: BrokerConfig, bound: Sequence[BoundListener]
) -> tuple[BrokerEndpoint, ...]:
    """The endpoints to register: advertised.listeners (default: listeners), where a port 0 or
    an empty host is replaced by what was actually bound (a wildcard bind advertises the
    machine's name, as Kafka does)."""
    by_name = {b.name: b for b in bound}
    out = []
    for a in config.effective_advertised_listeners:
        b = by_name.get(a.name)
        port = a.port or (b.port if b is not None else 0)
        # A wildcard listener (no advertised.listeners) is not an address others can dial.
        host = a.host if a.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
        out.append(BrokerEndpoint(name=a.name, host=host, port=port))
    return tuple(out)


def log_manager_for(
    config: BrokerConfig,
    cluster_id: str | None,
    clock: Clock,
    halt: Callable[[int], object] = os._exit,
) -> LogManager:
    """The broker's LogManager, halting the process once every log dir has failed (Kafka's
    "Shutdown broker because all log dirs in ... have failed": no controlled shutdown, the
    disk cannot take the writes it needs; the controller moves the leaderships as for a
    crash). With a dir left, only the failed dir's partitions are offline."""
    log_manager = LogManager(
        list(config.log_dirs),
        node_id=config.node_id,
        cluster_id=cluster_id,
        max_open_files=int(config["trioka.max.open.files"]),
        clock_ms=clock.wall_ms,
    )

    def dir_failed(d: str, reason: str) -> None:
        if not log_manager.online_dirs:
            log.critical(
                "shutting down: every log dir has failed",
                log_dirs=log_manager.log_dirs,
                reason=reason,
            )
            halt(1)

    log_manager.on_dir_failed = dir_failed
    return log_manager


def resolve_cluster_id(config: BrokerConfig) -> str:
    """cluster.id if set, else the one in an existing meta.properties, else a new one (what
    `kafka-storage format` would have written)."""
    if config["cluster.id"]:
        return str(config["cluster.id"])
    for d in config.log_dirs:
        try:
            props = read_meta_properties(str(d))
        except OSError:
            props = None
        if props is not None and props.cluster_id:
            return props.cluster_id
    return random_uuid()


async def serve_until_stopped(broker: Broker, handle_signals: bool) -> None:
    """Until SIGTERM/SIGINT (when handling signals) asks for a graceful shutdown, or something
    else stops the broker; returns once it has stopped."""
    if handle_signals:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("shutdown signal received", signal=signal.Signals(signum).name)
                break
        broker.request_shutdown()
    await broker.stopped.wait()


def controller_config(config: BrokerConfig, *, max_partitions_per_request: int) -> ControllerConfig:
    """The controller logic's settings from this broker's config (ZK mode, combined mode)."""
    return ControllerConfig.from_server_config(
        config.values, config.explicit, max_partitions_per_request=max_partitions_per_request
    )
