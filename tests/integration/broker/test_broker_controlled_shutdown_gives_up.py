"""A real in-process ZK-mode Broker whose controlled shutdown never succeeds: it asks
controlled.shutdown.max.retries + 1 times, gives up and still shuts down safely (as Kafka's
"unclean shutdown" after failed attempts: leadership is not moved, but the logs are flushed and
the clean-shutdown marker is written, so the next start skips recovery)."""

from __future__ import annotations

from pathlib import Path

import trio
from structlog.testing import capture_logs

from broker.controlled_shutdown import ATTEMPT_FAILED, GAVE_UP, SUCCEEDED
from broker.metadata_feeds.zk import ZkMetadataFeed
from broker.node import CLEAN_SHUTDOWN_MARKER, Broker
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from storage.log_manager import LogManager
from tests.integration.broker.zk_brokers import CLUSTER_ID, WireTransport, broker_config


class RefusingController:
    """Every ControlledShutdown answered NOT_CONTROLLER (no controller reachable)."""

    def __init__(self) -> None:
        self.requests: list[ControlledShutdownRequest] = []

    async def submit(self, request: Request) -> Response:
        assert isinstance(request, ControlledShutdownRequest)
        self.requests.append(request)
        return ControlledShutdownResponse(
            error_code=int(ErrorCode.NOT_CONTROLLER), error_message="no controller"
        )


async def test_gives_up_after_max_retries_and_still_shuts_down_cleanly(tmp_path: Path) -> None:
    config = broker_config(1, tmp_path, controlled_shutdown_max_retries=2)
    controller = RefusingController()
    broker = Broker(
        config,
        log_manager=LogManager([str(d) for d in config.log_dirs], node_id=1, cluster_id=CLUSTER_ID),
        controller=controller,
        feed=ZkMetadataFeed(),
        cluster_id=CLUSTER_ID,
        transport=WireTransport(),
    )
    broker.broker_epoch = 77
    with capture_logs() as logs, trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            broker.request_shutdown()
            await broker.stopped.wait()
    assert [r.broker_epoch for r in controller.requests] == [77, 77, 77]  # 2 retries + 1
    events = [e["event"] for e in logs]
    assert events.count(ATTEMPT_FAILED) == 3 and GAVE_UP in events and SUCCEEDED not in events
    assert events.index(GAVE_UP) < events.index("broker shut down")
    for log_dir in config.log_dirs:
        assert (Path(log_dir) / CLEAN_SHUTDOWN_MARKER).exists()


async def test_disabled_asks_nothing(tmp_path: Path) -> None:
    config = broker_config(1, tmp_path, controlled_shutdown_enable=False)
    controller = RefusingController()
    broker = Broker(
        config,
        log_manager=LogManager([str(d) for d in config.log_dirs], node_id=1, cluster_id=CLUSTER_ID),
        controller=controller,
        feed=ZkMetadataFeed(),
        cluster_id=CLUSTER_ID,
        transport=WireTransport(),
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            broker.request_shutdown()
            await broker.stopped.wait()
    assert controller.requests == []
