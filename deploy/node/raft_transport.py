"""The Raft driver's transport to the quorum's voters (raft.driver.RaftTransport): node id ->
its `controller.quorum.voters` address, over a PooledTransport. Controllers use it to reach
each other; a Raft-mode broker's observer uses it to fetch from the leader."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from deploy.node.failpoints import Failpoints
from deploy.node.transport import PooledTransport
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.quorum_voters import Voter


class VoterTransport:
    """raft.driver.RaftTransport over a PooledTransport: node id -> its voter address."""

    def __init__(
        self,
        voters: Mapping[int, Voter],
        pooled: PooledTransport,
        failpoints: Failpoints | None = None,
    ) -> None:
        self.voters = dict(voters)
        self.pooled = pooled
        self._hold = failpoints
        """Failpoint `broker.metadata.hold_first_fetch`, evaluated at the first send only."""

    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        if self._hold is not None:
            failpoints, self._hold = self._hold, None
            seconds = failpoints.eval("broker.metadata.hold_first_fetch")
            if seconds is not None:
                await trio.sleep(5 if seconds is True else float(seconds))
        voter = self.voters.get(to_node)
        if voter is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"node {to_node} is not in controller.quorum.voters"
            )
        return await self.pooled.send(voter.host, voter.port, request, timeout_s=timeout_s)
