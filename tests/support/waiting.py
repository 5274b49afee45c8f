"""Waiting for a condition with a deadline: the only way tests wait (never a blind sleep)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from protocol.errors import TriokaError

T = TypeVar("T")


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]], *, within: float = 5.0, every: float = 0.01
) -> None:
    """Poll `condition` (sync or async) until it is true; trio.TooSlowError after `within` s."""
    with trio.fail_after(within):
        while True:
            result = condition()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
            await trio.sleep(every)


def eventually(
    read: Callable[[], T], condition: Callable[[T], bool], what: str, within: float = 45.0
) -> T:
    """Outside trio: poll `read()` until `condition` holds for its value, which is returned;
    AssertionError naming `what` and the last value (or error) after `within` s. A TriokaError
    or OSError from `read` counts as "not yet"."""
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            last = value = read()
            if condition(value):
                return value
        except (TriokaError, OSError) as exc:
            last = exc
        assert time.monotonic() < deadline, f"{what} did not happen within {within} s: {last}"
        time.sleep(0.2)  # polling a condition under a deadline
