"""Log context that must not outlive what it describes (structlog.contextvars; no I/O).

trio copies the spawning task's context variables into every task it starts, so a long-lived
task started while a request is being served (a replica fetcher added by a LeaderAndIsr, an
offsets load started by a leadership change) would carry that request's correlation id and
client id for the rest of its life. `detached(fn)` runs `fn` with the process context only
(role, node id, ...: `PROCESS_CONTEXT_KEYS`); the task binds its own (`source_broker`, ...).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import structlog

PROCESS_CONTEXT_KEYS = frozenset({"role", "node_id", "process_roles", "metadata_mode"})
"""Bound once per process by deploy.telemetry.logs.configure_logging."""

P = ParamSpec("P")
T = TypeVar("T")


def keep_process_context_only() -> None:
    """Unbind, in the current task's context, everything but the process context."""
    bound = structlog.contextvars.get_contextvars()
    extra = [k for k in bound if k not in PROCESS_CONTEXT_KEYS]
    if extra:
        structlog.contextvars.unbind_contextvars(*extra)


def detached(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """`fn`, run in a task of its own without the context of the task that started it."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        keep_process_context_only()
        return await fn(*args, **kwargs)

    return run
