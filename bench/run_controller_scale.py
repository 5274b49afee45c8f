"""The controller's own time at the design notes' shape (issue 15): the real controller code
in one process, with simulated brokers.

    .venv/bin/python bench/run_controller_scale.py [--brokers 30] [--partitions 25000]
        [--replication-factor 3] [--profile] [--json]

Kafka's design notes ask how long the controller takes to move leadership off a dead broker
with 25,000 partitions on 30 brokers. Running 30 broker processes on 2 cores measures the
machine, not the controller; this runs the Raft-mode active controller (ControllerDriver,
ClusterControl, the real operations, the metadata log on disk with its fsync: the standalone
LocalMetadataLog, so no quorum replication) and simulates the brokers: each registers through
the driver and heartbeats every broker.heartbeat.interval.ms (2 s) with the committed offset.

Measured, each from the request's submission:
- creation: the partitions as topics of 100, ten topics a CreateTopics;
- fencing of a dead broker (FenceDeadBroker, what the fast fencing submits): the result's
  records, the first batch committed (the fence and the first new leaders), the event done;
- controlled shutdown of another broker (a heartbeat with want_shut_down): until no partition
  is led by it;
- controller failover: a new driver replaying the whole log from disk, then a CreateTopics.

`--profile` prints cProfile's top functions of the fencing. Everything runs in this process
under a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.cluster_control import ClusterControl
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.dead_brokers import FenceDeadBroker
from controller.service.driver import ControllerDriver
from controller.state import ControllerState
from deploy.node import gc_policy
from deploy.telemetry.logs import configure_logging
from protocol.clock import SYSTEM_CLOCK
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
)
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import MetadataRecord
from raft.local_log import LocalMetadataLog

CLUSTER_ID = "bench-controller-scale"
HEARTBEAT_S = 2.0
PER_TOPIC = 100
TOPICS_PER_REQUEST = 10


class Commits:
    """A log listener noting when each committed batch reached the controller."""

    def __init__(self) -> None:
        self.times: list[tuple[float, int]] = []  # (time, last offset)

    async def __call__(self, batch: Sequence[tuple[int, MetadataRecord]]) -> None:
        self.times.append((time.perf_counter(), batch[-1][0]))


class Controller:
    """One active controller over a metadata log in `directory`, wired as a Raft-mode term
    (controller.service.terms): the state replays the log, then the term's context holds
    the brokers' sessions (ClusterControl.activate) and a driver serves."""

    def __init__(self, directory: str) -> None:
        self.log = LocalMetadataLog(directory)
        self.commits = Commits()
        self.state = ControllerState(MetadataImage.empty(CLUSTER_ID))
        self.log.add_listener(self._replay)
        self.log.add_listener(self.commits)
        self.driver: ControllerDriver | None = None

    async def _replay(self, batch: Sequence[tuple[int, MetadataRecord]]) -> None:
        self.state.replay(batch)

    async def start(self, nursery: trio.Nursery) -> None:
        await self.log.open()
        control = ClusterControl.activate(self.state.image, SYSTEM_CLOCK.monotonic_ms())
        ctx = ControllerContext(
            config=ControllerConfig(max_partitions_per_request=1_000_000),
            clock_ms=SYSTEM_CLOCK.monotonic_ms,
            cluster_control=control,
        )
        self.driver = ControllerDriver(self.log, self.state, ctx)
        await nursery.start(self.driver.run)

    async def submit(self, request: Any) -> Any:
        assert self.driver is not None
        return await self.driver.submit(request, timeout_s=600)


class SimulatedBroker:
    """Registers, then heartbeats every 2 s with the committed offset until stopped."""

    def __init__(self, controller: Controller, broker_id: int) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.epoch = -1
        self.alive = True
        self.shutting_down = False

    async def register(self) -> None:
        response = await self.controller.submit(
            BrokerRegistrationRequest(
                broker_id=self.broker_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=f"incarnation-{self.broker_id:04d}-aaaaaaaaa"[:22],
                listeners=(
                    BrokerRegistrationListener(
                        name="PLAINTEXT", host="127.0.0.1", port=20000 + self.broker_id
                    ),
                ),
            )
        )
        assert response.error_code == 0, response
        self.epoch = response.broker_epoch

    async def heartbeat(self) -> Any:
        return await self.controller.submit(
            BrokerHeartbeatRequest(
                broker_id=self.broker_id,
                broker_epoch=self.epoch,
                current_metadata_offset=self.controller.state.committed_offset,
                want_fence=False,
                want_shut_down=self.shutting_down,
            )
        )

    async def run(self) -> None:
        while self.alive:
            await self.heartbeat()
            await trio.sleep(HEARTBEAT_S)


def leaders_of(controller: Controller, broker_id: int) -> int:
    return sum(
        1
        for topic in controller.state.image.topics.by_name.values()
        for part in topic.partitions.values()
        if part.leader == broker_id
    )


async def measure(args: argparse.Namespace, directory: str) -> dict[str, Any]:
    out: dict[str, Any] = {"brokers": args.brokers, "partitions": args.partitions}
    async with trio.open_nursery() as nursery:
        controller = Controller(directory)
        await controller.start(nursery)
        brokers = [SimulatedBroker(controller, i) for i in range(1, args.brokers + 1)]
        for b in brokers:
            await b.register()
        for b in brokers:
            while (await b.heartbeat()).is_fenced:  # noqa: ASYNC110 (a broker's polling)
                await trio.sleep(0.01)
            nursery.start_soon(b.run)

        started = time.perf_counter()
        topics = args.partitions // PER_TOPIC
        for first in range(0, topics, TOPICS_PER_REQUEST):
            names = range(first, min(first + TOPICS_PER_REQUEST, topics))
            response = await controller.submit(
                CreateTopicsRequest(
                    topics=tuple(
                        CreatableTopic(
                            name=f"t{i:05d}",
                            num_partitions=PER_TOPIC,
                            replication_factor=args.replication_factor,
                        )
                        for i in names
                    ),
                    timeout_ms=600_000,
                )
            )
            assert all(t.error_code == 0 for t in response.topics), response
        out["create_s"] = time.perf_counter() - started

        # The fencing of a dead broker: the one leading the most partitions.
        victim = max(brokers, key=lambda b: leaders_of(controller, b.broker_id))
        out["victim_leaderships"] = leaders_of(controller, victim.broker_id)
        victim.alive = False
        lost_at = SYSTEM_CLOCK.monotonic_ms() + 1
        await trio.sleep(0.01)
        before = len(controller.commits.times)
        profile = cProfile.Profile() if args.profile else None
        started = time.perf_counter()
        if profile is not None:
            profile.enable()
        response = await controller.submit(
            FenceDeadBroker(victim.broker_id, victim.epoch, lost_at, evidence="bench")
        )
        done = time.perf_counter()
        if profile is not None:
            profile.disable()
        assert response.fenced, response
        batches = controller.commits.times[before:]
        out["fence_records"] = batches[-1][1] - (controller.commits.times[before - 1][1])
        out["fence_batches"] = len(batches)
        out["fence_first_commit_s"] = batches[0][0] - started
        out["fence_done_s"] = done - started
        out["fence_led_after"] = leaders_of(controller, victim.broker_id)

        # Controlled shutdown of the broker that now leads the most.
        leaving = max(
            (b for b in brokers if b.alive), key=lambda b: leaders_of(controller, b.broker_id)
        )
        out["shutdown_leaderships"] = leaders_of(controller, leaving.broker_id)
        leaving.shutting_down = True
        started = time.perf_counter()
        # The heartbeat is answered once its records (the leaderships moved) committed.
        await leaving.heartbeat()
        out["controlled_shutdown_s"] = time.perf_counter() - started
        out["shutdown_led_after"] = leaders_of(controller, leaving.broker_id)
        nursery.cancel_scope.cancel()
    await controller.log.aclose()

    # Controller failover: a new controller replays the log from disk, then answers.
    async with trio.open_nursery() as nursery:
        started = time.perf_counter()
        successor = Controller(directory)
        await successor.start(nursery)
        out["failover_replay_s"] = time.perf_counter() - started
        response = await successor.submit(
            CreateTopicsRequest(
                topics=(CreatableTopic(name="after-failover", num_partitions=1,
                                       replication_factor=1),),
                timeout_ms=60_000,
            )
        )  # fmt: skip
        out["failover_create_topics_s"] = time.perf_counter() - started
        out["failover_create_error"] = response.topics[0].error_code
        nursery.cancel_scope.cancel()
    await successor.log.aclose()

    if profile is not None:
        stats = pstats.Stats(profile)
        stats.sort_stats("cumulative").print_stats(25)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--partitions", type=int, default=25_000)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="trioka-bench-controller-") as directory,
        # The controller's log lines (one per election) are part of its cost: to a file.
        open(Path(directory) / "controller.log", "w") as log_file,
    ):
        configure_logging(role="controller", node_id=3001, stream=log_file, json=True)
        gc_policy.install()  # as a node process does
        out = trio.run(measure, args, str(Path(directory) / "metadata"))
    rows = [
        ("create the partitions (s)", "create_s"),
        ("dead broker's leaderships", "victim_leaderships"),
        ("fencing: records / batches", None),
        ("fencing: first batch committed (s)", "fence_first_commit_s"),
        ("fencing: event done (s)", "fence_done_s"),
        ("controlled shutdown: leaderships", "shutdown_leaderships"),
        ("controlled shutdown: committed (s)", "controlled_shutdown_s"),
        ("controller failover: log replayed (s)", "failover_replay_s"),
        ("controller failover: CreateTopics done (s)", "failover_create_topics_s"),
    ]
    print(f"controller at {args.partitions:,} partitions, RF {args.replication_factor}, "
          f"{args.brokers} simulated brokers")  # fmt: skip
    for label, key in rows:
        if key is None:
            value = f"{out['fence_records']:,} / {out['fence_batches']}"
        else:
            v = out[key]
            value = f"{v:.3f}" if isinstance(v, float) else f"{v:,}"
        print(f"  {label:<44} {value}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
