"""ControllerState's broker -> partitions index (KRaft's BrokersToIsrs): a broker's fencing,
shutdown or unregistration looks up the partitions it is in instead of walking every partition
of the cluster. Whatever is replayed (committed, pending, reverted; topics created, changed,
deleted and recreated in one batch), the index answers what a walk of the image would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.state import ControllerState
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

BROKERS = (1, 2, 3, 4)
NAMES = ("a", "b", "c")
replica_sets = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)


def walked(state: ControllerState, brokers: set[int]) -> list[tuple[str, int]]:
    return sorted(
        (name, pid)
        for name, topic in state.image.topics.by_name.items()
        for pid, p in topic.partitions.items()
        if brokers & {*p.replicas, *p.isr, p.leader}
    )


def leaderless(state: ControllerState) -> list[tuple[str, int]]:
    return sorted(
        (name, pid)
        for name, topic in state.image.topics.by_name.items()
        for pid, p in topic.partitions.items()
        if p.leader == NO_LEADER
    )


@st.composite
def batches(draw: st.DrawFn) -> list[list[MetadataRecord]]:
    """Batches of records that replay: topics created (ids fresh), partitions changed, topics
    removed, in any order."""
    live: dict[str, tuple[str, int]] = {}  # name -> (topic id, partitions)
    out = []
    serial = 0
    for _ in range(draw(st.integers(1, 6))):
        batch: list[MetadataRecord] = []
        for _ in range(draw(st.integers(1, 5))):
            name = draw(st.sampled_from(NAMES))
            if name not in live:
                serial += 1
                topic_id = f"topic-id-{serial:013d}"
                n = draw(st.integers(1, 3))
                batch.append(TopicRecord(name=name, topic_id=topic_id))
                for pid in range(n):
                    replicas = tuple(draw(replica_sets))
                    leader = draw(st.sampled_from((NO_LEADER, replicas[0])))
                    batch.append(
                        PartitionRecord(
                            partition_id=pid, topic_id=topic_id, replicas=replicas,
                            isr=replicas, leader=leader,
                        )
                    )  # fmt: skip
                live[name] = (topic_id, n)
            elif draw(st.booleans()):
                topic_id, n = live[name]
                replicas = tuple(draw(replica_sets))
                batch.append(
                    PartitionChangeRecord(
                        partition_id=draw(st.integers(0, n - 1)),
                        topic_id=topic_id,
                        replicas=replicas,
                        isr=replicas[:1],
                        leader=draw(st.sampled_from((NO_LEADER, NO_LEADER_CHANGE, replicas[0]))),
                    )
                )
            else:
                batch.append(RemoveTopicRecord(topic_id=live.pop(name)[0]))
        out.append(batch)
    return out


@settings(max_examples=200, deadline=None)
@given(batches(), st.lists(st.booleans(), min_size=6, max_size=6))
def test_the_index_answers_what_a_walk_of_the_image_would(
    records: list[list[MetadataRecord]], pending: list[bool]
) -> None:
    state = ControllerState(MetadataImage.empty("c"))
    for batch, as_pending in zip(records, pending, strict=False):
        last = state.next_offset + len(batch) - 1
        if as_pending:
            state.replay_pending(batch, last)
        else:
            state.replay_appended(batch, last)
        for brokers in ({1}, {2, 3}, set(BROKERS)):
            assert state.partitions_of_brokers(brokers) == walked(state, brokers)
        assert state.leaderless_partitions() == leaderless(state)
    state.revert()
    assert state.partitions_of_brokers(BROKERS) == walked(state, set(BROKERS))
    assert state.leaderless_partitions() == leaderless(state)
    # A state built from an image indexes it as a replay would have.
    rebuilt = ControllerState(state.image)
    assert rebuilt.partitions_of_brokers(BROKERS) == state.partitions_of_brokers(BROKERS)
