"""Fast fencing on the active controller: a broker whose connection ended is probed, and fenced
at once when controller.liveness finds it dead (broker.session.fast.fencing.enable).

    fencing = FastFencing(image=..., active=..., probe=..., fence=..., clock_ms=...)
    await nursery.start(fencing.run)
    fencing.heard(connection_id, broker_id, broker_epoch)   # Raft: a heartbeat came on it
    fencing.lost(connection_id)                               # Raft: that connection ended
    fencing.lost_address(host, port)                          # ZK: a broker ended our connection

`fence(broker_id, broker_epoch, lost_at_ms, evidence)` applies the fence through the
controller's single writer, which checks rule 4 (and 2 again) on the state it applies to; it
returns why it did not fence, or None (controller.dead_brokers.FenceDeadBroker, both modes).

ZK mode has no heartbeat to undo a mistaken fence, so `revive(broker_id, broker_epoch)` is given:
after a fence, the broker's listeners are probed every `REVIVAL_INTERVAL_S` for
`revival_window_s` (its ZooKeeper session); an answer naming the fenced epoch means it lives
(its znode too), and `revive` re-reads /brokers/ids, which registers it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
import trio

from controller.liveness import ROUND_INTERVAL_MS, ProbeResult, Verdict, judge
from controller.ports import ListenerProbe
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import BrokerEndpoint

log = structlog.get_logger("controller.fast_fencing")

Fence = Callable[[int, int, int, str], Awaitable[str | None]]
"""(broker id, broker epoch, lost at ms, evidence) -> None when fenced, else why not."""


class FastFencing:
    def __init__(
        self,
        *,
        image: Callable[[], MetadataImage],
        active: Callable[[], bool],
        probe: ListenerProbe,
        fence: Fence,
        clock_ms: Callable[[], int],
        revive: Callable[[int, int], Awaitable[None]] | None = None,
        revival_window_s: float = 0.0,
        resolve: Callable[[str], Awaitable[set[str]]] | None = None,
    ) -> None:
        self._image = image
        self._active = active
        self._probe = probe
        self._fence = fence
        self._clock_ms = clock_ms
        self._revive = revive
        self._revival_window_s = revival_window_s
        self._resolve = resolve if resolve is not None else _addresses_of
        self._carriers: dict[int, tuple[int, int, str]] = {}
        """Connection id -> (broker id, broker epoch, peer address) whose heartbeats came on it."""
        self._confirming: set[tuple[int, int]] = set()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def heard(self, connection_id: int, broker_id: int, broker_epoch: int, peer: str) -> None:
        """A heartbeat of `broker_epoch` came on `connection_id`, from `peer` (its address)."""
        self._carriers[connection_id] = (broker_id, broker_epoch, peer)

    def lost(self, connection_id: int) -> None:
        carried = self._carriers.pop(connection_id, None)
        if carried is not None:
            broker_id, broker_epoch, peer = carried
            self._start(broker_id, broker_epoch, peer, None)

    def lost_address(self, host: str, port: int) -> None:
        """A broker ended a connection to host:port: the registered broker listening there."""
        if not self._active():
            return
        for reg in self._image().cluster.brokers.values():
            if any(e.host == host and e.port == port for e in reg.endpoints):
                self._start(reg.broker_id, reg.epoch, host, port)
                return

    def _start(self, broker_id: int, broker_epoch: int, host: str, port: int | None) -> None:
        key = (broker_id, broker_epoch)
        if self._nursery is None or not self._active() or key in self._confirming:
            return
        self._confirming.add(key)
        lost_at_ms = self._clock_ms()
        self._nursery.start_soon(self._confirm, broker_id, broker_epoch, host, port, lost_at_ms)

    async def _own_listeners(
        self, endpoints: Sequence[BrokerEndpoint], host: str, port: int | None
    ) -> list[tuple[str, int]]:
        """The listeners the process itself owns, not a proxy or NAT in front of it: ZK mode
        the one its lost connection went to; Raft mode those at the address its heartbeats
        came from (an advertised address elsewhere may refuse while the broker lives)."""
        if port is not None:
            return [(host, port)]
        own = []
        for e in endpoints:
            if e.host == host or host in await self._resolve(e.host):
                own.append((e.host, e.port))
        return own

    async def _confirm(
        self, broker_id: int, broker_epoch: int, host: str, port: int | None, lost_at_ms: int
    ) -> None:
        try:
            reg = self._image().cluster.broker(broker_id)
            if reg is None or reg.epoch != broker_epoch or reg.fenced or reg.in_controlled_shutdown:
                return
            listeners = await self._own_listeners(reg.endpoints, host, port)
            rounds: list[list[ProbeResult]] = []
            while True:
                rounds.append([await self._probe.probe(host, port) for host, port in listeners])
                verdict, why = judge(rounds, broker_id, broker_epoch)
                if verdict is not Verdict.PROBE_AGAIN:
                    break
                await trio.sleep(ROUND_INTERVAL_MS / 1000)
            if verdict is Verdict.NOT_PROVEN:
                log.info(
                    "broker connection lost; not fenced early",
                    broker_id=broker_id,
                    broker_epoch=broker_epoch,
                    reason=why,
                )
                return
            decided_ms = self._clock_ms()
            not_fenced = await self._fence(broker_id, broker_epoch, lost_at_ms, why)
            if not_fenced is None:
                # Logged once the fence (and its re-elections) committed: fence_s of it was
                # the single writer's, the rest the probes'.
                log.info(
                    "broker fenced early",
                    broker_id=broker_id,
                    broker_epoch=broker_epoch,
                    evidence=why,
                    since_connection_lost_ms=self._clock_ms() - lost_at_ms,
                    fence_s=round((self._clock_ms() - decided_ms) / 1000, 3),
                )
                if self._revive is not None and self._nursery is not None:
                    self._nursery.start_soon(
                        self._watch_revival, broker_id, broker_epoch, listeners
                    )
            else:
                log.info(
                    "broker found dead but not fenced",
                    broker_id=broker_id,
                    broker_epoch=broker_epoch,
                    reason=not_fenced,
                )
        except Exception:
            log.exception("fast fencing failed", broker_id=broker_id)
        finally:
            self._confirming.discard((broker_id, broker_epoch))

    async def _watch_revival(
        self, broker_id: int, broker_epoch: int, listeners: list[tuple[str, int]]
    ) -> None:
        """ZK mode: a broker fenced by mistake answers with its epoch; revive it once."""
        assert self._revive is not None
        with trio.move_on_after(self._revival_window_s):
            while self._active() and broker_id not in self._image().cluster.brokers:
                for host, port in listeners:
                    result = await self._probe.probe(host, port)
                    if result.node_id == broker_id and result.broker_epoch == broker_epoch:
                        log.warning(
                            "broker fenced early is alive; registering it again",
                            broker_id=broker_id,
                            broker_epoch=broker_epoch,
                        )
                        await self._revive(broker_id, broker_epoch)
                        return
                await trio.sleep(REVIVAL_INTERVAL_S)


async def _addresses_of(host: str) -> set[str]:
    """The IP addresses `host` resolves to (empty when it does not)."""
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=trio.socket.SOCK_STREAM)
    except OSError:
        return set()
    return {str(info[4][0]) for info in infos}


REVIVAL_INTERVAL_S = 1.0

__all__ = ["REVIVAL_INTERVAL_S", "FastFencing", "Fence"]
