"""ZkMode: what a ZooKeeper-mode controller (Kafka's KafkaController) adds to the term lifecycle
of controller.service.terms. The ZooKeeper side (the registry, the deletion markers) is a port,
`ZkRegistry`, that zkstore.leadership implements.

1. A `ControllerChannelManager` to the live brokers first gets `plan_failover` (a full
   LeaderAndIsr for every partition to each live replica, a full UpdateMetadata to every live
   broker); after that every committed event's `plan_propagation(before, after)`.
2. A children watch on /brokers/ids: each change (and once at start, which also elects leaders
   for New and Offline partitions) becomes a `BrokerChange` with the registrations' czxids as
   broker epochs.
3. Topic deletion in Kafka's ZK-mode order (controller.topic_deletion): DeleteTopics is
   validated by the controller's own operation but, instead of committing its
   RemoveTopicRecord, writes /admin/delete_topics/<t> (fenced) and queues the topic; a children
   watch on /admin/delete_topics queues markers written by anyone else (and drops markers that
   name no topic, or all of them when delete.topic.enable is false), and the markers loaded on
   failover are queued at once. Queued topics get UpdateMetadata with leader -2 and no
   LeaderAndIsr; every live replica gets StopReplica(delete); replicas on dead brokers wait
   (Ineligible) until the broker is back; once every replica answered without error the
   DeleteTopics operation runs through the driver and its RemoveTopicRecord removes the znodes.
4. The failpoint `controller.zk.ignore_session_loss` (tests of fencing) makes the registry call
   `act_as_zombie` on the new session: a full round with the old epoch, then the BrokerChange it
   missed, whose writes the /controller_epoch check refuses.

Log events: `brokers changed` (new, dead, bounced, event_s), `controller requests answered`
(trigger, since_s), `topics queued for deletion`, `topic deletion completed`, `controlled
shutdown processed`, `broker refused a controller request`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

from controller.broker_lifecycle import BrokerChange, LiveBroker
from controller.context import ControllerContext
from controller.operations import failed_response
from controller.ports import BrokerSender
from controller.propagation import (
    ControllerIdentity,
    plan_failover,
    plan_propagation,
    plan_topic_deletion,
)
from controller.service.channel import DEFAULT_REQUEST_TIMEOUT_S, ControllerChannelManager
from controller.service.driver import ControllerDriver
from controller.topic_deletion import TopicDeletionManager, liveness_change, stop_replica_answers
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
from protocol.metadata.leadership import Claim
from protocol.metadata.records import BrokerEndpoint

if TYPE_CHECKING:
    from controller.service.terms import ControllerService, Term

log = structlog.get_logger("controller.service.zk_mode")

RETRY_BACKOFF_S = 0.5
"""Wait before reading ZooKeeper again after a failed read (the connection is down)."""
IDLE_LOG_WITHIN_S = 600.0
"""How long the "controller requests answered" log waits for the brokers at most."""

Watch = Callable[[object], None]


class Registration(Protocol):
    """One /brokers/ids/<id> registration as the registry reads it."""

    broker_id: int
    epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    incarnation_id: str


class ZkRegistry(Protocol):
    """What ZkMode reads and writes in ZooKeeper (zkstore.leadership.ZkLeadership)."""

    after_ignored_session_loss: Callable[[], Awaitable[None]] | None

    async def read_brokers(self, watch: Watch) -> Sequence[Registration]:
        """The live registrations, leaving a children watch on /brokers/ids."""
        ...

    async def read_deletion_markers(self, watch: Watch) -> Sequence[str]:
        """The children of /admin/delete_topics, leaving a watch."""
        ...

    async def write_deletion_markers(
        self, *, create: Sequence[str] = (), delete: Sequence[str] = ()
    ) -> tuple[ErrorCode, str] | None:
        """Create / delete markers with the term's fenced writes; None when done, else the
        error to answer with (NOT_CONTROLLER once fenced: the term's writes are refused)."""
        ...


@dataclasses.dataclass
class _ZkTerm:
    """A ZK-mode term's soft state."""

    identity: ControllerIdentity
    channels: ControllerChannelManager
    deletions: TopicDeletionManager
    driver: ControllerDriver | None = None


class ZkMode:
    def __init__(
        self,
        registry: ZkRegistry,
        sender: BrokerSender,
        *,
        inter_broker_listener: str = "PLAINTEXT",
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        channel_retry_backoff_s: float = 0.1,
    ) -> None:
        self.registry = registry
        self.sender = sender
        self.inter_broker_listener = inter_broker_listener
        self.request_timeout_s = request_timeout_s
        self.channel_retry_backoff_s = channel_retry_backoff_s
        self._service: ControllerService | None = None

    def attach(self, service: ControllerService) -> None:
        self._service = service
        self.registry.after_ignored_session_loss = self._act_as_zombie

    @property
    def service(self) -> ControllerService:
        assert self._service is not None, "ZkMode.attach was not called"
        return self._service

    @property
    def delete_topic_enable(self) -> bool:
        return bool(self.service.ctx.config.delete_topic_enable)

    async def run(self, service: ControllerService, nursery: trio.Nursery) -> None:
        return None

    # -- activation -----------------------------------------------------------------------------

    def context(self, term: Term, ctx: ControllerContext, claim: Claim) -> ControllerContext:
        deletions = TopicDeletionManager()
        if self.delete_topic_enable and claim.image is not None:
            # Kafka's initializeTopicDeletion: resume what the previous controller queued.
            deletions.enqueue(claim.image, sorted(claim.topics_to_delete))
        channels = ControllerChannelManager(
            self.sender,
            listener=self.inter_broker_listener,
            request_timeout_s=self.request_timeout_s,
            retry_backoff_s=self.channel_retry_backoff_s,
            max_retry_backoff_s=max(1.0, self.channel_retry_backoff_s),
            on_response=lambda b, req, resp: self._on_response(term, b, req, resp),
        )
        identity = ControllerIdentity(self.service.node_id, term.epoch, self.inter_broker_listener)
        term.mode_state = _ZkTerm(identity, channels, deletions)
        # The deletion queue is this term's (not replayed state): operations read it through
        # the context when they run (the rebalance check skips those topics, as Kafka's).
        return dataclasses.replace(ctx, topics_queued_for_deletion=deletions.deleting_ids)

    def on_commit(self, term: Term) -> Callable[[MetadataImage, MetadataImage], None]:
        zk: _ZkTerm = term.mode_state

        def propagate(before: MetadataImage, after: MetadataImage) -> None:
            zk.channels.update_brokers(after)
            zk.channels.send_plan(
                plan_propagation(before, after, zk.identity, deleting=zk.deletions.deleting_ids())
            )
            zk.deletions.forget_removed(after)
            dead, started = liveness_change(_live_epochs(before), _live_epochs(after))
            if dead or started:
                zk.deletions.brokers_changed(dead, started)
            self._deletion_step(term, after)

        return propagate

    async def start(self, term: Term, driver: ControllerDriver, image: MetadataImage) -> None:
        zk: _ZkTerm = term.mode_state
        zk.driver = driver
        assert term.nursery is not None
        await term.nursery.start(zk.channels.run)
        zk.channels.update_brokers(image)
        zk.channels.send_plan(
            plan_failover(image, zk.identity, deleting=zk.deletions.deleting_ids())
        )

    def start_tasks(self, term: Term, driver: ControllerDriver) -> None:
        zk: _ZkTerm = term.mode_state
        assert term.nursery is not None
        self._deletion_step(term, driver.state.image)
        term.nursery.start_soon(self._log_when_idle, zk.channels, "failover", term.started)
        term.nursery.start_soon(self._watch_brokers, term, driver)
        term.nursery.start_soon(self._watch_deletions, term, driver)

    # -- requests -------------------------------------------------------------------------------

    async def submit(self, term: Term, driver: ControllerDriver, request: Any) -> Any:
        if isinstance(request, DeleteTopicsRequest):
            return await self._delete_topics(term, driver, request)
        response = await driver.submit(request)
        if isinstance(request, ControlledShutdownRequest):
            # Tests check that this comes before the broker change of the broker's exit.
            log.info(
                "controlled shutdown processed",
                broker_id=request.broker_id,
                error_code=response.error_code,
                remaining=len(response.remaining_partitions),
            )
        if isinstance(request, CreateTopicsRequest):
            response = _explain_marked_for_deletion(response, term.mode_state.deletions)
        return response

    # -- brokers coming and going ---------------------------------------------------------------

    async def _watch_brokers(self, term: Term, driver: ControllerDriver) -> None:
        await _watch(
            "/brokers/ids",
            lambda watch: self._broker_change(term, driver, watch),
            until=lambda: self.service.check_writes(term),
        )

    async def _broker_change(self, term: Term, driver: ControllerDriver, watch: Watch) -> None:
        brokers = await self._read_brokers(watch)
        submitted = trio.current_time()
        response = await driver.submit(BrokerChange(brokers))
        if response.error_code:
            log.warning(
                "broker change failed", error_code=response.error_code, error=response.error_message
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
            if term.nursery is not None:
                term.nursery.start_soon(
                    self._log_when_idle, term.mode_state.channels, "broker change", submitted
                )

    async def _read_brokers(self, watch: Watch) -> tuple[LiveBroker, ...]:
        return tuple(
            LiveBroker(
                broker_id=r.broker_id,
                epoch=r.epoch,
                endpoints=r.endpoints,
                rack=r.rack,
                incarnation_id=r.incarnation_id,
            )
            for r in await self.registry.read_brokers(watch)
        )

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

    # -- topic deletion (Kafka's TopicDeletionManager, ZK mode) ---------------------------------

    async def _delete_topics(
        self, term: Term, driver: ControllerDriver, request: DeleteTopicsRequest
    ) -> DeleteTopicsResponse:
        """Validate as the DeleteTopics operation does, then queue instead of removing: the
        marker znodes first (fenced), then the deletion starts. Already queued -> success
        again (Kafka swallows TopicAlreadyMarkedForDeletionException)."""
        zk: _ZkTerm = term.mode_state
        result = delete_topics(driver.state, request, self.service.ctx)
        image = driver.state.image
        names = [
            topic.name
            for r in result.records
            if (topic := image.topics.by_id.get(getattr(r, "topic_id", ""))) is not None
        ]
        to_mark = [n for n in names if not zk.deletions.is_queued(n)]
        if to_mark:
            problem = await self.registry.write_deletion_markers(create=to_mark)
            if problem is not None:
                self.service.check_writes(term)
                code, message = problem
                return failed_response(request, code, message)
        image = driver.state.image
        newly = zk.deletions.enqueue(image, to_mark)
        if newly:
            log.info("topics queued for deletion", topics=to_mark)
        self._deletion_step(term, image, newly)
        return result.response

    def _deletion_step(
        self, term: Term, image: MetadataImage, newly_queued: Sequence[str] = ()
    ) -> None:
        """resumeDeletions: send what it calls for, commit the topics it completes."""
        zk: _ZkTerm = term.mode_state
        if term.resigning:
            return
        step = zk.deletions.resume(image, _live_epochs(image).keys(), newly_queued)
        if step.stop_replicas or step.newly_queued:
            zk.channels.send_plan(
                plan_topic_deletion(
                    image,
                    zk.identity,
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
        if step.complete and term.nursery is not None:
            for topic_id in step.complete:
                topic = image.topics.by_id.get(topic_id)
                if topic is not None:
                    term.nursery.start_soon(self._complete_deletion, term, topic_id, topic.name)

    async def _complete_deletion(self, term: Term, topic_id: str, name: str) -> None:
        """Every replica is deleted: the DeleteTopics operation's RemoveTopicRecord removes the
        topic's znodes (and the marker) and the topic from the controller's state."""
        zk: _ZkTerm = term.mode_state
        driver = zk.driver
        if driver is None:
            return
        while True:
            topic = driver.state.image.topics.by_name.get(name)
            if topic is None or topic.topic_id != topic_id:
                zk.deletions.forget([topic_id])
                return
            response = await driver.submit(DeleteTopicsRequest(topic_names=(name,)))
            if self.service.check_writes(term):
                return
            code = response.responses[0].error_code if response.responses else 0
            if code == 0 and not response.error_code:
                log.info("topic deletion completed", topic=name, topic_id=topic_id)
                zk.deletions.forget([topic_id])
                return
            log.warning(
                "removing a deleted topic failed; retrying",
                topic=name,
                error_code=code or response.error_code,
            )
            await trio.sleep(RETRY_BACKOFF_S)

    async def _watch_deletions(self, term: Term, driver: ControllerDriver) -> None:
        """Kafka's TopicDeletionHandler: a children watch on /admin/delete_topics."""
        await _watch(
            "/admin/delete_topics",
            lambda watch: self._deletion_markers(term, driver, watch),
            until=lambda: term.resign_requested,
        )

    async def _deletion_markers(self, term: Term, driver: ControllerDriver, watch: Watch) -> None:
        zk: _ZkTerm = term.mode_state
        children = await self.registry.read_deletion_markers(watch)
        image = driver.state.image
        if self.delete_topic_enable:
            stale = sorted(c for c in children if c not in image.topics.by_name)
            wanted = sorted(c for c in children if c in image.topics.by_name)
        else:
            stale, wanted = sorted(children), []
        if stale:
            log.info(
                "removing deletion markers",
                topics=stale,
                reason="no such topic"
                if self.delete_topic_enable
                else "delete.topic.enable is false",
            )
            if await self.registry.write_deletion_markers(delete=stale) is not None:
                self.service.check_writes(term)
        newly = zk.deletions.enqueue(driver.state.image, wanted)
        if newly:
            log.info("topics queued for deletion", topics=wanted)
            self._deletion_step(term, driver.state.image, newly)

    async def reread_brokers(self) -> None:
        """A BrokerChange from /brokers/ids as it is now (the fast fencing revives a broker it
        fenced by mistake: its znode is still there, so it registers again)."""
        brokers = await self._read_brokers(lambda _e: None)
        response = await self.service.submit(BrokerChange(brokers))
        if response.error_code:
            log.warning("broker re-read failed", error=response.error_message)

    # -- failures -------------------------------------------------------------------------------

    async def _act_as_zombie(self, within_s: float = 10.0) -> None:
        """Failpoint `controller.zk.ignore_session_loss`: this controller's session expired and
        another was elected; act once more on the stale state, as a zombie whose event queue was
        not drained would: a full LeaderAndIsr/UpdateMetadata round with the old epoch (the
        brokers must refuse it: STALE_CONTROLLER_EPOCH), then the BrokerChange it missed (its
        writes must fail on the /controller_epoch version check, which makes it resign)."""
        term = self.service.term
        driver = self.service.driver
        if term is None or driver is None:
            return
        zk: _ZkTerm = term.mode_state
        log.warning("zombie controller acting on its stale state", epoch=term.epoch)
        zk.channels.send_plan(plan_failover(driver.state.image, zk.identity))
        with trio.move_on_after(within_s):
            await zk.channels.wait_idle()
        with trio.move_on_after(within_s):
            await driver.submit(BrokerChange(await self._read_brokers(lambda _e: None)))
        self.service.check_writes(term)

    def _on_response(
        self, term: Term, broker_id: int, request: Request, response: Response
    ) -> None:
        if isinstance(request, StopReplicaRequest) and isinstance(response, StopReplicaResponse):
            self._stop_replica_answered(term, broker_id, request, response)
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

    def _stop_replica_answered(
        self, term: Term, broker_id: int, request: StopReplicaRequest, response: StopReplicaResponse
    ) -> None:
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
            ((e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors),
        )
        zk: _ZkTerm = term.mode_state
        if answers and zk.driver is not None:
            zk.deletions.stop_replica_answered(broker_id, answers)
            self._deletion_step(term, zk.driver.state.image)


async def _watch(
    path: str, read: Callable[[Watch], Awaitable[None]], *, until: Callable[[], bool]
) -> None:
    """`read(watch)`, then again each time the watch fired (several firings meanwhile: one read
    covers them all), until `until()` after a read; a failed read is retried after
    RETRY_BACKOFF_S."""
    wake_send, wake_receive = trio.open_memory_channel[None](math.inf)

    def watch(_event: object) -> None:
        # Runs in the trio thread, possibly after the term ended.
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            wake_send.send_nowait(None)

    with wake_send, wake_receive:
        while True:
            try:
                await read(watch)
            except Exception as exc:
                log.warning(f"reading {path} failed; retrying", error=repr(exc))
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            if until():
                return
            await wake_receive.receive()
            while True:
                try:
                    wake_receive.receive_nowait()
                except trio.WouldBlock:
                    break


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
