"""The Raft driver's transport to the quorum's voters (raft.driver.RaftTransport): node id ->
its `controller.quorum.voters` address, over a PooledTransport. Controllers use it to reach
each other; a Raft-mode broker's observer uses it to fetch from the leader."""

from __future__ import annotations

from collections.abc import Mapping

from deploy.node.transport import PooledTransport
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.quorum_voters import Voter


class VoterTransport:
    """raft.driver.RaftTransport over a PooledTransport: node id -> its voter address."""

    def __init__(self, voters: Mapping[int, Voter], pooled: PooledTransport) -> None:
        self.voters = dict(voters)
        self.pooled = pooled

    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        voter = self.voters.get(to_node)
        if voter is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"node {to_node} is not in controller.quorum.voters"
            )
        return await self.pooled.send(voter.host, voter.port, request, timeout_s=timeout_s)
