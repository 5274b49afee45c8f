"""ZkControllerService: the controller candidate every ZK-mode broker runs (Kafka's KafkaController).

It follows zkstore's `ControllerElection`. On `BecameController(epoch, zk version)`, as Kafka's
onControllerFailover:

1. load everything from ZooKeeper (`zkstore.load_metadata`) into a `ControllerState`;
2. a `ZkMetadataLog` continuing after the loaded records, fenced by the epoch's zk version, and
   the backend-agnostic `ControllerDriver` on it;
3. a `ControllerChannelManager` to the live brokers, which first gets `plan_failover` (a full
   LeaderAndIsr for every partition to each live replica, a full UpdateMetadata to every live
   broker); after that every committed event's `plan_propagation(before, after)`;
4. a children watch on /brokers/ids: each change (and once at start, which also elects leaders
   for New and Offline partitions) becomes a `BrokerChange` with the registrations' czxids as
   broker epochs, submitted to the driver;
5. when `auto.leader.rebalance.enable`, an `AutoLeaderRebalance` event 5 s after failover (as
   Kafka) and then every `leader.imbalance.check.interval.seconds`;
6. topic deletion in Kafka's ZK-mode order (controller.topic_deletion): DeleteTopics is
   validated by the controller's own operation but, instead of committing its
   RemoveTopicRecord, writes /admin/delete_topics/<t> (fenced) and queues the topic; a children
   watch on /admin/delete_topics queues markers written by anyone else (and drops markers that
   name no topic, or all of them when delete.topic.enable is false), and the markers loaded on
   failover are queued at once. Queued topics get UpdateMetadata with leader -2 and no
   LeaderAndIsr; every live replica gets StopReplica(delete); replicas on dead brokers wait
   (Ineligible) until the broker is back; once every replica answered without error the
   DeleteTopics operation runs through the driver and its RemoveTopicRecord removes the znodes.

On `Resigned` (the /controller znode moved, the session expired, or `resign()`) all of that is
cancelled and dropped: queued and running requests are answered NOT_CONTROLLER, channels close.
A write refused because another controller was elected (ControllerMovedError: this one is a
zombie) or one applied only in part makes this controller resign, so that the next one starts
from what ZooKeeper holds.

`submit(request)` runs a controller request (CreateTopics, AlterPartition, ControlledShutdown,
ElectLeaders, ...) on the active controller, or answers NOT_CONTROLLER (the controller's
`failed_response` shape) when this broker's controller is not active; `is_active` and
`active_id` say where the controller is, for the broker's forwarding channel.

    service = ZkControllerService(zk, broker_id, transport, config=ControllerConfig(...),
                                  inter_broker_listener="INTERNAL")
    await nursery.start(service.run)       # started once the first election round is done
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import structlog
import trio

from controller.broker_lifecycle import BrokerChange, LiveBroker
from controller.channel import DEFAULT_REQUEST_TIMEOUT_S, ControllerChannelManager
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.driver import ControllerDriver
from controller.elect_leaders import AutoLeaderRebalance
from controller.metrics import ControllerMetrics, ControllerStateName, default_metrics
from controller.operations import failed_response
from controller.ports import BrokerSender
from controller.propagation import (
    ControllerIdentity,
    plan_failover,
    plan_propagation,
    plan_topic_deletion,
)
from controller.state import ControllerState
from controller.topic_deletion import (
    TopicDeletionManager,
    liveness_change,
    stop_replica_answers,
)
from controller.topics import delete_topics
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.metadata.image import MetadataImage
from zkstore import (
    BecameController,
    ControllerElection,
    ControllerMovedError,
    Resigned,
    ZkClient,
    ZkMetadataLog,
    load_metadata,
)
from zkstore.fenced_writer import FencedWriter
from zkstore.loader import incarnation_from_czxid
from zkstore.record_writes import deletion_marker_ops
from zkstore.znodes import BrokerIdsZNode, BrokerIdZNode, DeleteTopicsZNode, DeleteTopicZNode

log = structlog.get_logger("deploy.node.zk_controller")

REBALANCE_INITIAL_DELAY_S = 5.0
"""Kafka schedules the first auto-rebalance check 5 s after a failover."""
RETRY_BACKOFF_S = 0.5
"""Wait before reading /brokers/ids again after a failed read (the connection is down)."""
IDLE_LOG_WITHIN_S = 600.0
"""How long the "controller requests answered" log waits for the brokers at most."""


class _Active:
    """One term as the active controller: everything dropped when it ends."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.scope = trio.CancelScope()
        self.finished = trio.Event()
        self.driver: ControllerDriver | None = None
        self.log: ZkMetadataLog | None = None
        self.channels: ControllerChannelManager | None = None
        self.resigning = False
        self.resign_requested = False
        # Topic deletion (ZK mode): set up by _failover before any broker request is sent.
        self.deletions = TopicDeletionManager()
        self.state_driver: ControllerDriver | None = None
        self.identity: ControllerIdentity | None = None
        self.deletion_channels: ControllerChannelManager | None = None
        self.markers: FencedWriter | None = None
        self.nursery: trio.Nursery | None = None


class ZkControllerService:
    """This broker's controller candidate in ZooKeeper mode. Run `run` in a nursery."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        sender: BrokerSender,
        *,
        config: ControllerConfig | None = None,
        ctx: ControllerContext | None = None,
        inter_broker_listener: str = "PLAINTEXT",
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        rebalance_initial_delay_s: float = REBALANCE_INITIAL_DELAY_S,
        rebalance_interval_s: float | None = None,
        channel_retry_backoff_s: float = 0.1,
        metrics: ControllerMetrics | None = None,
        election: ControllerElection | None = None,
    ) -> None:
        self._zk = zk
        self.broker_id = broker_id
        self._sender = sender
        self._ctx = (
            ctx if ctx is not None else ControllerContext(config=config or ControllerConfig())
        )
        self._config = self._ctx.config
        self.inter_broker_listener = inter_broker_listener
        self._request_timeout_s = request_timeout_s
        self._rebalance_initial_delay_s = rebalance_initial_delay_s
        self._rebalance_interval_s = (
            rebalance_interval_s
            if rebalance_interval_s is not None
            else float(self._config.leader_imbalance_check_interval_seconds)
        )
        self._channel_retry_backoff_s = channel_retry_backoff_s
        self._metrics = metrics
        self._election = election if election is not None else ControllerElection(zk, broker_id)
        # Only with the failpoint controller.zk.ignore_session_loss (tests of fencing).
        self._election.after_ignored_session_loss = self._act_as_zombie
        self._active: _Active | None = None
        self._nursery: trio.Nursery | None = None
        self.terms = 0
        """How many times this broker became the active controller (for tests and logs)."""

    # -- what the broker asks ----------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """This broker is the controller and serving (state loaded, event loop running)."""
        active = self._active
        return active is not None and active.driver is not None and not active.resigning

    @property
    def active_id(self) -> int | None:
        """The broker id in /controller as last seen (None when nobody holds it)."""
        return self._election.active_controller_id

    @property
    def epoch(self) -> int | None:
        """The controller epoch while active."""
        return self._active.epoch if self.is_active and self._active else None

    @property
    def driver(self) -> ControllerDriver | None:
        return self._active.driver if self.is_active and self._active else None

    @property
    def channels(self) -> ControllerChannelManager | None:
        return self._active.channels if self.is_active and self._active else None

    @property
    def image(self) -> MetadataImage | None:
        """The active controller's metadata (None when not active)."""
        driver = self.driver
        return None if driver is None else driver.state.image

    async def submit(self, request: Any) -> Any:
        """Run a controller request here if this broker is the active controller; otherwise
        its NOT_CONTROLLER response (the caller looks up `active_id` and forwards, or retries)."""
        active = self._active
        driver = active.driver if active is not None and not active.resigning else None
        if active is None or driver is None:
            where = self.active_id
            return failed_response(
                request,
                ErrorCode.NOT_CONTROLLER,
                f"broker {self.broker_id} is not the active controller"
                + (f" (the controller is broker {where})" if where is not None else ""),
            )
        if isinstance(request, DeleteTopicsRequest):
            return await self._delete_topics(active, driver, request)
        response = await driver.submit(request)
        self._check_log(active)
        if isinstance(request, ControlledShutdownRequest):
            # Tests check that this comes before the broker change of the broker's exit.
            log.info(
                "controlled shutdown processed",
                broker_id=request.broker_id,
                error_code=response.error_code,
                remaining=len(response.remaining_partitions),
            )
        if isinstance(request, CreateTopicsRequest):
            response = _explain_marked_for_deletion(response, active.deletions)
        return response

    def _controller_metrics(self) -> ControllerMetrics:
        return self._metrics if self._metrics is not None else default_metrics()

    async def resign(self) -> None:
        """Give up the controllership (delete /controller so that the brokers elect again)."""
        await self._election.resign()

    # -- the election's events ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Take part in the election until cancelled (started after the first round)."""
        if self._nursery is not None:
            raise RuntimeError("ZkControllerService.run is already running")
        events = self._election.events()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self._election.run)
                task_status.started()
                async for event in events:
                    if isinstance(event, BecameController):
                        await self._stop_active("elected again")
                        active = _Active(event.epoch)
                        self._active = active
                        self.terms += 1
                        nursery.start_soon(self._serve, active, event)
                    elif isinstance(event, Resigned):
                        await self._stop_active(event.reason)
        finally:
            self._nursery = None
            active, self._active = self._active, None
            if active is not None:
                active.scope.cancel()

    async def _stop_active(self, reason: str) -> None:
        active, self._active = self._active, None
        if active is None:
            return
        log.info(
            "controller resigning", broker_id=self.broker_id, epoch=active.epoch, reason=reason
        )
        active.resigning = True
        started = trio.current_time()
        active.scope.cancel()
        await active.finished.wait()
        # Kafka's ControllerChange event (onControllerResignation).
        self._controller_metrics().timer(ControllerStateName.CONTROLLER_CHANGE).observe(
            (trio.current_time() - started) * 1000
        )

    async def _serve(self, active: _Active, event: BecameController) -> None:
        try:
            with active.scope:
                await self._failover(active, event)
        except Exception:
            log.exception(
                "controller failed; resigning", broker_id=self.broker_id, epoch=active.epoch
            )
            self._resign_soon(active)
        finally:
            active.driver = None
            active.channels = None
            active.log = None
            active.finished.set()

    async def _failover(self, active: _Active, event: BecameController) -> None:
        started = trio.current_time()
        loaded = await load_metadata(self._zk)
        read_s = trio.current_time() - started
        image = loaded.image()
        replay_s = trio.current_time() - started - read_s
        metadata_log = ZkMetadataLog.from_loaded(
            self._zk, loaded, epoch=event.epoch, epoch_zk_version=event.epoch_zk_version
        )
        identity = ControllerIdentity(self.broker_id, event.epoch, self.inter_broker_listener)
        channels = ControllerChannelManager(
            self._sender,
            listener=self.inter_broker_listener,
            request_timeout_s=self._request_timeout_s,
            retry_backoff_s=self._channel_retry_backoff_s,
            max_retry_backoff_s=max(1.0, self._channel_retry_backoff_s),
            on_response=lambda b, req, resp: self._on_response(active, b, req, resp),
        )
        deletions = active.deletions
        if self._config.delete_topic_enable:
            # Kafka's initializeTopicDeletion: resume what the previous controller queued.
            deletions.enqueue(image, sorted(loaded.topics_to_delete))
        active.identity = identity
        active.deletion_channels = channels
        active.markers = FencedWriter(self._zk, event.epoch_zk_version)

        def propagate(before: MetadataImage, after: MetadataImage) -> None:
            channels.update_brokers(after)
            channels.send_plan(
                plan_propagation(before, after, identity, deleting=deletions.deleting_ids())
            )
            deletions.forget_removed(after)
            dead, started = liveness_change(_live_epochs(before), _live_epochs(after))
            if dead or started:
                deletions.brokers_changed(dead, started)
            self._deletion_step(active, after)

        driver_kwargs: dict[str, Any] = {"on_commit": propagate}
        if self._metrics is not None:
            driver_kwargs["metrics"] = self._metrics
        # The deletion queue is this term's (not replayed state): operations read it through
        # the context when they run (the rebalance check skips those topics, as Kafka's).
        ctx = dataclasses.replace(self._ctx, topics_queued_for_deletion=deletions.deleting_ids)
        driver = ControllerDriver(metadata_log, ControllerState(image), ctx, **driver_kwargs)
        active.state_driver = driver
        async with trio.open_nursery() as nursery:
            active.nursery = nursery
            await nursery.start(channels.run)
            channels.update_brokers(image)
            channels.send_plan(plan_failover(image, identity, deleting=deletions.deleting_ids()))
            await nursery.start(driver.run)
            self._deletion_step(active, image)
            active.driver, active.log, active.channels = driver, metadata_log, channels
            # Timing fields for failover benchmarks (bench/run_failover.py): ZooKeeper reads,
            # replay into the image, and the whole load until the event loop serves.
            log.info(
                "controller active",
                broker_id=self.broker_id,
                epoch=event.epoch,
                brokers=sorted(image.cluster.brokers),
                topics=len(image.topics.by_id),
                partitions=sum(len(t.partitions) for t in image.topics.by_id.values()),
                records=len(loaded.records),
                zk_read_s=round(read_s, 3),
                replay_s=round(replay_s, 3),
                load_s=round(trio.current_time() - started, 3),
            )
            # Kafka's ControllerChange event (onControllerFailover) ends here.
            self._controller_metrics().timer(ControllerStateName.CONTROLLER_CHANGE).observe(
                (trio.current_time() - started) * 1000
            )
            nursery.start_soon(self._log_when_idle, channels, "failover", started)
            nursery.start_soon(self._watch_brokers, active, driver)
            nursery.start_soon(self._watch_deletions, active, driver)
            if self._config.auto_leader_rebalance_enable:
                nursery.start_soon(self._rebalance, active, driver)

    # -- brokers coming and going ----------------------------------------------------------------

    async def _watch_brokers(self, active: _Active, driver: ControllerDriver) -> None:
        wake_send, wake_receive = trio.open_memory_channel[None](math.inf)

        def watch(_event: object) -> None:
            # Runs in the trio thread, possibly after this term ended.
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                wake_send.send_nowait(None)

        with wake_send, wake_receive:
            while True:
                try:
                    brokers = await self._read_brokers(watch)
                except Exception as exc:
                    log.warning("reading /brokers/ids failed; retrying", error=repr(exc))
                    await trio.sleep(RETRY_BACKOFF_S)
                    continue
                submitted = trio.current_time()
                response = await driver.submit(BrokerChange(brokers))
                if response.error_code:
                    log.warning(
                        "broker change failed",
                        error_code=response.error_code,
                        error=response.error_message,
                    )
                elif response.new_broker_ids or response.dead_broker_ids:
                    # event_s: queue + elections + ZooKeeper writes, until committed.
                    log.info(
                        "brokers changed",
                        new=response.new_broker_ids,
                        dead=response.dead_broker_ids,
                        bounced=response.bounced_broker_ids,
                        event_s=round(trio.current_time() - submitted, 3),
                    )
                    channels = active.channels
                    if channels is not None and self._nursery is not None:
                        self._nursery.start_soon(
                            self._log_when_idle, channels, "broker change", submitted
                        )
                if self._check_log(active):
                    return
                await wake_receive.receive()
                while True:  # several changes since: one read covers them all
                    try:
                        wake_receive.receive_nowait()
                    except trio.WouldBlock:
                        break

    async def _log_when_idle(
        self, channels: ControllerChannelManager, trigger: str, since: float
    ) -> None:
        """Log once every broker answered what was queued for it (or the term ended): how long
        after `since` the controller's LeaderAndIsr/UpdateMetadata of `trigger` were through."""
        with trio.move_on_after(IDLE_LOG_WITHIN_S):  # a channel to a vanished broker
            await channels.wait_idle()
        log.info(
            "controller requests answered",
            trigger=trigger,
            since_s=round(trio.current_time() - since, 3),
        )

    async def _read_brokers(self, watch: Any) -> tuple[LiveBroker, ...]:
        children = await self._zk.get_children(BrokerIdsZNode.PATH, watch=watch)
        ids = sorted(int(c) for c in children if c.isdigit())
        found = await self._zk.get_many([BrokerIdZNode.path(i) for i in ids])
        brokers: list[LiveBroker] = []
        for broker_id, got in zip(ids, found, strict=True):
            if got is None:
                continue  # gone while we read: the watch fires again
            data, stat = got
            info = BrokerIdZNode.decode(broker_id, data)
            brokers.append(
                LiveBroker(
                    broker_id=broker_id,
                    epoch=int(stat.czxid),
                    endpoints=info.endpoints,
                    rack=info.rack,
                    incarnation_id=incarnation_from_czxid(int(stat.czxid)),
                )
            )
        return tuple(brokers)

    async def _rebalance(self, active: _Active, driver: ControllerDriver) -> None:
        await trio.sleep(self._rebalance_initial_delay_s)
        while True:
            response = await driver.submit(AutoLeaderRebalance())
            if self._check_log(active):
                return
            moved = [
                (r.topic, p.partition_id)
                for r in response.replica_election_results
                for p in r.partition_result
                if p.error_code == 0
            ]
            if moved:
                log.info("auto leader rebalance", elected=moved)
            await trio.sleep(self._rebalance_interval_s)

    # -- topic deletion (Kafka's TopicDeletionManager, ZK mode) ------------------------------------

    async def _delete_topics(
        self, active: _Active, driver: ControllerDriver, request: DeleteTopicsRequest
    ) -> DeleteTopicsResponse:
        """Validate as the DeleteTopics operation does, then queue instead of removing: the
        marker znodes first (fenced), then the deletion starts. Already queued -> success
        again (Kafka swallows TopicAlreadyMarkedForDeletionException)."""
        result = delete_topics(driver.state, request, self._ctx)
        image = driver.state.image
        names = [
            topic.name
            for r in result.records
            if (topic := image.topics.by_id.get(getattr(r, "topic_id", ""))) is not None
        ]
        to_mark = [n for n in names if not active.deletions.is_queued(n)]
        if to_mark:
            problem = await self._write_markers(active, create=to_mark)
            if problem is not None:
                code, message = problem
                return failed_response(request, code, message)
        image = driver.state.image
        newly = active.deletions.enqueue(image, to_mark)
        if newly:
            log.info("topics queued for deletion", topics=to_mark)
        self._deletion_step(active, image, newly)
        return result.response

    async def _write_markers(
        self, active: _Active, *, create: Sequence[str] = (), delete: Sequence[str] = ()
    ) -> tuple[ErrorCode, str] | None:
        """Create / delete /admin/delete_topics children (fenced); None when done."""
        writer = active.markers
        if writer is None:
            return ErrorCode.NOT_CONTROLLER, "the controller is not serving yet"
        try:
            found = [await self._zk.exists(DeleteTopicZNode.path(n)) for n in create]
            missing = [n for n, stat in zip(create, found, strict=True) if stat is None]
            await writer.write(deletion_marker_ops(create=missing, delete=delete))
        except ControllerMovedError as exc:
            self._resign_soon(active)
            return ErrorCode.NOT_CONTROLLER, f"this controller was fenced: {exc}"
        except Exception as exc:
            # A marker created by someone else meanwhile fails the multi-op; it is queued all
            # the same when every marker exists now.
            if create and not delete:
                with contextlib.suppress(Exception):
                    found = [await self._zk.exists(DeleteTopicZNode.path(n)) for n in create]
                    if all(stat is not None for stat in found):
                        return None
            log.warning("writing topic deletion markers failed", error=repr(exc))
            return (
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"could not write {DeleteTopicsZNode.PATH} markers: {exc!r}",
            )
        return None

    def _deletion_step(
        self, active: _Active, image: MetadataImage, newly_queued: Sequence[str] = ()
    ) -> None:
        """resumeDeletions: send what it calls for, commit the topics it completes."""
        channels, identity = active.deletion_channels, active.identity
        if channels is None or identity is None or active.resigning:
            return
        step = active.deletions.resume(image, _live_epochs(image).keys(), newly_queued)
        if step.stop_replicas or step.newly_queued:
            channels.send_plan(
                plan_topic_deletion(
                    image,
                    identity,
                    newly_queued=step.newly_queued,
                    stop_replicas={
                        b: [(t.topic_name, t.topic_id, t.partition) for t in targets]
                        for b, targets in step.stop_replicas.items()
                    },
                )
            )
            for broker_id, targets in step.stop_replicas.items():
                log.info(
                    "StopReplica(delete) for topic deletion",
                    broker_id=broker_id,
                    partitions=[f"{t.topic_name}-{t.partition}" for t in targets],
                )
        if step.complete and active.nursery is not None:
            for topic_id in step.complete:
                topic = image.topics.by_id.get(topic_id)
                if topic is not None:
                    active.nursery.start_soon(self._complete_deletion, active, topic_id, topic.name)

    async def _complete_deletion(self, active: _Active, topic_id: str, name: str) -> None:
        """Every replica is deleted: the DeleteTopics operation's RemoveTopicRecord removes the
        topic's znodes (and the marker) and the topic from the controller's state."""
        driver = active.state_driver
        if driver is None:
            return
        while True:
            topic = driver.state.image.topics.by_name.get(name)
            if topic is None or topic.topic_id != topic_id:
                active.deletions.forget([topic_id])
                return
            response = await driver.submit(DeleteTopicsRequest(topic_names=(name,)))
            if self._check_log(active):
                return
            code = response.responses[0].error_code if response.responses else 0
            if code == 0 and not response.error_code:
                log.info("topic deletion completed", topic=name, topic_id=topic_id)
                active.deletions.forget([topic_id])
                return
            log.warning(
                "removing a deleted topic failed; retrying",
                topic=name,
                error_code=code or response.error_code,
            )
            await trio.sleep(RETRY_BACKOFF_S)

    async def _watch_deletions(self, active: _Active, driver: ControllerDriver) -> None:
        """Kafka's TopicDeletionHandler: a children watch on /admin/delete_topics."""
        wake_send, wake_receive = trio.open_memory_channel[None](math.inf)

        def watch(_event: object) -> None:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                wake_send.send_nowait(None)

        with wake_send, wake_receive:
            while True:
                try:
                    children = await self._zk.get_children(DeleteTopicsZNode.PATH, watch=watch)
                except Exception as exc:
                    log.warning("reading /admin/delete_topics failed; retrying", error=repr(exc))
                    await trio.sleep(RETRY_BACKOFF_S)
                    continue
                image = driver.state.image
                if self._config.delete_topic_enable:
                    stale = sorted(c for c in children if c not in image.topics.by_name)
                    wanted = sorted(c for c in children if c in image.topics.by_name)
                else:
                    stale, wanted = sorted(children), []
                if stale:
                    log.info(
                        "removing deletion markers",
                        topics=stale,
                        reason="no such topic"
                        if self._config.delete_topic_enable
                        else "delete.topic.enable is false",
                    )
                    await self._write_markers(active, delete=stale)
                newly = active.deletions.enqueue(driver.state.image, wanted)
                if newly:
                    log.info("topics queued for deletion", topics=wanted)
                    self._deletion_step(active, driver.state.image, newly)
                if active.resign_requested:
                    return
                await wake_receive.receive()
                while True:
                    try:
                        wake_receive.receive_nowait()
                    except trio.WouldBlock:
                        break

    # -- failures ------------------------------------------------------------------------------

    async def _act_as_zombie(self, within_s: float = 10.0) -> None:
        """Failpoint `controller.zk.ignore_session_loss`: this controller's session expired and
        another was elected; act once more on the stale state, as a zombie whose event queue was
        not drained would: a full LeaderAndIsr/UpdateMetadata round with the old epoch (the
        brokers must refuse it: STALE_CONTROLLER_EPOCH), then the BrokerChange it missed (its
        writes must fail on the /controller_epoch version check, which makes it resign)."""
        active = self._active
        if active is None or active.driver is None or active.channels is None:
            return
        driver, channels = active.driver, active.channels
        identity = ControllerIdentity(self.broker_id, active.epoch, self.inter_broker_listener)
        log.warning("zombie controller acting on its stale state", epoch=active.epoch)
        channels.send_plan(plan_failover(driver.state.image, identity))
        with trio.move_on_after(within_s):
            await channels.wait_idle()
        with trio.move_on_after(within_s):
            await driver.submit(BrokerChange(await self._read_brokers(lambda _e: None)))
        self._check_log(active)

    def _check_log(self, active: _Active) -> bool:
        """True (and resigning) when the metadata log refuses writes: fenced by a newer
        controller, or ZooKeeper left half-written."""
        metadata_log = active.log
        if metadata_log is None or metadata_log.failure is None:
            return False
        if not active.resign_requested:
            log.warning(
                "controller writes refused; resigning",
                broker_id=self.broker_id,
                epoch=active.epoch,
                error=str(metadata_log.failure),
            )
            self._resign_soon(active)
        return True

    def _resign_soon(self, active: _Active) -> None:
        if active.resign_requested:
            return
        active.resign_requested = active.resigning = True
        if self._nursery is not None and active is self._active:
            self._nursery.start_soon(self._resign_quietly)

    async def _resign_quietly(self) -> None:
        try:
            await self._election.resign()
        except Exception as exc:
            # Not connected: the session's end removes /controller anyway.
            log.warning("controller resignation failed", error=repr(exc))

    def _on_response(
        self, active: _Active, broker_id: int, request: Request, response: Response
    ) -> None:
        if isinstance(request, StopReplicaRequest) and isinstance(response, StopReplicaResponse):
            answers = stop_replica_answers(
                (
                    (
                        t.topic_name,
                        t.topic_id,
                        [
                            (p.partition_index, p.leader_epoch, p.delete_partition)
                            for p in t.partition_states
                        ],
                    )
                    for t in request.topic_states
                ),
                response.error_code,
                (
                    (e.topic_name, e.partition_index, e.error_code)
                    for e in response.partition_errors
                ),
            )
            driver = active.state_driver
            if answers and driver is not None:
                active.deletions.stop_replica_answered(broker_id, answers)
                self._deletion_step(active, driver.state.image)
        code = getattr(response, "error_code", 0)
        if code:
            log.warning(
                "broker refused a controller request",
                broker_id=broker_id,
                request=type(request).__name__,
                error=ErrorCode.from_wire(code).name,
                message=getattr(response, "error_message", None),
            )
        for topic in _partition_errors(response):
            log.warning("broker refused partitions", broker_id=broker_id, errors=topic)


def _live_epochs(image: MetadataImage) -> dict[int, int]:
    """{broker id: broker epoch} of the live (registered, unfenced) brokers."""
    return {b.broker_id: b.epoch for b in image.cluster.brokers.values() if not b.fenced}


def _explain_marked_for_deletion(
    response: CreateTopicsResponse, deletions: TopicDeletionManager
) -> CreateTopicsResponse:
    """TOPIC_ALREADY_EXISTS for a topic queued for deletion says so (Kafka's AdminZkClient)."""
    if not any(
        r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and deletions.is_queued(r.name)
        for r in response.topics
    ):
        return response
    return CreateTopicsResponse(
        topics=tuple(
            CreatableTopicResult(
                name=r.name,
                error_code=r.error_code,
                error_message=f"Topic '{r.name}' is marked for deletion.",
            )
            if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and deletions.is_queued(r.name)
            else r
            for r in response.topics
        )
    )


def _partition_errors(response: Response) -> Sequence[object]:
    topics = getattr(response, "topics", None) or ()
    out: list[object] = []
    for topic in topics:
        errors = [
            (getattr(topic, "topic_name", "?"), p.partition_index, p.error_code)
            for p in getattr(topic, "partition_errors", ())
            if p.error_code
        ]
        if errors:
            out.append(errors)
    return out


__all__ = ["REBALANCE_INITIAL_DELAY_S", "ZkControllerService"]
