"""The idempotent producer on a single node, in the default combined mode and in standalone mode
(real processes): InitProducerId ids stay unique across restarts, and a retried batch is still
answered as a duplicate after a clean restart (producer snapshot) and after a SIGKILL (rebuilt
from the log). The cluster modes are in tests/integration/cluster/test_cluster_idempotence.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.record_batch import Record, build_batch
from tests.integration.broker.broker_wire import create_topic, produce
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient


def idem_batch(pid: int, seq: int) -> bytes:
    return build_batch(
        [Record(value=b"v%d" % seq, timestamp=1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )


async def new_ids(proc: BrokerProcess, n: int) -> list[int]:
    async with await WireClient.connect(proc.host, proc.port) as c:
        out = []
        for _ in range(n):
            response = await c.request(InitProducerIdRequest())
            assert response.error_code == 0, response
            out.append(response.producer_id)
        return out


async def base_offsets(proc: BrokerProcess, pid: int, seqs: range) -> list[tuple[int, int]]:
    async with await WireClient.connect(proc.host, proc.port) as c:
        out = []
        for seq in seqs:
            r = await produce(c, "idem", 0, idem_batch(pid, seq), acks=-1)
            out.append((r.error_code, r.base_offset))
        return out


@pytest.mark.parametrize("mode", ["raft", "standalone"])
async def test_ids_and_dedup_survive_restarts(broker_factory: Any, mode: str) -> None:
    proc = broker_factory({"metadata.mode": mode})
    ids = await new_ids(proc, 3)
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "idem", partitions=1)
    pid = ids[0]
    assert await base_offsets(proc, pid, range(3)) == [(0, 0), (0, 1), (0, 2)]

    await proc.arestart()  # clean: the state comes back from the .snapshot written at close
    snapshots = list((proc.log_dir / "idem-0").glob("*.snapshot"))
    assert snapshots, "no producer snapshot written at clean shutdown"
    assert await base_offsets(proc, pid, range(3)) == [(0, 0), (0, 1), (0, 2)]
    ids += await new_ids(proc, 2)

    await proc.akill()  # unclean: rebuilt from the log
    await proc.astart()
    assert await base_offsets(proc, pid, range(1, 4)) == [(0, 1), (0, 2), (0, 3)]
    async with await WireClient.connect(proc.host, proc.port) as c:
        r = await produce(c, "idem", 0, idem_batch(pid, 7), acks=-1)
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    ids += await new_ids(proc, 2)
    assert len(set(ids)) == len(ids), ids
