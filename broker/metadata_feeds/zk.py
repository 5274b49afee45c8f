"""ZK mode's metadata feed: the controller's LeaderAndIsr, StopReplica and UpdateMetadata
requests (broker.leader_and_isr applies them through broker.partition_changes), topic configs,
SCRAM credentials and ACLs read from ZooKeeper by deploy.node (`set_topic_configs`,
`set_scram_credentials`, `set_resource_acls`), and Kafka's ControlledShutdown request on a
graceful shutdown (broker.controlled_shutdown)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import structlog
import trio

from broker.controlled_shutdown import ControlledShutdownPolicy, controlled_shutdown
from broker.handlers.inter_broker import InterBrokerHandler
from broker.handlers.router import Handler
from broker.leader_and_isr import ControllerRequestHandler
from broker.metadata_cache import with_resource_acls, with_scram_credentials, with_topic_configs
from broker.partition_changes import applier_for
from broker.ports import BrokerCore
from protocol.acls import AclBinding, PatternType, ResourceType
from protocol.messages import ApiKey
from protocol.scram import ScramCredential

log = structlog.get_logger("broker")


class ZkMetadataFeed:
    self_listed_once_unfenced = False

    def __init__(self) -> None:
        self._core: BrokerCore | None = None
        self._requests: ControllerRequestHandler | None = None

    @property
    def core(self) -> BrokerCore:
        assert self._core is not None, "not attached to a broker"
        return self._core

    @property
    def requests(self) -> ControllerRequestHandler:
        """The controller's requests, applied (set by `attach`)."""
        assert self._requests is not None, "not attached to a broker"
        return self._requests

    def attach(self, core: BrokerCore) -> None:
        self._core = core
        self._requests = ControllerRequestHandler(
            node_id=core.config.node_id,
            partitions=core.partitions,
            publisher=core.publisher,
            applier=applier_for(core),
            broker_epoch=core.broker_epoch,
        )

    def handlers(self, relay: Handler) -> Mapping[ApiKey, Handler]:
        return InterBrokerHandler(self.requests, relay).handlers()

    async def start(self, nursery: trio.Nursery) -> None:
        """Nothing to follow: the controller sends its requests."""

    def forward_barrier(self) -> int | None:
        return None  # the controller answers once ZooKeeper has the change, before the brokers

    def controller_id(self) -> int:
        """The last controller that sent LeaderAndIsr or UpdateMetadata (-1 before any)."""
        return self.requests.controller_id

    def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """A topic's dynamic configs as stored in the cluster (`/config/topics/<t>`, read by the
        wiring on a `/config/changes` notification); the live logs take them and
        DescribeConfigs shows them. Empty removes them. Values are Kafka's strings."""
        publisher = self.core.publisher
        publisher.replace_image(with_topic_configs(publisher.image, topic, configs))

    def set_scram_credentials(self, user: str, credentials: Mapping[int, ScramCredential]) -> None:
        """A user's SCRAM credentials as stored in the cluster (`/config/users/<user>`, read by
        the wiring at start and on a `/config/changes` notification), mechanism id ->
        credential: DescribeUserScramCredentials answers from them, and a forwarded
        AlterUserScramCredentials waits for them. Empty removes the user."""
        publisher = self.core.publisher
        publisher.replace_image(with_scram_credentials(publisher.image, user, credentials))

    def set_resource_acls(
        self,
        resource_type: ResourceType,
        pattern_type: PatternType,
        name: str,
        bindings: Iterable[AclBinding],
    ) -> None:
        """One resource pattern's ACLs as stored in the cluster (its /kafka-acl or
        /kafka-acl-extended znode, read by the wiring at start and on an ACL change
        notification): DescribeAcls answers from them, and a forwarded CreateAcls or DeleteAcls
        waits for them. Empty removes the pattern's ACLs."""
        publisher = self.core.publisher
        publisher.replace_image(
            with_resource_acls(publisher.image, resource_type, pattern_type, name, bindings)
        )

    async def controlled_shutdown(self) -> None:
        await self.request_controlled_shutdown()

    async def request_controlled_shutdown(self) -> bool | None:
        """Kafka's controlledShutdown (broker.controlled_shutdown): True once the controller
        says no partition is led here, False when every attempt failed (the broker shuts down
        anyway), None when controlled.shutdown.enable is false.

        Failpoint `broker.shutdown.pause_after_controlled_shutdown` (`return(S)`): after a
        success, wait S seconds before going on, so that a test sees the leaders moved while
        this process and its ZooKeeper session are still up (the session closes only after
        the broker stopped): proof that the controlled path, not BrokerChange, moved them."""
        core = self.core
        done = await controlled_shutdown(
            core.controller,
            core.config.node_id,
            core.broker_epoch,
            ControlledShutdownPolicy.from_broker_config(core.config),
        )
        failpoints = core.failpoints
        hold = (
            None
            if failpoints is None
            else failpoints.eval("broker.shutdown.pause_after_controlled_shutdown")
        )
        if done and hold is not None:
            hold_s = float(hold) if isinstance(hold, int | float) and hold is not True else 10.0
            log.warning(
                "failpoint: holding the broker after its controlled shutdown", hold_s=hold_s
            )
            await trio.sleep(hold_s)
        return done
