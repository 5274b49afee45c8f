"""ZkClient: kazoo's KazooClient (its own threads) driven from trio.

kazoo runs its connection in threads. Requests go through kazoo's async API: each call returns
an IAsyncResult whose completion callback (a kazoo thread, or the caller's own thread when the
result is already there) hands the result to trio with `TrioToken.run_sync_soon`, the token
captured when the client starts; nothing blocks a trio thread and many requests can be in
flight on the one connection (ZooKeeper applies one session's requests in the order sent).
Only start and close, which kazoo offers only as blocking calls, run in a worker thread.

Watches and connection-state changes reach trio the same way: a watch is a plain callable
that runs in the trio thread with kazoo's WatchedEvent; state listeners get a `ZkStateEvent`.

Connection states (kazoo's): CONNECTED, SUSPENDED (connection lost, the session may live on),
LOST (session expired or closed: ephemerals are gone). After LOST, kazoo reconnects with a new
session; its CONNECTED event carries `new_session=True` (re-register ephemerals, re-elect).
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
import trio
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat

log = structlog.get_logger("zkstore.client")

DEFAULT_SESSION_TIMEOUT_S = 18.0
"""Kafka's zookeeper.session.timeout.ms default (18000)."""


class ZkState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class ZkStateEvent:
    state: ZkState
    session_id: int | None
    """The session the client has (CONNECTED) or had (SUSPENDED, LOST)."""
    new_session: bool = False
    """CONNECTED with a session other than the previous one: the old one expired."""


Watcher = Callable[[WatchedEvent], None]
StateListener = Callable[[ZkStateEvent], None]


class ZkClientClosedError(RuntimeError):
    """The ZkClient was used before `start()` or after `close()`."""


class ZkClient:
    """A ZooKeeper session for trio code. `async with ZkClient(hosts) as zk:` or start/close.

    `hosts` is kazoo's connect string, optionally with a chroot ("h1:2181,h2:2181/kafka"); the
    chroot is created when missing, as Kafka does.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
        connection_timeout_s: float = 10.0,
        kazoo_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.hosts = hosts
        self.session_timeout_s = session_timeout_s
        self.connection_timeout_s = connection_timeout_s
        self._kwargs = dict(kazoo_kwargs or {})
        self._kz: KazooClient | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._listeners: list[StateListener] = []
        self._session_id: int | None = None
        self._closed = False
        self._watch_wrappers: dict[Watcher, Callable[[WatchedEvent], None]] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (deadline: connection_timeout_s); creates the chroot path if missing."""
        if self._kz is not None:
            raise RuntimeError("ZkClient.start() called twice")
        self._token = trio.lowlevel.current_trio_token()
        hosts, _, chroot = self.hosts.partition("/")
        if chroot:
            await self._ensure_chroot(hosts, "/" + chroot)
        self._kz = KazooClient(hosts=self.hosts, timeout=self.session_timeout_s, **self._kwargs)
        self._kz.add_listener(self._on_kazoo_state)
        kz = self._kz
        try:
            await trio.to_thread.run_sync(kz.start, self.connection_timeout_s)
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_stop_and_close, kz)
            self._kz = None
            raise
        self._session_id = kz.client_id[0] if kz.client_id else None
        log.info("zookeeper connected", hosts=self.hosts, session_id=_hex(self._session_id))

    async def _ensure_chroot(self, hosts: str, chroot: str) -> None:
        kz = KazooClient(hosts=hosts, timeout=self.session_timeout_s, **self._kwargs)

        def ensure() -> None:
            try:
                kz.start(self.connection_timeout_s)
                kz.ensure_path(chroot)
            finally:
                _stop_and_close(kz)

        await trio.to_thread.run_sync(ensure)

    async def close(self) -> None:
        """Close the session (its ephemerals go at once) and stop kazoo's threads."""
        if self._closed:
            return
        self._closed = True
        kz, self._kz = self._kz, None
        if kz is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_stop_and_close, kz)

    async def __aenter__(self) -> ZkClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def kazoo(self) -> KazooClient:
        """The underlying KazooClient (for zkstore modules; never block the trio thread)."""
        if self._kz is None:
            raise ZkClientClosedError("the ZooKeeper client is not started or already closed")
        return self._kz

    @property
    def session_id(self) -> int | None:
        return self._session_id

    @property
    def connected(self) -> bool:
        return self._kz is not None and self._kz.connected

    # -- connection state -------------------------------------------------------------------

    def add_state_listener(self, listener: StateListener) -> None:
        """`listener(ZkStateEvent)` runs in the trio thread on every state change."""
        self._listeners.append(listener)

    def remove_state_listener(self, listener: StateListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _on_kazoo_state(self, state: str) -> None:
        # kazoo thread: read what is known now, hand the rest to trio, never block.
        kz = self._kz
        client_id = kz.client_id if kz is not None else None
        session_id = client_id[0] if client_id else None
        self._call_soon(self._deliver_state, ZkState(str(state)), session_id)

    def _deliver_state(self, state: ZkState, session_id: int | None) -> None:
        new_session = False
        if state is ZkState.CONNECTED:
            new_session = self._session_id is not None and session_id != self._session_id
            self._session_id = session_id
        event = ZkStateEvent(state, session_id if session_id else self._session_id, new_session)
        log.info(
            "zookeeper state",
            state=state.value,
            session_id=_hex(event.session_id),
            new_session=new_session,
        )
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("zookeeper state listener failed")

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        token = self._token
        if token is None:
            return
        # After trio has ended nobody is left to tell.
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(fn, *args)

    def _wrap_watch(self, watch: Watcher | None) -> Callable[[WatchedEvent], None] | None:
        if watch is None:
            return None
        # One wrapper per watcher: kazoo keeps a set of watchers per path, so a watcher set
        # again before it fired is still called once.
        wrapper = self._watch_wrappers.get(watch)
        if wrapper is None:

            def wrapper(event: WatchedEvent) -> None:
                self._watch_wrappers.pop(watch, None)
                self._call_soon(watch, event)

            self._watch_wrappers[watch] = wrapper
        return wrapper

    # -- requests ---------------------------------------------------------------------------

    async def wait(self, async_result: Any) -> Any:
        """Await a kazoo IAsyncResult; returns its value or raises its exception. Cancelling
        stops the wait, not the request (ZooKeeper may still apply it)."""
        done = trio.Event()

        def completed(_result: Any) -> None:
            self._call_soon(done.set)

        async_result.rawlink(completed)
        try:
            await done.wait()
        finally:
            async_result.unlink(completed)
        return async_result.get_nowait()

    async def get(self, path: str, *, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        """Data and stat; kazoo's NoNodeError when absent."""
        return await self.wait(self.kazoo.get_async(path, watch=self._wrap_watch(watch)))

    async def get_or_none(
        self, path: str, *, watch: Watcher | None = None
    ) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat, or None when absent (the watch then fires on creation)."""
        try:
            return await self.get(path, watch=watch)
        except NoNodeError:
            if watch is not None:
                # get leaves no watch on a missing node; exists does (fires on creation).
                stat = await self.exists(path, watch=watch)
                if stat is not None:
                    return await self.get_or_none(path, watch=None)
            return None

    async def exists(self, path: str, *, watch: Watcher | None = None) -> ZnodeStat | None:
        return await self.wait(self.kazoo.exists_async(path, watch=self._wrap_watch(watch)))

    async def get_children(self, path: str, *, watch: Watcher | None = None) -> list[str]:
        return await self.wait(self.kazoo.get_children_async(path, watch=self._wrap_watch(watch)))

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> tuple[str, ZnodeStat]:
        """Create a znode; returns (real path, stat) (the stat's czxid is its creation zxid)."""
        return await self.wait(
            self.kazoo.create_async(
                path,
                value,
                ephemeral=ephemeral,
                sequence=sequence,
                makepath=makepath,
                include_data=True,
            )
        )

    async def set(self, path: str, value: bytes, *, version: int = -1) -> ZnodeStat:
        return await self.wait(self.kazoo.set_async(path, value, version))

    async def delete(self, path: str, *, version: int = -1) -> None:
        await self.wait(self.kazoo.delete_async(path, version))

    async def ensure_paths(self, paths: Sequence[str]) -> None:
        """Create each path (and parents) as an empty persistent znode unless it exists."""
        for path in paths:
            if await self.exists(path) is not None:
                continue
            parts = path.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                with contextlib.suppress(NodeExistsError):
                    await self.create("/" + "/".join(parts[:i]))

    async def get_many(
        self, paths: Sequence[str], *, max_in_flight: int = 1000
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Read many znodes pipelined (at most `max_in_flight` outstanding); None for absent."""
        return await self._many([lambda p=p: self.kazoo.get_async(p) for p in paths], max_in_flight)

    async def get_children_many(
        self, paths: Sequence[str], *, max_in_flight: int = 1000
    ) -> list[list[str] | None]:
        return await self._many(
            [lambda p=p: self.kazoo.get_children_async(p) for p in paths], max_in_flight
        )

    async def _many(self, calls: Sequence[Callable[[], Any]], max_in_flight: int) -> list[Any]:
        results: list[Any] = [None] * len(calls)
        for start in range(0, len(calls), max_in_flight):
            indexes = range(start, min(start + max_in_flight, len(calls)))
            pending = [calls[i]() for i in indexes]
            await self._wait_all(pending)
            for i, async_result in zip(indexes, pending, strict=True):
                try:
                    results[i] = async_result.get_nowait()
                except NoNodeError:
                    results[i] = None
        return results

    async def _wait_all(self, async_results: Sequence[Any]) -> None:
        """Until every kazoo IAsyncResult is done: one wake-up of the trio thread per batch.
        Awaiting them one by one cost a thread hop each (~1 ms): 25,000 partition states took
        ~21 s to read on a new controller (bench/run_failover.py)."""
        if not async_results:
            return
        done = trio.Event()
        lock = threading.Lock()  # kazoo's callbacks may run in several of its threads
        left = len(async_results)

        def completed(_result: Any) -> None:
            nonlocal left
            with lock:
                left -= 1
                last = left == 0
            if last:
                self._call_soon(done.set)

        for async_result in async_results:
            async_result.rawlink(completed)
        try:
            await done.wait()
        finally:
            for async_result in async_results:
                async_result.unlink(completed)


def _stop_and_close(kz: KazooClient) -> None:
    try:
        kz.stop()
    finally:
        kz.close()


def _hex(session_id: int | None) -> str | None:
    return None if session_id is None else f"0x{session_id:x}"


__all__ = [
    "DEFAULT_SESSION_TIMEOUT_S",
    "KazooState",
    "StateListener",
    "Watcher",
    "ZkClient",
    "ZkClientClosedError",
    "ZkState",
    "ZkStateEvent",
]
