"""Random operation sequences: the replayed state stays consistent and replay is deterministic."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.operations import run_operation
from controller.state import ControllerState
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import RegisterBrokerRecord, TopicRecord, UnfenceBrokerRecord
from protocol.metadata.topic_ids import random_uuid

NAMES = ["a", "b", "a.b", "a_b", "c-1"]

_create = st.builds(
    lambda names, parts, rf, retention: CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=n,
                num_partitions=parts,
                replication_factor=rf,
                configs=(CreatableTopicConfig(name="retention.ms", value=retention),)
                if retention
                else (),
            )
            for n in names
        )
    ),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
    st.sampled_from([-1, 0, 1, 3]),
    st.sampled_from([-1, 1, 2, 4]),
    st.sampled_from([None, "5", "x"]),
)
_delete = st.builds(
    lambda names: DeleteTopicsRequest(topic_names=tuple(names)),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=2),
)
_alter = st.builds(
    lambda name, op, value: IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=(AlterableConfig(name="retention.ms", config_operation=op, value=value),),
            ),
        )
    ),
    st.sampled_from(NAMES),
    st.sampled_from([0, 1, 2]),
    st.sampled_from(["7", None, "-5"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_create, _delete, _alter), max_size=25), st.integers(0, 1000))
def test_random_operations_keep_state_consistent(requests: list[object], seed: int) -> None:
    rng = random.Random(seed)
    ctx = ControllerContext(
        config=ControllerConfig(), rng=rng, new_topic_id=lambda: random_uuid(rng.randbytes)
    )
    state = ControllerState()
    log: list = []
    for broker_id in (1, 2, 3):
        log += [
            RegisterBrokerRecord(
                broker_id=broker_id, incarnation_id="AAAAAAAAAAAAAAAAAAAAAg", broker_epoch=len(log)
            ),
            UnfenceBrokerRecord(id=broker_id, epoch=len(log)),
        ]
    state.replay(enumerate(log))
    seen_ids: set[str] = set()
    for request in requests:
        result = run_operation(state, request, ctx)
        if result.records:
            state.replay_appended(result.records, len(log) + len(result.records) - 1)
            log += result.records
        for record in result.records:
            if isinstance(record, TopicRecord):
                assert record.topic_id not in seen_ids  # ids are never reused
                seen_ids.add(record.topic_id)
        image = state.image
        assert {t.name: t for t in image.topics.by_id.values()} == dict(image.topics.by_name)
        unified = [n.replace(".", "_") for n in image.topics.by_name]
        assert len(unified) == len(set(unified))  # no '.'/'_' collisions ever got created
        for topic in image.topics.by_id.values():
            assert sorted(topic.partitions) == list(range(len(topic.partitions)))
            for part in topic.partitions.values():
                assert part.leader == part.replicas[0] and set(part.isr) == set(part.replicas)
                assert len(set(part.replicas)) == len(part.replicas) <= 3
        for resource in image.configs.resources:
            assert resource.name in image.topics.by_name
    # Replaying the whole log in one delta gives the same picture as step by step.
    whole = MetadataDelta(MetadataImage.empty())
    for offset, record in enumerate(log):
        whole.replay(record, offset=offset)
    assert whole.apply() == state.image
