"""The checker shown able to fail on real runs.

(a) Forced lost writes: unclean.leader.election.enable=true and min.insync.replicas=1 on the
topic; the nemesis `unclean-kill` SIGSTOPs a partition leader's followers until the ISR is the
leader alone (waited on), lets it acknowledge writes alone, SIGKILLs it, resumes the followers:
an unclean election makes one of them leader without those writes, and the old leader
truncates when it comes back. No consumer reads during the run (a live reader would have read
the doomed records from the old leader: the loss then shows as inconsistent offsets instead),
so the final reads find acknowledged offsets below their end that hold other values.

(b) Idempotence off and the brokers' proxies swallowing 30% of produce responses: the producer
retries writes that happened, and the checker reports duplicates (nothing is lost).
"""

from __future__ import annotations

import pytest

from deploy.chaos.run import RunConfig
from tests.chaos.conftest import ChaosRun

pytestmark = pytest.mark.slow

UNCLEAN = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}


@pytest.mark.parametrize("mode", ["raft", "zk"])
async def test_unclean_election_loses_acknowledged_writes(chaos_run: ChaosRun, mode: str) -> None:
    result = await chaos_run(
        RunConfig(
            mode=mode,
            nemeses=("unclean-kill",),
            time_limit_s=25,
            seed=0,
            rate=100,
            readers=0,
            group_members=0,
            topic_configs=UNCLEAN,
        )
    )
    assert result.exit_code == 1, result.summary
    counts = result.verdict["counts"]
    assert counts["lost-write"] > 0, result.summary
    assert counts["inconsistent-offsets"] > 0, result.summary
    verified = result.verdict["run"]["faults"]["verified"]
    assert verified.get("isr-shrunk-to-leader", 0) >= 1, verified
    assert verified.get("acked-by-leader-alone", 0) >= 1, verified
    assert verified.get("unclean-election", 0) >= 1, verified


async def test_dropped_produce_responses_without_idempotence_duplicate(
    chaos_run: ChaosRun,
) -> None:
    result = await chaos_run(
        RunConfig(
            mode="raft",
            nemeses=(),
            time_limit_s=10,
            seed=6,
            rate=100,
            idempotence=False,
            drop_produce_responses=0.3,
        )
    )
    assert result.exit_code == 1, result.summary
    counts = result.verdict["counts"]
    assert counts["duplicate"] > 0, result.summary
    assert counts["lost-write"] == 0, result.summary
    dropped = sum(p["responses_dropped"] for p in result.verdict["run"]["proxies"].values())
    assert dropped > 0, result.verdict["run"]["proxies"]
