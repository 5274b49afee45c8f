"""Test harness: a real standalone ZooKeeper (Debian's package) on a free loopback port.

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

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

ZOOKEEPER_JARS = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
    "/usr/share/java/netty-handler.jar",
    "/usr/share/java/netty-transport.jar",
    "/usr/share/java/netty-common.jar",
    "/usr/share/java/netty-buffer.jar",
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-epoll.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
)
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_TIME_MS = 200
MIN_SESSION_TIMEOUT_MS = 2 * TICK_TIME_MS
MAX_SESSION_TIMEOUT_MS = 60_000
POLL_S = 0.05

__all__ = [
    "ZooKeeperChroot",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "ruok",
    "zookeeper",
    "zookeeper_factory",
    "zookeeper_server",
]


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper is not installed, did not answer `ruok` in time, or exited while starting."""


def zookeeper_available() -> bool:
    return shutil.which("java") is not None and Path(ZOOKEEPER_JARS[0]).exists()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ruok(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the server answers the four-letter word `ruok` with `imok`."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"ruok")
            sock.shutdown(socket.SHUT_WR)
            answer = b""
            while len(answer) < 4:
                chunk = sock.recv(16)
                if not chunk:
                    break
                answer += chunk
            return answer == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """One standalone ZooKeeper process under test. Not started until `start()`."""

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
        self.tmp_dir = Path(tmp_dir)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = (
            min_session_timeout_ms if min_session_timeout_ms is not None else 2 * tick_time_ms
        )
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap = heap
        self.conf_dir = self.tmp_dir / "conf"
        self.data_dir = self.tmp_dir / "data"
        self.log_file = self.tmp_dir / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # -- addresses -------------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        return self.hosts + chroot

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("zookeeper not started")
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------------

    def _write_config(self) -> Path:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.conf_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            "autopurge.purgeInterval=0\n"
        )
        (self.conf_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log_file}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n"
        )
        return cfg

    def command(self, cfg: Path) -> list[str]:
        classpath = os.pathsep.join(
            [str(self.conf_dir), *(j for j in ZOOKEEPER_JARS if Path(j).exists())]
        )
        return [
            "java",
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            "-Dlog4j.configuration=file:" + str(self.conf_dir / "log4j.properties"),
            "-cp",
            classpath,
            MAIN_CLASS,
            str(cfg),
        ]

    def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait until it answers `ruok`. A first start on port 0 picks a
        free port (and tries another if it was taken meanwhile); restarts keep the port."""
        if not zookeeper_available():
            raise ZooKeeperStartError(
                "ZooKeeper is not installed (java and /usr/share/java/zookeeper.jar): run "
                "`make setup-dev`"
            )
        if self.running:
            raise RuntimeError(f"zookeeper is already running (pid {self.pid})")
        pick_port = self.port == 0
        attempts = 3 if pick_port else 1
        for attempt in range(attempts):
            if pick_port:
                self.port = _free_port(self.host)
            try:
                self._start_once(timeout)
                return
            except ZooKeeperStartError:
                if attempt + 1 == attempts or "Address already in use" not in self.log_tail():
                    raise

    def _start_once(self, timeout: float) -> None:
        cfg = self._write_config()
        with (self.tmp_dir / "zookeeper.out").open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(cfg),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.tmp_dir,
                start_new_session=True,
            )
        self.starts += 1
        deadline = time.monotonic() + timeout
        try:
            while not ruok(self.host, self.port, timeout=1.0):
                if self.proc.poll() is not None:
                    raise ZooKeeperStartError(
                        f"zookeeper exited with code {self.proc.returncode} while starting:\n"
                        + self.log_tail()
                    )
                if time.monotonic() > deadline:
                    raise ZooKeeperStartError(
                        f"zookeeper did not answer ruok within {timeout}s:\n" + self.log_tail()
                    )
                time.sleep(POLL_S)  # polling a condition under a deadline, not synchronisation
        except BaseException:
            self.cleanup()
            raise

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for path in (self.log_file, self.tmp_dir / "zookeeper.out"):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
        return text

    def wait_exit(self, timeout: float = 30.0) -> int:
        if self.proc is None:
            raise RuntimeError("zookeeper not started")
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"zookeeper {self.pid} did not exit within {timeout}s") from None

    def signal(self, sig: int) -> None:
        if self.running:
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the exit; returns the exit code."""
        if self.proc is None:
            raise RuntimeError("zookeeper not started")
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self) -> int:
        """SIGKILL and wait; returns the exit code (-9)."""
        if self.proc is None:
            raise RuntimeError("zookeeper not started")
        self.signal(signal.SIGKILL)
        return self.wait_exit(30)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop if running, then start again on the same port with the same data."""
        if self.running:
            self.stop(timeout)
        self.start(timeout)

    def cleanup(self) -> None:
        """Kill the process by pid whatever state it is in, and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    # -- async twins ---------------------------------------------------------------------

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


def create_chroot(hosts: str, chroot: str, timeout: float = 10.0) -> None:
    """Create `chroot` (and its parents) as empty persistent znodes."""
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
