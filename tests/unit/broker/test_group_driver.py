"""The group coordinator's trio driver on a real log (tmp_path) and a virtual clock: parked
joins answered by the timer, a group store and a commit appended and replicated, a load from
the log after a new election, a discarded load, a retried sync, shutdown, a reload of a
cleaned (compacted) partition, a failed load retried rather than served half-read."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from broker.group.coordinator import GroupCoordinatorCore
from broker.group.driver import DriverConfig, GroupCoordinatorDriver
from broker.group.effects import GroupConfig
from broker.group.hashing import OFFSETS_TOPIC
from broker.group.records import OffsetKey, OffsetValue
from broker.partitions import PartitionManager
from broker.purgatory import FetchPurgatory
from broker.replica.partition_state import PartitionChange
from protocol.errors import ErrorCode as E
from protocol.messages.groups import JoinGroupResponse, SyncGroupResponse
from protocol.names import TopicPartition
from storage.cleaner import clean, plan_cleaning, swap_in
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from tests.support.waiting import wait_until

TP = TopicPartition(OFFSETS_TOPIC, 0)
EVENTS = TopicPartition("events", 0)


def make(
    tmp_path: Path, **config: int
) -> tuple[GroupCoordinatorDriver, PartitionManager, FetchPurgatory]:
    logs = LogManager([tmp_path], node_id=1)
    logs.startup()
    partitions = PartitionManager(logs, 1, lambda topic: {})
    purgatory = FetchPurgatory()
    core = GroupCoordinatorCore(
        GroupConfig(
            num_partitions=1,
            min_session_timeout_ms=1000,
            initial_rebalance_delay_ms=500,
            offsets_retention_ms=config.get("retention_ms", 7 * 24 * 3600 * 1000),
        )
    )
    driver = GroupCoordinatorDriver(
        core,
        partitions=partitions,
        notify=purgatory.notify,
        hw_purgatory=purgatory,
        clock_ms=lambda: int(trio.current_time() * 1000),
        config=DriverConfig(retention_check_interval_ms=config.get("check_ms", 600_000)),
    )
    return driver, partitions, purgatory


def lead(partitions: PartitionManager, driver: GroupCoordinatorDriver, epoch: int) -> None:
    partitions.become(PartitionChange(TP, "tid", 1, epoch, (1,), (1,)))
    driver.on_leadership([(TP, epoch)], [])


def lose_and_regain(
    partitions: PartitionManager, driver: GroupCoordinatorDriver, epoch: int
) -> None:
    """Another broker leads in `epoch`, then this one again in `epoch + 1`."""
    partitions.become(PartitionChange(TP, "tid", 2, epoch, (1, 2), (1, 2)))
    driver.on_leadership([], [(TP, epoch)])
    lead(partitions, driver, epoch + 1)


async def loaded(driver: GroupCoordinatorDriver) -> None:
    await wait_until(lambda: driver.core.group_error("g")[0] == E.NONE, within=5)


def join(driver: GroupCoordinatorDriver, member: str = "", now: int = 0):
    return driver.core.join(
        group_id="g",
        member_id=member,
        client_id="c",
        client_host="h",
        session_timeout_ms=3000,
        rebalance_timeout_ms=5000,
        protocol_type="consumer",
        protocols=(("range", b"sub"),),
        now_ms=now,
    )


async def test_join_sync_commit_then_reload_after_a_new_election(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    driver, partitions, _ = make(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(driver.run)
        lead(partitions, driver, 1)
        await loaded(driver)
        first = await driver.answer(join(driver))
        assert isinstance(first, JoinGroupResponse) and first.error_code == E.MEMBER_ID_REQUIRED
        member = first.member_id
        now = driver.clock_ms()
        with trio.fail_after(2):  # the initial delay passes on the timer, in virtual time
            joined = await driver.answer(join(driver, member, now))
        assert joined.error_code == 0 and joined.generation_id == 1
        synced = await driver.answer(
            driver.core.sync(
                group_id="g",
                member_id=member,
                generation=1,
                protocol_type=None,
                protocol_name=None,
                assignments={member: b"A"},
                now_ms=driver.clock_ms(),
            )
        )
        assert isinstance(synced, SyncGroupResponse) and synced.assignment == b"A"
        code, _ = await driver.append(0, [(OffsetKey("g", "events", 0), OffsetValue(9))])
        assert code == E.NONE
        assert partitions.get(TP).state.high_watermark == partitions.get(TP).log.log_end_offset

        lead(partitions, driver, 2)  # still the leader, a new epoch: nothing reloaded
        assert driver.core.group_error("g")[0] == E.NONE and driver.core.owned[0].epoch == 2
        entry = [(OffsetKey("g", "events", 0), OffsetValue(9))]
        assert (await driver.append(0, entry))[0] == E.NONE  # appends in the new epoch
        lose_and_regain(partitions, driver, 3)  # elected again: unload, load from the log
        assert driver.core.group_error("g")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        await loaded(driver)
        group = driver.core.groups["g"]
        assert (group.generation, list(group.members), group.members[member].assignment) == (
            1,
            [member],
            b"A",
        )
        assert group.offsets[EVENTS].offset == 9
        n.cancel_scope.cancel()


async def test_append_refused_after_resignation_and_load_discarded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    driver, partitions, _ = make(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(driver.run)
        lead(partitions, driver, 1)
        await loaded(driver)
        partitions.become(PartitionChange(TP, "tid", 2, 2, (1, 2), (1, 2)))
        driver.on_leadership([], [(TP, 2)])
        assert driver.core.group_error("g")[0] == E.NOT_COORDINATOR
        code, _ = await driver.append(0, [(OffsetKey("g", "events", 0), OffsetValue(1))])
        assert code == E.NOT_COORDINATOR
        n.cancel_scope.cancel()


async def test_retried_sync_and_shutdown_answer_parked_requests(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    driver, partitions, _ = make(tmp_path)
    answers: dict[str, object] = {}
    async with trio.open_nursery() as n:
        await n.start(driver.run)
        lead(partitions, driver, 1)
        await loaded(driver)
        a = (await driver.answer(join(driver))).member_id
        b = (await driver.answer(join(driver))).member_id

        async def park(name: str, outcome) -> None:
            answers[name] = await driver.answer(outcome)

        n.start_soon(park, "join-a", join(driver, a, driver.clock_ms()))
        await trio.testing.wait_all_tasks_blocked()
        joined_b = await driver.answer(join(driver, b, driver.clock_ms()))
        await wait_until(lambda: "join-a" in answers, within=2)
        follower = a if joined_b.leader != a else b

        def sync():
            return driver.core.sync(
                group_id="g",
                member_id=follower,
                generation=1,
                protocol_type=None,
                protocol_name=None,
                assignments={},
                now_ms=driver.clock_ms(),
            )

        n.start_soon(park, "sync-1", sync())
        await trio.testing.wait_all_tasks_blocked()
        n.start_soon(park, "sync-2", sync())
        await trio.testing.wait_all_tasks_blocked()
        assert answers["sync-1"].error_code == E.REBALANCE_IN_PROGRESS
        driver.shutdown()
        await trio.testing.wait_all_tasks_blocked()
        assert answers["sync-2"].error_code == E.NOT_COORDINATOR
        n.cancel_scope.cancel()


async def test_expired_offsets_are_deleted_by_tombstones(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    driver, partitions, _ = make(tmp_path, retention_ms=60_000, check_ms=10_000)
    async with trio.open_nursery() as n:
        await n.start(driver.run)
        lead(partitions, driver, 1)
        await loaded(driver)
        now = driver.clock_ms()
        assert (
            driver.core.validate_commit(group_id="g", member_id="", generation=-1, now_ms=now)[0]
            == E.NONE
        )
        entries = [(OffsetKey("g", "events", 0), OffsetValue(4, commit_timestamp_ms=now))]
        assert (await driver.append(0, entries))[0] == E.NONE
        driver.core.offsets_committed("g", {EVENTS: entries[0][1]})
        end = partitions.get(TP).log.log_end_offset
        await wait_until(lambda: "g" not in driver.core.groups, within=120)
        # Tombstones for the offset and the group were appended: a reload finds nothing.
        await wait_until(lambda: partitions.get(TP).log.log_end_offset == end + 2, within=5)
        lose_and_regain(partitions, driver, 2)
        await loaded(driver)
        assert driver.core.groups == {}
        n.cancel_scope.cancel()


async def test_reload_of_a_cleaned_partition(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Compaction and loading together: many commits and a deleted group's tombstones, the
    partition cleaned by storage.cleaner (gaps, empty batches), then a reload."""
    driver, partitions, _ = make(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(driver.run)
        lead(partitions, driver, 1)
        await loaded(driver)
        gone = [(OffsetKey("gone", "events", 0), OffsetValue(1))]
        assert (await driver.append(0, gone))[0] == E.NONE
        for i in range(300):
            entry = [(OffsetKey("g", "events", p), OffsetValue(i + p)) for p in range(3)]
            assert (await driver.append(0, entry))[0] == E.NONE
            if i == 100:
                tomb = [(OffsetKey("gone", "events", 0), None)]
                assert (await driver.append(0, tomb))[0] == E.NONE
            if i % 50 == 49:
                partitions.get(TP).log.roll()
        log = partitions.get(TP).log
        log.roll()
        log.flush()
        before = log.size
        plan = plan_cleaning(log, first_dirty=0, now_ms=driver.clock_ms())
        assert plan is not None
        assert swap_in(log, clean(plan, 1 << 20))
        assert log.size < before / 10
        lose_and_regain(partitions, driver, 1)
        await loaded(driver)
        offsets = driver.core.groups["g"].offsets
        assert {tp.partition: v.offset for tp, v in offsets.items()} == {0: 299, 1: 300, 2: 301}
        assert "gone" not in driver.core.groups
        n.cancel_scope.cancel()


async def test_a_failed_load_is_retried_not_served(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch
) -> None:
    driver, partitions, _ = make(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(driver.run)
        lead(partitions, driver, 1)
        await loaded(driver)
        assert (await driver.append(0, [(OffsetKey("g", "events", 0), OffsetValue(5))]))[0] == 0
        log = partitions.get(TP).log
        real_read = log.read
        failures = []

        def failing_read(*args, **kwargs):
            if not failures:
                failures.append(1)
                raise KafkaStorageError("disk says no")
            return real_read(*args, **kwargs)

        monkeypatch.setattr(log, "read", failing_read)
        lose_and_regain(partitions, driver, 1)
        await wait_until(lambda: failures, within=5)
        assert driver.core.group_error("g")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        # Retried after request.timeout.ms (30 s of virtual time), from the start of the log.
        await wait_until(lambda: driver.core.group_error("g")[0] == E.NONE, within=60)
        assert driver.core.groups["g"].offsets[EVENTS].offset == 5
        n.cancel_scope.cancel()
