"""Controller election against a real ZooKeeper: one winner, epoch bumps, takeover, fencing."""

from __future__ import annotations

import pytest
import trio

from tests.support.waiting import wait_until
from tests.support.zookeeper import ZooKeeperChroot
from zkstore.client import ZkClient
from zkstore.election import (
    BecameController,
    ControllerChanged,
    ControllerElection,
    Resigned,
    read_controller_epoch,
    read_controller_id,
)
from zkstore.errors import ControllerMovedError
from zkstore.fenced_writer import CreateOp, FencedWriter
from zkstore.znodes import ControllerZNode

SESSION_S = 2.0


async def _drain(election: ControllerElection) -> list[object]:
    out: list[object] = []
    while True:
        try:
            out.append(election.events().receive_nowait())
        except trio.WouldBlock:
            return out


async def test_two_candidates_one_wins_and_the_other_takes_over_with_the_next_epoch(
    zookeeper: ZooKeeperChroot,
) -> None:
    async with (
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk1,
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk2,
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as observer,
        trio.open_nursery() as nursery,
    ):
        e1 = ControllerElection(zk1, 1)
        e2 = ControllerElection(zk2, 2)
        await nursery.start(e1.run)
        await nursery.start(e2.run)
        await wait_until(lambda: e1.active_controller_id == e2.active_controller_id is not None)
        winner, loser = (e1, e2) if e1.is_active else (e2, e1)
        assert winner.is_active and not loser.is_active
        assert winner.epoch == 1 and winner.epoch_zk_version == 1
        assert await read_controller_id(observer) == winner.broker_id
        assert await read_controller_epoch(observer) == (1, 1)
        data, stat = await observer.get(ControllerZNode.PATH)
        assert ControllerZNode.decode(data).broker_id == winner.broker_id
        assert stat.ephemeralOwner == (zk1 if winner is e1 else zk2).session_id
        events = await _drain(winner)
        assert BecameController(1, 1) in events

        # The winner's session ends (a clean close: the ephemeral goes at once).
        old_version = winner.epoch_zk_version
        assert old_version is not None
        await (zk1 if winner is e1 else zk2).close()
        await wait_until(lambda: loser.is_active, within=10)
        assert loser.epoch == 2 and loser.epoch_zk_version == 2
        assert await read_controller_epoch(observer) == (2, 2)
        assert BecameController(2, 2) in await _drain(loser)
        assert await read_controller_id(observer) == loser.broker_id

        # A zombie (the old winner's fencing version) cannot write anything.
        zombie = FencedWriter(observer, old_version)
        with pytest.raises(ControllerMovedError):
            await zombie.write([CreateOp("/zombie-was-here", b"x")])
        assert await observer.exists("/zombie-was-here") is None
        nursery.cancel_scope.cancel()


async def test_controller_resigns_when_the_znode_moves_away_and_on_request(
    zookeeper: ZooKeeperChroot,
) -> None:
    async with (
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk1,
        ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as zk2,
        trio.open_nursery() as nursery,
    ):
        e1 = ControllerElection(zk1, 1)
        await nursery.start(e1.run)
        assert e1.is_active and e1.epoch == 1
        await e1.resign()
        assert not e1.is_active
        assert Resigned("resigned on request") in await _drain(e1)
        # Deleting /controller made every candidate re-elect: broker 1 (the only one) again.
        await wait_until(lambda: e1.is_active, within=10)
        assert e1.epoch == 2

        # Someone else's /controller (simulating a move): broker 1 resigns on the watch.
        await zk1.delete(ControllerZNode.PATH)
        e2 = ControllerElection(zk2, 2)
        # Broker 1's watch fires first or broker 2 wins the race; either way one controller.
        await nursery.start(e2.run)
        await wait_until(
            lambda: e1.active_controller_id == e2.active_controller_id is not None, within=10
        )
        assert e1.is_active != e2.is_active
        events = await _drain(e1)
        assert any(isinstance(e, Resigned) for e in events)
        assert any(isinstance(e, ControllerChanged) for e in events)
        nursery.cancel_scope.cancel()
