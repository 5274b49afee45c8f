"""Where a broker finds the active controller, one `broker.ports.ControllerRoute` per kind of
node; broker.controller_channel does the sending and the retrying for all of them.

- `LocalControllerRoute`: the controller runs in this process (a standalone broker's driver, a
  combined node's Raft controller).
- `ZkControllerRoute`: a ZK-mode broker; its own controller service while that is active,
  otherwise the broker ZooKeeper's /controller names, at its inter-broker listener.
- `RaftControllerRoute`: a Raft-mode broker; the quorum leader its metadata observer knows, else
  the one a refusal named, else any voter (which names the leader when it refuses).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from broker.controller_channel import ControllerChannel
from broker.ports import Local, Remote, Unknown
from controller.operations import failed_response
from protocol.messages import Request, Response
from protocol.quorum_voters import Voter
from raft.driver import RaftDriver

ControllerLocator = Callable[[int], Awaitable[tuple[str, int] | None]]
"""`await locate(broker_id) -> (host, port)` of that broker's inter-broker listener, or None."""


class LocalControllerRoute:
    def __init__(self, submit: Callable[[Request], Awaitable[Response]]) -> None:
        self._local = Local(submit)

    async def resolve(self, hint: int | None) -> Local | Remote | Unknown:
        return self._local

    def learned_new_leader(self, asked: int | None) -> bool:
        return False


class ZkControllerRoute:
    def __init__(self, service: Any, locate: ControllerLocator) -> None:
        self.service = service
        self.locate = locate

    async def resolve(self, hint: int | None) -> Local | Remote | Unknown:
        if self.service.is_active:
            return Local(self.service.submit)
        active = self.service.active_id
        if active is None or active < 0 or active == self.service.node_id:
            # None: an election is under way; ourselves: our term is starting or ending.
            return Unknown("no active controller")
        address = await self.locate(active)
        if address is None:
            return Unknown(f"the active controller {active} is not registered")
        return Remote(active, address[0], address[1], f"the active controller {active}")

    def learned_new_leader(self, asked: int | None) -> bool:
        # ZooKeeper's watch updates active_id; resolve() reads it on every attempt anyway.
        return False


class RaftControllerRoute:
    def __init__(
        self, driver: RaftDriver, voters: Mapping[int, Voter], rng: random.Random | None = None
    ) -> None:
        self.driver = driver
        self.voters = dict(voters)
        self._rng = rng or random.Random()

    def _known_leader(self) -> int:
        try:
            return self.driver.leader_id
        except RuntimeError:  # the driver is not running yet
            return -1

    async def resolve(self, hint: int | None) -> Local | Remote | Unknown:
        leader = self._known_leader()
        if leader in self.voters:
            target = leader
        elif hint is not None and hint in self.voters:
            target = hint
        else:
            target = self._rng.choice(sorted(self.voters))
        voter = self.voters[target]
        return Remote(target, voter.host, voter.port, f"controller {target}")

    def learned_new_leader(self, asked: int | None) -> bool:
        return self._known_leader() not in (-1, asked)


def local_controller_channel(
    submit: Callable[[Request], Awaitable[Response]], *, controller_wait_s: float = 30.0
) -> ControllerChannel:
    """The channel to the controller in this process. NOT_CONTROLLER comes only while its first
    term is starting (a combined node's sole voter has not committed its NoOp yet): retried
    quickly, for up to `controller_wait_s`."""
    return ControllerChannel(
        LocalControllerRoute(submit),
        refuse=failed_response,
        controller_wait_s=controller_wait_s,
        retry_backoff_s=0.01,
        max_backoff_s=0.5,
    )
