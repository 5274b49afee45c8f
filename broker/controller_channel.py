"""The one broker-to-controller channel (Kafka's NodeToControllerChannelManager and
ForwardingManager): every request a broker sends to the active controller goes through it,
whatever the metadata mode.

    channel = ControllerChannel(route, refuse=failed_response, timeout_s=30, controller_wait_s=10)
    response = await channel.submit(request)

A `ControllerRoute` (broker.ports) says where the controller is: in this process (a `Local`
submit function), at a `Remote` address, or `Unknown` while an election is under way. The
channel asks it, sends, and while the answer is NOT_CONTROLLER (or the controller does not
answer, which it turns into NOT_CONTROLLER) it retries with a growing backoff for up to
`controller_wait_s`, then hands the last NOT_CONTROLLER to the caller, who retries later (Kafka's
channel manager also queues until a controller is known). A refusal that names the active
controller ("... active controller is N", the Raft controllers' message) is a fresh lead: it is
tried after the base backoff, as is a leader the route learned meanwhile, so that a new
controller is found within a fraction of a second.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import structlog
import trio

from broker.ports import ControllerRoute, Local, Remote, Transport, Unknown
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response

log = structlog.get_logger("broker.controller_channel")

_LEADER_IN_MESSAGE = re.compile(r"active controller is (\d+)")

Refuse = Callable[[Request, ErrorCode, str], Response]
"""Builds the response to a request that failed as a whole (the error on every item it names)."""


class ControllerChannel:
    """Sends requests to the active controller, retrying NOT_CONTROLLER (see the module doc)."""

    def __init__(
        self,
        route: ControllerRoute,
        *,
        refuse: Refuse,
        transport: Transport | None = None,
        timeout_s: float = 30.0,
        controller_wait_s: float = 10.0,
        retry_backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
    ) -> None:
        self.route = route
        self.refuse = refuse
        self.transport = transport
        self.timeout_s = timeout_s
        self.controller_wait_s = controller_wait_s
        self.retry_backoff_s = retry_backoff_s
        self.max_backoff_s = max_backoff_s

    async def submit(self, request: Request) -> Response:
        deadline = trio.current_time() + self.controller_wait_s
        backoff = self.retry_backoff_s
        hint: int | None = None
        while True:
            target = await self.route.resolve(hint)
            response = await self._submit_once(target, request)
            if getattr(response, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                return response
            hint = self._leader_named(response, target)
            fresh = hint is not None or self.route.learned_new_leader(_node_of(target))
            wait = self.retry_backoff_s if fresh else backoff
            if trio.current_time() + wait > deadline:
                return response
            await trio.sleep(wait)
            if not fresh:
                backoff = min(backoff * 2, self.max_backoff_s)

    async def _submit_once(self, target: Local | Remote | Unknown, request: Request) -> Response:
        if isinstance(target, Local):
            return await target.submit(request)
        if isinstance(target, Unknown):
            return self.refuse(request, ErrorCode.NOT_CONTROLLER, target.reason)
        assert self.transport is not None, "a remote controller needs a transport"
        try:
            response: Response = await self.transport.send(
                target.host, target.port, request, timeout_s=self.timeout_s
            )
        except (KafkaError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            # The controller went away meanwhile: the next attempt finds the next one.
            log.info("controller request failed", controller=target.node_id, error=str(exc))
            return self.refuse(
                request,
                ErrorCode.NOT_CONTROLLER,
                f"{target.description} at {target.host}:{target.port} did not answer: {exc}",
            )
        return response

    @staticmethod
    def _leader_named(response: Response, target: Local | Remote | Unknown) -> int | None:
        """The controller a refusal names, unless it names the node that refused."""
        named = _LEADER_IN_MESSAGE.search(getattr(response, "error_message", None) or "")
        hint = int(named.group(1)) if named else None
        return None if hint == _node_of(target) else hint


def _node_of(target: Local | Remote | Unknown) -> int | None:
    return target.node_id if isinstance(target, Remote) else None
