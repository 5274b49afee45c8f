"""Test harness: a real standalone ZooKeeper (Debian's package) on a free loopback port.

The process itself is deploy.cluster.zookeeper.ZooKeeperProcess (what `trioka cluster up`
starts); this module adds the tests' short tickTime, async twins and the fixtures.

    server = ZooKeeperServer(tmp_dir)          # own zoo.cfg, dataDir and log file under tmp_dir
    server.start()                              # blocks until `ruok` answers `imok` (deadline)
    server.hosts                                # "127.0.0.1:PORT"   (also .host, .port, .pid)
    server.connect_string("/t1234")             # "127.0.0.1:PORT/t1234" (a chroot)
    server.stop()                               # SIGTERM, wait; server.kill(): SIGKILL, wait
    server.restart()                            # same port and dataDir: sessions and data survive
    server.cleanup()                            # SIGKILL by pid if still alive (fixtures always)

Every blocking method has an async twin (`astart`, `astop`, `akill`, `arestart`) that runs it
in a worker thread, so a trio test's own tasks keep running meanwhile.

tickTime is 200 ms and the session timeout bounds are [400 ms, 60 s] (ZooKeeper clamps a
client's requested timeout into them), so tests may ask for the 2 s sessions the house rules
ask for and still see expiry quickly. Four-letter words are allowed (`ruok` is the readiness
check) and the Jetty admin server is off (it cannot load from Debian's jars).

Fixtures (register with `pytest_plugins = ["tests.support.zookeeper"]` in tests/conftest.py, or
import them into a package conftest):

- `zookeeper_server` (session): one server per test run, shared by every test.
- `zookeeper` (function): a `ZooKeeperChroot` on the shared server: a fresh chroot `/t<uuid>`
  (created empty, so clients connecting with it work at once) and `.hosts` = the connect
  string including the chroot; tests do not see each other's znodes.
- `zookeeper_factory` (function): `zookeeper_factory(**kwargs) -> ZooKeeperServer` (started
  unless `start=False`) for tests that stop, kill or restart the server; every server it made
  is killed at teardown.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from deploy.cluster.zookeeper import ZooKeeperProcess, ZooKeeperStartError, ruok

TICK_TIME_MS = 200
MIN_SESSION_TIMEOUT_MS = 2 * TICK_TIME_MS
MAX_SESSION_TIMEOUT_MS = 60_000

__all__ = [
    "ZooKeeperChroot",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "ruok",
    "zookeeper",
    "zookeeper_factory",
    "zookeeper_server",
]


class ZooKeeperServer(ZooKeeperProcess):
    """deploy.cluster.zookeeper.ZooKeeperProcess with the tests' short tickTime and async twins
    of the blocking methods. Not started until `start()`."""

    def __init__(
        self,
        tmp_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tick_time_ms: int = TICK_TIME_MS,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int = MAX_SESSION_TIMEOUT_MS,
        heap: str = "256m",
    ) -> None:
        super().__init__(
            tmp_dir,
            host=host,
            port=port,
            tick_time_ms=tick_time_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            heap=heap,
        )

    async def astart(self, within: float = 30.0) -> None:
        await trio.to_thread.run_sync(self.start, within)

    async def astop(self, within: float = 30.0) -> int:
        return await trio.to_thread.run_sync(self.stop, within)

    async def akill(self) -> int:
        return await trio.to_thread.run_sync(self.kill)

    async def arestart(self, within: float = 30.0) -> None:
        await trio.to_thread.run_sync(self.restart, within)


@dataclass(frozen=True)
class ZooKeeperChroot:
    """A test's private corner of the shared server: connect with `.hosts`."""

    server: ZooKeeperServer
    chroot: str

    @property
    def hosts(self) -> str:
        """Connect string with the chroot, e.g. "127.0.0.1:2181/t0123abcd"."""
        return self.server.connect_string(self.chroot)

    @property
    def server_hosts(self) -> str:
        """Connect string without the chroot (the whole server)."""
        return self.server.hosts


def create_chroot(hosts: str, chroot: str, timeout: float = 30.0) -> None:
    """Create `chroot` (and its parents) as empty persistent znodes. The first session after the
    JVM started can take over 10 s on a loaded machine (seen once in a run of the suite)."""
    from kazoo.client import KazooClient  # tests only; the product's kazoo user is zkstore

    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=timeout)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()


# -- fixtures ------------------------------------------------------------------------------

# The shared server is reference-counted so that several conftests may import the fixtures
# (each import is its own fixture definition) and the run still gets a single server.
_shared_lock = threading.Lock()
_shared: dict[str, object] = {"server": None, "users": 0, "dir": None}


def _acquire_shared_server() -> ZooKeeperServer:
    with _shared_lock:
        server = _shared["server"]
        if server is None:
            tmp = tempfile.mkdtemp(prefix="trioka-zk-")
            server = ZooKeeperServer(tmp)
            server.start()
            _shared["server"] = server
            _shared["dir"] = tmp
        _shared["users"] = int(_shared["users"]) + 1  # type: ignore[call-overload]
        assert isinstance(server, ZooKeeperServer)
        return server


def _release_shared_server() -> None:
    with _shared_lock:
        _shared["users"] = int(_shared["users"]) - 1  # type: ignore[call-overload]
        server = _shared["server"]
        if _shared["users"] == 0 and isinstance(server, ZooKeeperServer):
            server.cleanup()
            shutil.rmtree(str(_shared["dir"]), ignore_errors=True)
            _shared["server"] = None
            _shared["dir"] = None


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    server = _acquire_shared_server()
    try:
        if not server.running:
            server.start()  # a test killed the shared server: bring it back for the next
        yield server
    finally:
        _release_shared_server()


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperServer) -> ZooKeeperChroot:
    if not zookeeper_server.running:
        zookeeper_server.start()
    chroot = f"/t{uuid.uuid4().hex}"
    create_chroot(zookeeper_server.hosts, chroot)
    return ZooKeeperChroot(zookeeper_server, chroot)


ZooKeeperFactory = Callable[..., ZooKeeperServer]


@pytest.fixture
def zookeeper_factory(tmp_path: Path) -> Iterator[ZooKeeperFactory]:
    made: list[ZooKeeperServer] = []

    def make(*, start: bool = True, timeout: float = 30.0, **kwargs: object) -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path / f"zookeeper-{len(made)}", **kwargs)  # type: ignore[arg-type]
        made.append(server)
        if start:
            server.start(timeout)
        return server

    try:
        yield make
    finally:
        for server in made:
            server.cleanup()
