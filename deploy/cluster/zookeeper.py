"""A standalone ZooKeeper server process from Debian's package (jars in /usr/share/java).

    zk = ZooKeeperProcess(base_dir, tick_time_ms=500)   # own zoo.cfg, dataDir, log under base_dir
    zk.start()                  # blocks until `ruok` answers `imok` (deadline), picks a free port
    zk.hosts                    # "127.0.0.1:PORT"   (also .host, .port, .pid)
    zk.stop(); zk.kill()        # SIGTERM / SIGKILL and wait; zk.restart(): same port and data
    zk.cleanup()                # SIGKILL by pid if still alive

Used by `trioka cluster up` (deploy.cluster.startup) and by the tests' harness
(tests/support/zookeeper.py). The server writes its own zoo.cfg with what Debian's ZooKeeper
3.8 needs to run alone on a chosen port: `clientPortAddress` (loopback by default), the Jetty
admin server off (it cannot load from Debian's jars), four-letter words allowed (`ruok` is the
readiness check), session timeout bounds `[min_session_timeout_ms, max_session_timeout_ms]`
(ZooKeeper clamps a client's requested timeout into them; the minimum defaults to 2 * tickTime,
ZooKeeper's own rule).
The process runs in its own session (start_new_session), so it outlives a supervisor that exits
(`trioka cluster up`) and a Ctrl-C in the terminal does not reach it.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from deploy.cluster.process import ManagedProcess

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
DEFAULT_TICK_TIME_MS = 2000  # ZooKeeper's own default
DEFAULT_MAX_SESSION_TIMEOUT_MS = 60_000
POLL_S = 0.05

__all__ = [
    "ZOOKEEPER_JARS",
    "ZooKeeperProcess",
    "ZooKeeperStartError",
    "free_port",
    "ruok",
    "zookeeper_available",
]


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper is not installed, did not answer `ruok` in time, or exited while starting."""


def zookeeper_available() -> bool:
    return shutil.which("java") is not None and Path(ZOOKEEPER_JARS[0]).exists()


_HANDED_OUT: set[int] = set()
"""Ports `free_port` gave in this process: never the same one twice."""
_PICKS = random.SystemRandom()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now, below the kernel's ephemeral range: a process that
    binds port 0 before the caller binds this one (a node's /metrics server) is never given it.
    A port picked by binding port 0 was: a controller then failed with EADDRINUSE."""
    start = _ephemeral_start()
    low = max(1024, start - 12_000)
    for _ in range(500):
        port = _PICKS.randrange(low, start)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))  # the range is full: the kernel's choice
        return int(sock.getsockname()[1])


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


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


class ZooKeeperProcess(ManagedProcess):
    """One standalone ZooKeeper process. Not started until `start()`."""

    what = "zookeeper"

    def __init__(
        self,
        base_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tick_time_ms: int = DEFAULT_TICK_TIME_MS,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int = DEFAULT_MAX_SESSION_TIMEOUT_MS,
        heap: str = "256m",
        exec_prefix: Sequence[str] = (),
    ) -> None:
        self.tmp_dir = Path(base_dir)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = (
            min_session_timeout_ms if min_session_timeout_ms is not None else 2 * tick_time_ms
        )
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap = heap
        self.exec_prefix = tuple(exec_prefix)
        """Runs the JVM through it, e.g. `ip netns exec NS` (deploy.cluster.netns), which execs."""
        self.conf_dir = self.tmp_dir / "conf"
        self.data_dir = self.tmp_dir / "data"
        self.log_file = self.tmp_dir / "zookeeper.log"
        self.out_file = self.tmp_dir / "zookeeper.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # -- addresses -------------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        return self.hosts + chroot

    # -- lifecycle -------------------------------------------------------------------------

    def write_config(self) -> Path:
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
            *self.exec_prefix,
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
                "`make setup-dev` (Debian's zookeeper package)"
            )
        if self.running:
            raise RuntimeError(f"zookeeper is already running (pid {self.pid})")
        pick_port = self.port == 0
        attempts = 3 if pick_port else 1
        for attempt in range(attempts):
            if pick_port:
                self.port = free_port(self.host)
            try:
                self._start_once(timeout)
                return
            except ZooKeeperStartError:
                if attempt + 1 == attempts or "Address already in use" not in self.log_tail():
                    raise

    def _start_once(self, timeout: float) -> None:
        cfg = self.write_config()
        with self.out_file.open("ab") as out:
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
        for path in (self.log_file, self.out_file):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
        return text
