"""IncrementalAlterConfigs that turns unclean.leader.election.enable on for a topic: Kafka's
TopicUncleanLeaderElectionEnable event (ZK mode: processTopicUncleanLeaderElectionEnable ->
partitionStateMachine.triggerOnlinePartitionStateChange(topic)).

Without it, an offline partition of that topic would stay offline until the next BrokerChange
even though the admin just allowed an unclean election. So, in the same operation as the
ConfigRecords (which come first in the batch), every Offline partition of a topic whose value
goes from false to true gets an unclean election: the first live replica in assignment order
(an in-sync one when there is one), the ISR just that leader, RECOVERING. Partitions that find
no live replica stay Offline (a failed state change).
"""

from __future__ import annotations

from controller.configs import incremental_alter_configs, topic_config_value
from controller.context import ControllerContext
from controller.partition_change import Election, PartitionChangeBuilder
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import Liveness, PartitionState, StateChangeLog, partition_state
from protocol.config_defs import TOPIC_CONFIGS
from protocol.messages.configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ResourceType,
)
from protocol.metadata.records import ConfigRecord, MetadataRecord

KEY = "unclean.leader.election.enable"


def enables_unclean_election(request: object) -> bool:
    """True when an IncrementalAlterConfigs touches unclean.leader.election.enable of a topic
    (its event then counts as TopicUncleanLeaderElectionEnable, as Kafka's)."""
    return isinstance(request, IncrementalAlterConfigsRequest) and any(
        r.resource_type == ResourceType.TOPIC and any(c.name == KEY for c in r.configs)
        for r in request.resources
    )


def _turned_on(
    state: ControllerState, records: list[MetadataRecord], ctx: ControllerContext
) -> list[str]:
    """Topics whose unclean.leader.election.enable goes from false to true with `records`."""
    topics = []
    for record in records:
        if not isinstance(record, ConfigRecord) or record.name != KEY:
            continue
        topic = record.resource_name
        value = record.value if record.value is not None else ctx.config.topic_defaults.get(KEY)
        after = TOPIC_CONFIGS[KEY].default if value is None else TOPIC_CONFIGS[KEY].parse(value)
        if after and not topic_config_value(state, topic, KEY, ctx):
            topics.append(topic)
    return topics


def alter_configs_and_elect(
    state: ControllerState, request: IncrementalAlterConfigsRequest, ctx: ControllerContext
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    result = incremental_alter_configs(state, request, ctx)
    records = list(result.records)
    turned_on = _turned_on(state, records, ctx)
    if not turned_on:
        return result
    live = Liveness.from_image(state.image)
    sm = StateChangeLog()
    for name in sorted(turned_on):
        topic = state.topic(name)
        if topic is None:
            continue
        for pid in sorted(topic.partitions):
            part = topic.partitions[pid]
            current = partition_state(part, live)
            if current is not PartitionState.OFFLINE:
                continue
            record = (
                PartitionChangeBuilder(part, topic.topic_id, pid, live.is_live)
                .set_election(Election.UNCLEAN)
                .build()
            )
            after = part if record is None else part.merge(record)
            sm.partition(name, pid, current, PartitionState.ONLINE, partition_state(after, live))
            if record is not None:
                records.append(record)
    return ControllerResult(records=records, response=result.response, state_changes=sm.changes)
