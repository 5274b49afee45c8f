"""The client's failpoints: the `Failpoints` port and the names the client evaluates.

As the node processes' failpoints (deploy.node.failpoints; etcd's gofail, FreeBSD's fail(9)), a
failpoint is a named place in the code where a test makes a race-dependent scenario happen on
every run. Off by default and injected, never global: the client keeps no registry and reads
no environment; a `Producer` is handed one (`Producer(..., failpoints=registry)`; None, the
default: all off) and asks it at the failpoint:

    if self._failpoints is not None and self._failpoints.eval(LOSE_PRODUCE_RESPONSE):
        ...  # act as the failpoint says

Any object with `eval(name) -> value | None` serves (deploy.node.failpoints.Failpoints has that
shape; the tests use a scripted one).

| name                           | where           | when it fires                              |
|--------------------------------|-----------------|--------------------------------------------|
| `client.produce.lose_response` | client.producer | the broker's answer to a Produce request   |
|                                |                 | is dropped and the request fails as one    |
|                                |                 | that got no answer within                  |
|                                |                 | request.timeout.ms (the connection is      |
|                                |                 | closed, as for a real timeout): the        |
|                                |                 | batches were written, the producer does    |
|                                |                 | not know it (evaluated once per answered   |
|                                |                 | Produce request)                           |
"""

from __future__ import annotations

from typing import Protocol


class Failpoints(Protocol):
    def eval(self, name: str) -> object | None:
        """The failpoint's value when it fires here, else None (always None while it is off)."""
        ...


LOSE_PRODUCE_RESPONSE = "client.produce.lose_response"

FAILPOINTS: dict[str, str] = {
    LOSE_PRODUCE_RESPONSE: (
        "the answer to a Produce request is dropped and the request fails as one that got no "
        "answer within request.timeout.ms: written, outcome unknown to the producer"
    ),
}
"""Every failpoint the client evaluates, with what it does (the table above)."""

__all__ = ["FAILPOINTS", "LOSE_PRODUCE_RESPONSE", "Failpoints"]
