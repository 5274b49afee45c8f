"""The Leadership port: how the controller service (controller.service) learns that this node
became, or stopped being, the active controller, and what it needs from the metadata backend to
start a term. zkstore.leadership (the /controller election) and raft.leadership (the quorum's
leader) implement it; deploy.node wires one in.

    await nursery.start(leadership.run)          # takes part in the election; started once
    async for change in leadership.changes():    # the first round is done
        Elected(epoch) -> claim = await leadership.claim(change)   # load or catch up
        Lost(reason)   -> the term ends

A `Claim` (protocol.metadata.leadership) is what a term starts from: the image loaded for it
(ZooKeeper: everything read from the znodes) or None (Raft: the state every controller replays
all the time is current once the claim's record committed); `term_log()` is where the term's
records go, fenced by its epoch. `writes_refused()` says the backend refused this term's writes (a newer
controller fenced it, or ZooKeeper was left half-written): the service then resigns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import trio

from controller.ports import MetadataLog
from protocol.metadata.leadership import Claim, Elected, LeadershipChange


class Leadership(Protocol):
    node_id: int

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Take part in the election until cancelled; started once the first round is done."""
        ...

    def changes(self) -> AsyncIterator[LeadershipChange]:
        """Elected / Lost, in order (an Elected may follow an Elected: the first term ended)."""
        ...

    @property
    def active_id(self) -> int | None:
        """The active controller as last seen (None when nobody is known)."""
        ...

    def not_controller_message(self) -> str:
        """What a NOT_CONTROLLER answer of this node says (naming the controller if known)."""
        ...

    async def claim(self, elected: Elected) -> Claim | None:
        """Start the term of `elected`: load (ZooKeeper) or catch up (Raft). None when the
        term was lost meanwhile."""
        ...

    def term_log(self) -> MetadataLog:
        """Where the claimed term's records go (fenced by its epoch)."""
        ...

    def writes_refused(self) -> BaseException | None:
        """Why the current term's writes are refused from now on, if they are."""
        ...

    async def resign(self) -> None:
        """Give up the controllership (the others elect again)."""
        ...
