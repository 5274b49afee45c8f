"""Fast fencing: when may the controller fence a broker before its session ends? (pure)

A process that dies (SIGKILL, crash, OOM) has its sockets closed by the kernel: the connection
its heartbeats came on ends at once, and its listeners refuse new connections. A process that
is alive but silent (SIGSTOP, a long pause, a partition, a slow disk) keeps both: the connection
stays open (nothing ends it), a connect to its listener is accepted by the kernel (SIGSTOP) or
not answered at all (DROP), never refused. The rule, for incarnation E (broker epoch) of B:

1. a connection that carried E's heartbeats ended, and B was not in controlled shutdown;
2. nothing from E arrived since (checked again when the fence applies);
3. `ROUNDS` rounds of connects, `ROUND_INTERVAL_MS` apart, to every listener B registered that
   the process owns itself (controller.service.fast_fencing: Raft mode, those at the address
   its heartbeats came from; ZK mode, the one the lost connection went to: an advertised
   address elsewhere, a published port or a proxy, may refuse while the broker lives):
   - every connect refused (ECONNREFUSED) in the last `ROUNDS` rounds: nothing listens there;
     E is dead;
   - a connection reset before it answered (a dying process's listen socket accepts into its
     backlog until the kernel closes it, then resets) proves nothing either way: probe again,
     at most `MAX_ROUNDS` rounds in all;
   - an answer to the identity probe (ApiVersions names node id and broker epoch) naming B
     with another epoch proves E dead at once (B was restarted in place);
   - anything else stops the early fence and leaves B its whole session: a timeout or an
     unreachable host (a partition), a local error, a connection that does not answer the
     probe (paused, or a fault proxy), an answer naming E (alive) or another node;
4. E is still B's epoch, unfenced, when the fence applies (the single writer checks it).

Why it is safe: a live broker process owns its listeners for its whole life (a broker that
loses one exits), so its listeners refuse connections only when the process is gone, or when
a firewall REJECT rule forges the refusal. That one case is documented as a known early fence:
the broker's next heartbeat unfences it (Raft mode), as after any fencing; it is never a
split brain, because fencing only takes leadership and ISR membership away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

ROUNDS = 2
ROUND_INTERVAL_MS = 200
"""Two rounds at least 200 ms apart: a listener being re-bound (a restart in place) has time to
answer, and one lost SYN-ACK does not decide."""
MAX_ROUNDS = 5
"""Resets get this many rounds in all before the broker is left its session."""


class Probe(Enum):
    REFUSED = "refused"
    """ECONNREFUSED: nothing listens on that port (or a REJECT rule says so)."""
    ANSWERED = "answered"
    """The identity probe was answered (node id and broker epoch in `ProbeResult`)."""
    RESET = "reset"
    """Accepted, then reset or closed before answering: a dying process's listen socket, or a
    live one behind something that resets (probe again, never counts as dead)."""
    NO_ANSWER = "no answer"
    """Connected, but the identity probe got no well-formed answer in time."""
    TIMEOUT = "timeout"
    """The connect itself did not complete in time (dropped packets, a paused host)."""
    UNREACHABLE = "unreachable"
    """EHOSTUNREACH / ENETUNREACH: the network cannot say."""
    ERROR = "error"
    """A local error (no descriptor, no route to resolve): nothing learnt."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    outcome: Probe
    node_id: int = -1
    broker_epoch: int = -1
    detail: str = ""

    def __str__(self) -> str:
        if self.outcome is Probe.ANSWERED:
            return f"answered as broker {self.node_id} epoch {self.broker_epoch}"
        return self.outcome.value + (f" ({self.detail})" if self.detail else "")


class Verdict(Enum):
    DEAD = "dead"
    """Fence it now."""
    PROBE_AGAIN = "probe again"
    """Refused so far: another round after ROUND_INTERVAL_MS."""
    NOT_PROVEN = "not proven"
    """Alive, or cannot tell: it keeps its whole session."""


def judge(
    rounds: Sequence[Sequence[ProbeResult]], broker_id: int, broker_epoch: int
) -> tuple[Verdict, str]:
    """The verdict on incarnation `broker_epoch` of `broker_id` after `rounds` of probes (one
    result per registered listener each), and why."""
    if not rounds or any(not results for results in rounds):
        return Verdict.NOT_PROVEN, "no listener to probe"
    seen = [result for results in rounds for result in results]
    for result in seen:
        if _another_incarnation(result, broker_id, broker_epoch):
            return Verdict.DEAD, f"its listener {result}: a new incarnation"
    for result in seen:
        if result.outcome not in (Probe.REFUSED, Probe.RESET):
            return Verdict.NOT_PROVEN, f"a listener {result}"
    last = rounds[-ROUNDS:]
    if len(last) == ROUNDS and all(r.outcome is Probe.REFUSED for rs in last for r in rs):
        return Verdict.DEAD, f"every listener refused connections {ROUNDS} times"
    if len(rounds) < MAX_ROUNDS:
        return Verdict.PROBE_AGAIN, "refused or reset so far"
    reset = next(r for r in seen if r.outcome is Probe.RESET)
    return Verdict.NOT_PROVEN, f"a listener {reset} {len(rounds)} times"


def _another_incarnation(result: ProbeResult, broker_id: int, broker_epoch: int) -> bool:
    """An answer from the same broker id with another known epoch: a process that is not E."""
    return (
        result.outcome is Probe.ANSWERED
        and result.node_id == broker_id
        and result.broker_epoch >= 0
        and result.broker_epoch != broker_epoch
    )


__all__ = ["MAX_ROUNDS", "ROUNDS", "ROUND_INTERVAL_MS", "Probe", "ProbeResult", "Verdict", "judge"]
