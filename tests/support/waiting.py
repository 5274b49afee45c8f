"""Waiting for a condition with a deadline: the only way tests wait (never a blind sleep)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import trio


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
