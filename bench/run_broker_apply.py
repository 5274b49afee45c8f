"""A surviving broker's cost of applying a dead broker's fencing (issue 15): the real broker
code in one process, its metadata fed by the benchmark.

    .venv/bin/python bench/run_broker_apply.py [--partitions 25000] [--profile] [--json]

Broker 1 of a 3-broker Raft-mode cluster, RF=3, leaderships spread evenly, with its logs on
disk. The benchmark publishes the records a Raft-mode controller writes when broker 3 dies
(`FenceBrokerRecord`, then a `PartitionChangeRecord` per partition: new leaders first, then
the ISR-only shrinks, as controller.cluster_control writes them) in the publisher's steps
(`broker.metadata_publisher.PUBLISH_STEP`), and times each step: replay into the image, the
local leader and follower changes, the fetchers, the log events (to a file, as a node writes
them). No socket is opened: the fetchers' requests are built, not sent.

Printed: the time of the creation (all partitions' logs), of each step and in total, and the
cost per changed partition. `--profile` adds cProfile's top functions of the fencing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.config import BrokerConfig
from broker.metadata_feeds.raft_log import RaftMetadataFeed
from broker.metadata_publisher import PUBLISH_STEP, publish_steps
from broker.node import Broker
from deploy.node import gc_policy
from deploy.node.broker_base import log_manager_for
from deploy.telemetry.logs import configure_logging
from protocol.clock import SYSTEM_CLOCK
from protocol.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from protocol.metadata.topic_ids import random_uuid

PER_TOPIC = 100
BROKERS = (1, 2, 3)
VICTIM = 3


class Unused:
    """Controller channel, metadata source and transport: never called here."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


class Feed:
    """Committed records with increasing offsets, published by the broker's publisher."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.offset = 0

    def batch(self, records: list[MetadataRecord]) -> list[tuple[int, MetadataRecord]]:
        out = [(self.offset + i, r) for i, r in enumerate(records)]
        self.offset += len(records)
        return out


def make_broker(directory: Path) -> Broker:
    config = BrokerConfig.from_values(
        {
            "node.id": 1,
            "metadata.mode": "raft",
            "process.roles": ["broker"],
            "controller.quorum.voters": "3001@127.0.0.1:9093",
            "controller.listener.names": ["CONTROLLER"],
            "log.dirs": [str(directory / "logs")],
        }
    )
    log_manager = log_manager_for(config, "bench", SYSTEM_CLOCK)
    log_manager.startup()
    return Broker(
        config,
        log_manager=log_manager,
        controller=Unused(),  # type: ignore[arg-type]
        feed=RaftMetadataFeed(Unused()),  # type: ignore[arg-type]
        cluster_id="bench",
        transport=Unused(),  # type: ignore[arg-type]
        clock=SYSTEM_CLOCK,
    )


def cluster_records(partitions: int) -> tuple[list[MetadataRecord], list[MetadataRecord]]:
    """The cluster's creation, and the fencing of VICTIM as the controller writes it."""
    created: list[MetadataRecord] = []
    for b in BROKERS:
        created.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=f"incarnation-{b}-aaaaaaaaaa"[:22],
                broker_epoch=b,
                endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=19090 + b),),
            )
        )
        created.append(UnfenceBrokerRecord(id=b, epoch=b))
    elections: list[MetadataRecord] = []
    shrinks: list[MetadataRecord] = []
    n = 0
    for t in range(partitions // PER_TOPIC):
        topic_id = random_uuid()
        created.append(TopicRecord(name=f"t{t:05d}", topic_id=topic_id))
        for p in range(PER_TOPIC):
            # Leaderships evenly spread, and each broker's followers split between the two
            # others, as the controller's placement does.
            first = BROKERS[n % 3]
            rest = [b for b in BROKERS if b != first]
            replicas = (first, *(rest if (n // 3) % 2 == 0 else rest[::-1]))
            n += 1
            created.append(
                PartitionRecord(
                    partition_id=p, topic_id=topic_id, replicas=replicas, isr=replicas,
                    leader=replicas[0],
                )
            )  # fmt: skip
            isr = tuple(r for r in replicas if r != VICTIM)
            if replicas[0] == VICTIM:
                elections.append(
                    PartitionChangeRecord(partition_id=p, topic_id=topic_id, leader=isr[0], isr=isr)
                )
            else:
                shrinks.append(PartitionChangeRecord(partition_id=p, topic_id=topic_id, isr=isr))
    fencing = [FenceBrokerRecord(id=VICTIM, epoch=VICTIM), *elections, *shrinks]
    return created, fencing


def measure(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    broker = make_broker(directory)
    feed = Feed(broker)
    created, fencing = cluster_records(args.partitions)
    started = time.perf_counter()
    broker.publisher.publish(feed.batch(created))
    broker.publisher.apply_full()
    out: dict[str, Any] = {"partitions": args.partitions, "create_s": time.perf_counter() - started}
    led = sum(1 for p in broker.partitions.partitions.values() if p.state.is_leader)
    out["led_before"] = led
    batch = feed.batch(fencing)
    profile = cProfile.Profile() if args.profile else None
    steps = []
    started = time.perf_counter()
    for step in publish_steps(batch, PUBLISH_STEP):
        t0 = time.perf_counter()
        if profile is not None:
            profile.enable()
        broker.publisher.publish(step)
        if profile is not None:
            profile.disable()
        steps.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    out["fence_records"] = len(fencing)
    out["fence_elections"] = sum(
        1 for r in fencing if isinstance(r, PartitionChangeRecord) and r.leader >= 0
    )
    out["steps_s"] = [round(s, 4) for s in steps]
    out["fence_apply_s"] = total
    out["us_per_change"] = total / max(1, len(fencing) - 1) * 1e6
    out["led_after"] = sum(1 for p in broker.partitions.partitions.values() if p.state.is_leader)
    broker.partitions.log_manager.shutdown()
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=25_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="trioka-bench-apply-") as directory,
        open(Path(directory) / "broker.log", "w") as log_file,
    ):
        configure_logging(role="broker", node_id=1, stream=log_file, json=True)
        gc_policy.install()  # as a node process does
        out = measure(args, Path(directory))
    print(f"broker 1 of 3 at {args.partitions:,} partitions, RF 3: broker {VICTIM} fenced")
    print(f"  create the partitions' logs (s)        {out['create_s']:.2f}")
    print(f"  leaderships here before / after        {out['led_before']:,} / {out['led_after']:,}")
    print(f"  fencing: records (elections)           {out['fence_records']:,} "
          f"({out['fence_elections']:,})")  # fmt: skip
    print(
        f"  fencing: steps of ~{PUBLISH_STEP:,} (s)          "
        + ", ".join(f"{s:.3f}" for s in out["steps_s"])
    )
    print(f"  fencing: applied in (s)                {out['fence_apply_s']:.3f}")
    print(f"  per changed partition (us)             {out['us_per_change']:.0f}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
