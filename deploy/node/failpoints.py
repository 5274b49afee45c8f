"""Failpoints: named places in the code that a test switches on by environment variable, so that
a race-dependent scenario happens on every run (as etcd's gofail and FreeBSD's fail(9)).

Off by default. One registry per process: the composition root (deploy.node.broker and
deploy.node.controller `start`) builds it from the process's environment when the process
starts (`Failpoints.from_environ`; a bad spec is a one-line startup error), seeding its Random
from `TRIOKA_FAILPOINTS_SEED` when given, and hands it to the components that hold failpoints
(their `Failpoints` ports: broker.ports, storage.swap, zkstore.election):

    TRIOKA_FAILPOINTS="replica.follower.freeze_hw=return;replica.fetcher.skip_source=return(2)"

and the code asks at the failpoint:

    if failpoints is not None and failpoints.eval("replica.follower.freeze_hw") is not None:
        return  # act as the failpoint says

`eval(name)` is one dict lookup while the failpoint is off (always, in production) and returns
None; when the failpoint fires it returns its value (`return` gives True, `return(v)` gives v:
an int when v is one, else the string). The first evaluation of a failpoint that is switched
on logs the structlog event `failpoint enabled` (name, spec), so test logs show it.

Grammar (one entry per failpoint, `;` between entries, spaces ignored):

    entry  := NAME "=" term ("->" term)*
    term   := [P "%"] [N "*"] action
    action := "off" | "return" | "return(" VALUE ")"

- `off`: does not fire (an explicit no-op, useful in a chain: `2*off->return`).
- `return` / `return(VALUE)`: fires with True / VALUE.
- `N*term`: the term holds for its first N evaluations, then the next term of the chain (none
  left: off). Counting is per process.
- `P%term`: the term fires with probability P percent (0-100) per evaluation (an evaluation that
  does not fire still counts for `N*`). Not deterministic: prefer `N*` in tests.

Bad input raises ValueError naming the entry and the term (unknown failpoint names too: a typo
must not silently test nothing).

Failpoints (every name the code evaluates; keep docs/internals.md in step):

| name                                  | where                 | when it fires                          |
|---------------------------------------|-----------------------|----------------------------------------|
| `replica.follower.freeze_hw`          | broker.fetcher        | the follower does not take the         |
|                                       |                       | leader's HW from fetch responses (its  |
|                                       |                       | HW, and HW checkpoint, lag: KIP-101)   |
| `replica.fetcher.skip_source`         | broker.fetcher        | `return(ID)`: the follower sends no    |
|                                       |                       | Fetch to broker ID (as if cut off from |
|                                       |                       | it); its partitions wait               |
| `controller.zk.ignore_session_loss`   | zkstore.election,     | an active controller whose ZooKeeper   |
|                                       | controller.service.zk_mode | session expired does not resign at     |
|                                       |                       | once: on the new session it first acts |
|                                       |                       | on its stale state (one LeaderAndIsr / |
|                                       |                       | UpdateMetadata round, one BrokerChange |
|                                       |                       | write), then re-elects (a zombie)      |
| `broker.shutdown.pause_after_controlled_shutdown`                                               |
|                                       | broker.metadata_feeds.zk | `return(S)`: a broker whose controlled |
|                                       |                       | shutdown succeeded waits S seconds     |
|                                       |                       | (`return`: 10) before it drains and    |
|                                       |                       | closes its ZooKeeper session: process  |
|                                       |                       | and registration stay up while a test  |
|                                       |                       | looks at the leaders that moved        |
| `broker.produce.exit_before_response` | broker.handlers.produce | the leader exits (os._exit) once an  |
|                                       |                       | acks=all Produce is replicated (HW     |
|                                       |                       | past it) and before it answers: a      |
|                                       |                       | replicated, unacknowledged write       |
| `broker.metadata.hold_first_fetch`    | deploy.node.raft_transport | `return(S)` (`return`: 5): a Raft- |
|                                       |                       | mode broker's first request to the     |
|                                       |                       | quorum waits S seconds: its metadata   |
|                                       |                       | stays what it read from its own disk   |
| `group.coordinator.hold_load`         | broker.group.driver   | `return(S)` (`return`: 5): a load of a |
|                                       |                       | `__consumer_offsets` partition waits S |
|                                       |                       | seconds before it reads, so a test     |
|                                       |                       | sees COORDINATOR_LOAD_IN_PROGRESS      |
| `log.cleaner.after_cleaned`           | storage.cleaner       | the cleaner stops once `.cleaned` is   |
|                                       |                       | written (`return(exit)`: SIGKILL the   |
|                                       |                       | process; `return`: FailpointCrash)     |
| `log.cleaner.after_swap_rename`       | storage.swap          | ... once `.cleaned` became `.swap`     |
| `log.cleaner.before_swap_complete`    | storage.swap          | ... once the old segments became       |
|                                       |                       | `.deleted`, before `.swap` -> `.log`   |
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

ENV_VAR = "TRIOKA_FAILPOINTS"
SEED_ENV_VAR = "TRIOKA_FAILPOINTS_SEED"

FAILPOINTS: dict[str, str] = {
    "replica.follower.freeze_hw": "the follower ignores the leader's HW in fetch responses",
    "replica.fetcher.skip_source": "return(ID): the follower sends no Fetch to broker ID",
    "controller.zk.ignore_session_loss": (
        "an active controller whose session expired acts once more on its stale state "
        "(a LeaderAndIsr round and a BrokerChange write) before it re-elects"
    ),
    "broker.shutdown.pause_after_controlled_shutdown": (
        "return(S): after a successful controlled shutdown the broker waits S seconds "
        "(return: 10) before it drains and closes its ZooKeeper session"
    ),
    "broker.produce.exit_before_response": (
        "the leader exits (os._exit) after an acks=all Produce was replicated (the HW passed "
        "it) and before the response is written"
    ),
    "broker.metadata.hold_first_fetch": (
        "return(S): a Raft-mode broker's first request to the controllers' quorum (its "
        "metadata fetch) waits S seconds (return: 5): the broker serves what it knew before"
    ),
    "group.coordinator.hold_load": (
        "return(S): a load of a __consumer_offsets partition waits S seconds (return: 5) "
        "before reading it (its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile)"
    ),
    "log.cleaner.after_cleaned": (
        "the cleaner stops after writing and fsyncing <base>.log.cleaned, before the swap "
        "(return(exit): SIGKILL the process; return: raise FailpointCrash)"
    ),
    "log.cleaner.after_swap_rename": (
        "the cleaner stops after renaming .cleaned to .swap, before touching the old segments"
    ),
    "log.cleaner.before_swap_complete": (
        "the cleaner stops after renaming the old segments to .deleted, before .swap -> .log"
    ),
}
"""Every failpoint the code evaluates, with what it does (the table above)."""

log = structlog.get_logger("deploy.node.failpoints")

_TERM = re.compile(
    r"^(?:(?P<pct>\d+(?:\.\d+)?)%)?(?:(?P<count>\d+)\*)?"
    r"(?P<action>off|return)(?:\((?P<value>[^()]*)\))?$"
)
_NAME = re.compile(r"^[a-z0-9_]+(?:\.[a-z0-9_]+)*$")


@dataclass(slots=True)
class Term:
    action: str
    """"off" or "return"."""
    value: object = True
    count: int | None = None
    """Evaluations this term holds for (None: forever)."""
    percent: float | None = None


@dataclass(slots=True)
class Failpoint:
    name: str
    spec: str
    terms: list[Term]
    evaluations: int = 0
    announced: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def evaluate(self, rng: random.Random) -> object | None:
        with self._lock:
            if not self.announced:
                self.announced = True
                log.warning("failpoint enabled", failpoint=self.name, spec=self.spec)
            self.evaluations += 1
            while self.terms:
                term = self.terms[0]
                if term.count is not None:
                    if term.count <= 0:
                        self.terms.pop(0)
                        continue
                    term.count -= 1
                if term.action == "off":
                    return None
                if term.percent is not None and rng.random() * 100 >= term.percent:
                    return None
                return term.value
            return None


def _value(raw: str) -> object:
    raw = raw.strip()
    try:
        return int(raw)
    except ValueError:
        return raw


def parse_term(text: str, *, entry: str = "") -> Term:
    where = f" in failpoint entry {entry!r}" if entry else ""
    match = _TERM.match(text)
    if match is None:
        raise ValueError(
            f"bad failpoint term {text!r}{where}: expected [P%][N*]off|return|return(VALUE)"
        )
    action, value = match["action"], match["value"]
    if action == "off" and value is not None:
        raise ValueError(f"bad failpoint term {text!r}{where}: 'off' takes no value")
    if value is not None and not value.strip():
        raise ValueError(f"bad failpoint term {text!r}{where}: empty value in return()")
    percent = float(match["pct"]) if match["pct"] is not None else None
    if percent is not None and percent > 100:
        raise ValueError(f"bad failpoint term {text!r}{where}: {percent:g}% is over 100%")
    count = int(match["count"]) if match["count"] is not None else None
    if count == 0:
        raise ValueError(f"bad failpoint term {text!r}{where}: a count must be at least 1")
    return Term(
        action=action,
        value=True if value is None else _value(value),
        count=count,
        percent=percent,
    )


def parse(spec: str) -> dict[str, Failpoint]:
    """`TRIOKA_FAILPOINTS` text -> failpoints by name; ValueError naming what is wrong."""
    out: dict[str, Failpoint] = {}
    for raw_entry in spec.split(";"):
        entry = "".join(raw_entry.split())
        if not entry:
            continue
        name, sep, body = entry.partition("=")
        if not sep or not name or not body:
            raise ValueError(f"bad failpoint entry {entry!r}: expected NAME=TERM[->TERM...]")
        if not _NAME.match(name):
            raise ValueError(f"bad failpoint name {name!r} in entry {entry!r}")
        if name not in FAILPOINTS:
            raise ValueError(
                f"unknown failpoint {name!r} in entry {entry!r} (known: {', '.join(sorted(FAILPOINTS))})"
            )
        if name in out:
            raise ValueError(f"failpoint {name!r} is given twice")
        terms = [parse_term(t, entry=entry) for t in body.split("->")]
        out[name] = Failpoint(name, body, terms)
    return out


class Failpoints:
    """The failpoints of one process (the components' `Failpoints` ports): `eval(name)` is one
    dict lookup while the failpoint is off."""

    def __init__(self, spec: str | None = None, *, rng: random.Random | None = None) -> None:
        self._points = parse(spec) if spec else {}
        self._rng = rng if rng is not None else random.Random()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Failpoints:
        """`TRIOKA_FAILPOINTS`, its Random seeded from `TRIOKA_FAILPOINTS_SEED` when set."""
        seed = environ.get(SEED_ENV_VAR)
        return cls(environ.get(ENV_VAR), rng=random.Random(int(seed)) if seed else None)

    def active(self) -> dict[str, str]:
        """The failpoints switched on: name -> spec."""
        return {name: fp.spec for name, fp in self._points.items()}

    def eval(self, name: str) -> object | None:  # the name gofail and fail(9) use
        """The failpoint's value when it fires here, else None (always None while it is off)."""
        fp = self._points.get(name)
        if fp is None:
            return None
        return fp.evaluate(self._rng)


__all__ = [
    "ENV_VAR",
    "FAILPOINTS",
    "SEED_ENV_VAR",
    "Failpoint",
    "Failpoints",
    "Term",
    "parse",
    "parse_term",
]
