"""Raft cluster (3 controller processes, 3 brokers), real processes:

- once `deploy.cluster.status.wait_until_ready` (what `trioka cluster up` waits for) says the
  cluster is ready, the active controller places RF=3 at once. Before the fix a broker not yet
  unfenced listed itself in its own Metadata answer, so readiness counted it while the
  controller did not ("only 2 broker(s) are registered", ~1 start in 4);
- every forwarded admin API with nothing to wait for answers promptly through a broker that
  forwards to the controller quorum (tests/integration/forwarded_answers.py).
"""

from __future__ import annotations

import trio

from client import Admin
from client.admin import NewTopic
from deploy.cluster.status import wait_until_ready
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.integration.forwarded_answers import ANSWER_WITHIN_S, check_forwarded_answers


async def test_ready_means_the_controller_places_rf3(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, start=False)
    # start() returns once every process answers ApiVersions, before registration settles.
    await cluster.astart()
    await wait_until_ready(
        cluster.bootstrap, 3, within=60, controller_bootstrap=cluster.controller_bootstrap
    )
    async with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        with trio.fail_after(ANSWER_WITHIN_S):
            (created,) = await admin.create_topics([NewTopic("rf3", 1, 3)])
    assert created.replication_factor == 3


async def test_forwarded_apis_with_nothing_to_wait_for_answer_at_once(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3)
    await cluster.wait_ready()
    await check_forwarded_answers(cluster.brokers[1].bootstrap, replication_factor=3)
