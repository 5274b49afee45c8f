"""broker.controller_channel over each route (deploy.node.controller_routes), in virtual time:
NOT_CONTROLLER is retried until the controller answers or controller_wait_s passes, a refusal
naming the active controller sends the next attempt there at once, a controller that does not
answer becomes NOT_CONTROLLER, and a ZK-mode broker with no known controller waits for one."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from broker.controller_channel import ControllerChannel
from controller.operations import failed_response
from deploy.node.controller_routes import RaftControllerRoute, ZkControllerRoute
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.quorum_voters import Voter

REQUEST = CreateTopicsRequest(
    topics=(CreatableTopic(name="t", num_partitions=1, replication_factor=1),)
)
VOTERS = {n: Voter(node_id=n, host="127.0.0.1", port=9000 + n) for n in (1, 2, 3)}


@dataclass
class Controllers:
    """A transport in front of three controllers: `leader` answers, the others refuse naming
    it (when `name_leader`), nodes in `dead` do not answer."""

    leader: int
    name_leader: bool = True
    dead: set[int] = field(default_factory=set)
    asked: list[int] = field(default_factory=list)

    async def send(self, host: str, port: int, request: Any, *, timeout_s: float) -> Any:
        node = port - 9000
        self.asked.append(node)
        if node in self.dead:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "connection refused")
        if node == self.leader:
            return CreateTopicsResponse(topics=())
        message = f"the active controller is {self.leader}" if self.name_leader else "no leader"
        return failed_response(request, ErrorCode.NOT_CONTROLLER, message)


class FakeDriver:
    leader_id = -1


def raft_channel(controllers: Controllers, **kwargs: Any) -> ControllerChannel:
    route = RaftControllerRoute(FakeDriver(), VOTERS, random.Random(4))  # type: ignore[arg-type]
    return ControllerChannel(route, refuse=failed_response, transport=controllers, **kwargs)


async def test_a_refusal_naming_the_leader_is_followed_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controllers = Controllers(leader=2)
    channel = raft_channel(controllers)
    start = trio.current_time()
    response = await channel.submit(REQUEST)
    assert response.error_code == ErrorCode.NONE
    assert controllers.asked[-1] == 2 and len(controllers.asked) <= 2
    assert trio.current_time() - start <= channel.retry_backoff_s + 1e-9


async def test_without_a_lead_it_backs_off_and_gives_up_after_its_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controllers = Controllers(leader=7, name_leader=False)  # nobody answers
    channel = raft_channel(controllers, controller_wait_s=3.0, max_backoff_s=0.25)
    start = trio.current_time()
    response = await channel.submit(REQUEST)
    elapsed = trio.current_time() - start
    assert response.topics[0].error_code == ErrorCode.NOT_CONTROLLER
    assert 2.75 <= elapsed <= 3.0
    # 0.05, 0.1, 0.2, then 0.25 each: about a dozen attempts, not hundreds.
    assert 10 <= len(controllers.asked) <= 16


async def test_a_controller_that_does_not_answer_is_not_controller() -> None:
    controllers = Controllers(leader=1, dead={1})
    channel = raft_channel(controllers, controller_wait_s=0.0)
    channel.route.driver.leader_id = 1  # type: ignore[attr-defined]
    response = await channel.submit(REQUEST)
    assert response.topics[0].error_code == ErrorCode.NOT_CONTROLLER
    assert "controller 1 at 127.0.0.1:9001 did not answer" in response.topics[0].error_message


@dataclass
class ZkService:
    node_id: int = 1
    is_active: bool = False
    active_id: int | None = None

    async def submit(self, request: Any) -> Any:
        return CreateTopicsResponse(topics=())


async def test_zk_route_waits_for_an_election_then_forwards(
    autojump_clock: trio.testing.MockClock,
) -> None:
    service = ZkService()
    controllers = Controllers(leader=2)

    async def locate(broker_id: int) -> tuple[str, int] | None:
        return ("127.0.0.1", 9000 + broker_id)

    channel = ControllerChannel(
        ZkControllerRoute(service, locate), refuse=failed_response, transport=controllers
    )
    async with trio.open_nursery() as nursery:

        async def elect() -> None:
            await trio.sleep(1.0)
            service.active_id = 2

        nursery.start_soon(elect)
        response = await channel.submit(REQUEST)
    assert response.error_code == ErrorCode.NONE and controllers.asked == [2]


async def test_zk_route_submits_locally_while_active() -> None:
    service = ZkService(is_active=True, active_id=1)
    channel = ControllerChannel(
        ZkControllerRoute(service, None),
        refuse=failed_response,  # type: ignore[arg-type]
    )
    assert (await channel.submit(REQUEST)).error_code == ErrorCode.NONE


async def test_zk_route_gives_up_with_no_controller(
    autojump_clock: trio.testing.MockClock,
) -> None:
    channel = ControllerChannel(
        ZkControllerRoute(ZkService(), None),  # type: ignore[arg-type]
        refuse=failed_response,
        controller_wait_s=2.0,
    )
    response = await channel.submit(REQUEST)
    assert response.topics[0].error_code == ErrorCode.NOT_CONTROLLER
    assert response.topics[0].error_message == "no active controller"
