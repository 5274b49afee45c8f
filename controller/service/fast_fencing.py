"""Fast fencing on the active controller: a broker whose connection ended is probed, and fenced
at once when controller.liveness finds it dead (broker.session.fast.fencing.enable).

    fencing = FastFencing(service, probe, fence=..., clock_ms=...)
    await nursery.start(fencing.run)
    fencing.heard(connection_id, broker_id, broker_epoch)   # a heartbeat came on it
    fencing.lost(connection_id)                               # that connection ended

`fence(broker_id, broker_epoch, lost_at_ms, evidence)` applies the fence through the
controller's single writer, which checks rule 4 (and 2 again) on the state it applies to; it
returns why it did not fence, or None. Each mode wires its own: Raft mode submits
`FenceDeadBroker`, ZK mode the broker's failure as its BrokerChange would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
import trio

from controller.liveness import ROUND_INTERVAL_MS, ProbeResult, Verdict, judge
from controller.ports import ListenerProbe
from protocol.metadata.image import MetadataImage

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
    ) -> None:
        self._image = image
        self._active = active
        self._probe = probe
        self._fence = fence
        self._clock_ms = clock_ms
        self._carriers: dict[int, tuple[int, int]] = {}
        """Connection id -> (broker id, broker epoch) whose heartbeats came on it."""
        self._confirming: set[tuple[int, int]] = set()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def heard(self, connection_id: int, broker_id: int, broker_epoch: int) -> None:
        self._carriers[connection_id] = (broker_id, broker_epoch)

    def lost(self, connection_id: int) -> None:
        carried = self._carriers.pop(connection_id, None)
        if carried is None or self._nursery is None or not self._active():
            return
        if carried in self._confirming:
            return
        self._confirming.add(carried)
        self._nursery.start_soon(self._confirm, *carried, self._clock_ms())

    async def _confirm(self, broker_id: int, broker_epoch: int, lost_at_ms: int) -> None:
        try:
            reg = self._image().cluster.broker(broker_id)
            if reg is None or reg.epoch != broker_epoch or reg.fenced or reg.in_controlled_shutdown:
                return
            listeners = [(e.host, e.port) for e in reg.endpoints]
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
            not_fenced = await self._fence(broker_id, broker_epoch, lost_at_ms, why)
            if not_fenced is None:
                log.info(
                    "broker fenced early",
                    broker_id=broker_id,
                    broker_epoch=broker_epoch,
                    evidence=why,
                    since_connection_lost_ms=self._clock_ms() - lost_at_ms,
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


__all__ = ["FastFencing", "Fence"]
