"""What the cluster benchmarks share: a 3-broker cluster they own (ZK or Raft mode), and ways to
ask it.

    with BenchCluster(mode="raft", brokers=3, session_timeout_ms=6000, overrides={...}) as c:
        c.up()                                  # controllers or ZooKeeper, then brokers
        trio.run(c.wait_ready)                  # a controller, every broker live
        c.kill(2)                               # SIGKILL by pid (broker or controller id)
        c.events(3001, "brokers fenced")        # a node's JSON log events
    # every process it started is SIGKILLed by pid on exit, also on Ctrl-C or SIGTERM

The cluster is the one `trioka cluster up --mode zk|raft` starts (`deploy.cluster.supervisor.cluster_up`:
ZK mode Debian's ZooKeeper, Raft mode 3 `python -m deploy.node.controller` voters; then
`python -m deploy.node.broker` processes in their own sessions, state and logs in a temporary
directory). The benchmark process is the supervisor: on exit, whatever the reason,
it SIGKILLs each process whose pid and /proc start time are still the ones it started.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from deploy.cluster.pids import node_alive  # noqa: E402
from deploy.cluster.supervisor import (  # noqa: E402
    ClusterState,
    NodeRecord,
    cluster_up,
    wait_until_ready,
)
from deploy.node.transport import PooledTransport  # noqa: E402
from protocol.messages.metadata import MetadataRequest, MetadataResponse  # noqa: E402

__all__ = [
    "ROOT",
    "BenchCluster",
    "cpu_s",
    "metadata_of",
    "parse_time",
    "rss_bytes",
    "run_json",
]

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (/proc/<pid>/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def parse_time(iso: str) -> float:
    """A structlog ISO timestamp ("2026-11-22T02:43:29.123456Z") as epoch seconds."""
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class _Interrupted(KeyboardInterrupt):
    """SIGTERM/SIGHUP turned into the KeyboardInterrupt that Ctrl-C raises, so that the same
    `finally` blocks kill the cluster."""


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise _Interrupted(f"signal {signal.Signals(signum).name}")


class BenchCluster:
    """A cluster owned by one benchmark run; a context manager that kills it on exit."""

    def __init__(
        self,
        *,
        mode: str = "zk",
        brokers: int = 3,
        controllers: int = 3,
        session_timeout_ms: int = 6000,
        overrides: Mapping[str, str] | None = None,
        controller_overrides: Mapping[str, str] | None = None,
        keep: bool = False,
        log_level: str = "INFO",
    ) -> None:
        self.mode = mode
        self.brokers = brokers
        self.controllers = controllers
        self.session_timeout_ms = session_timeout_ms
        self.overrides = dict(overrides or {})
        self.controller_overrides = dict(controller_overrides or {})
        self.keep = keep
        self.log_level = log_level
        self.dir: Path | None = None
        self.state: ClusterState | None = None
        self._old_handlers: dict[int, Any] = {}

    # -- life cycle ------------------------------------------------------------------------

    def __enter__(self) -> BenchCluster:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[signum] = signal.signal(signum, _interrupt)
        # Ctrl-C too when started in the background of a shell script, which ignores SIGINT.
        self._old_handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.dir = Path(tempfile.mkdtemp(prefix="trioka-bench-cluster-"))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill_all()
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        if self.dir is not None:
            if self.keep:
                print(f"cluster directory kept: {self.dir}", file=sys.stderr)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

    def up(self, timeout: float = 120.0) -> ClusterState:
        assert self.dir is not None, "use BenchCluster as a context manager"
        # The brokers inherit this environment (deploy.cluster.supervisor adds TRIOKA_LOG_FORMAT=json):
        # at least INFO, which cluster_up needs ("broker listening") and which keeps the
        # controller's timing events.
        os.environ["TRIOKA_LOG_LEVEL"] = self.log_level
        self.state = cluster_up(
            self.dir / "cluster",
            mode=self.mode,
            brokers=self.brokers,
            controllers=self.controllers,
            session_timeout_ms=self.session_timeout_ms,
            overrides=self.overrides,
            controller_overrides=self.controller_overrides,
            timeout=timeout,
        )
        return self.state

    def _nodes(self) -> list[NodeRecord]:
        if self.state is None:
            # cluster_up failed half-way: it stopped what it started; read what it recorded.
            return []
        first = (self.state.zookeeper,) if self.state.zookeeper is not None else ()
        return [*self.state.brokers, *self.state.controllers, *first]

    def kill_all(self) -> None:
        """SIGKILL (after SIGCONT) every process of the cluster that is still the one started,
        brokers first, then the controllers or ZooKeeper; reap them."""
        for node in self._nodes():
            if node_alive(node):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.pid, signal.SIGCONT)
                    os.kill(node.pid, signal.SIGKILL)
        for node in self._nodes():
            deadline = time.monotonic() + 10
            while node_alive(node) and time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(node.pid, os.WNOHANG)
                time.sleep(0.02)  # polling a condition under a deadline
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(node.pid, os.WNOHANG)

    # -- the nodes ------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        assert self.state is not None
        return self.state.bootstrap

    def node(self, node_id: int) -> NodeRecord:
        """A broker or (Raft mode) a controller by node id."""
        assert self.state is not None
        return self.state.node(node_id)

    def live_controller_ids(self) -> list[int]:
        """Raft mode: the controllers still running."""
        assert self.state is not None
        return [c.node_id for c in self.state.controllers if node_alive(c)]

    def live_controller_bootstrap(self) -> str:
        assert self.state is not None
        return ",".join(f"{c.host}:{c.port}" for c in self.state.controllers if node_alive(c))

    def live_ids(self) -> list[int]:
        assert self.state is not None
        return [b.node_id for b in self.state.brokers if node_alive(b)]

    def live_bootstrap(self) -> str:
        assert self.state is not None
        return ",".join(f"{b.host}:{b.port}" for b in self.state.brokers if node_alive(b))

    def kill(self, node_id: int) -> float:
        """SIGKILL broker or controller `node_id` by pid; returns the wall-clock time of the
        kill."""
        node = self.node(node_id)
        if not node_alive(node):
            raise RuntimeError(f"{node.name} is not running")
        at = time.time()
        os.kill(node.pid, signal.SIGKILL)
        self.wait_gone(node_id, within=10)
        return at

    def terminate(self, node_id: int) -> float:
        """SIGTERM broker `node_id` (a controlled shutdown) by pid; returns the wall-clock time
        of the signal without waiting for the exit (`wait_gone`)."""
        node = self.node(node_id)
        if not node_alive(node):
            raise RuntimeError(f"{node.name} is not running")
        at = time.time()
        os.kill(node.pid, signal.SIGTERM)
        return at

    def wait_gone(self, node_id: int, *, within: float) -> float | None:
        """The wall-clock time `node_id`'s process was seen gone (reaped), or None if it still
        runs after `within` seconds."""
        node = self.node(node_id)
        deadline = time.monotonic() + within
        while node_alive(node) and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a condition under a deadline
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(node.pid, os.WNOHANG)  # our child: reap the zombie
        return None if node_alive(node) else time.time()

    def log_size(self, node_id: int) -> int:
        path = Path(self.node(node_id).log)
        return path.stat().st_size if path.exists() else 0

    def events(
        self, node_id: int, name: str | None = None, *, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Node `node_id`'s JSON log events from byte `offset` on (all, or those called
        `name`)."""
        path = Path(self.node(node_id).log)
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in data.splitlines():
            if name is not None and name.encode() not in line:
                continue  # cheap filter before parsing: the logs are large at 25k partitions
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and (name is None or event.get("event") == name):
                    out.append(event)
        return out

    async def wait_ready(self, within: float = 120.0) -> None:
        assert self.state is not None
        await wait_until_ready(self.bootstrap, self.brokers, within=within,
                               controller_bootstrap=self.state.controller_bootstrap)  # fmt: skip


async def metadata_of(
    transport: PooledTransport,
    host: str,
    port: int,
    topics: Sequence[str] | None = None,
    *,
    timeout_s: float = 30.0,
) -> MetadataResponse:
    """A Metadata request to one broker (not to whichever broker a client would pick)."""
    response = await transport.send(
        host, port, MetadataRequest(topics=None if topics is None else tuple(topics)),
        timeout_s=timeout_s,
    )  # fmt: skip
    assert isinstance(response, MetadataResponse)
    return response


def run_json(command: Sequence[str], *, timeout: float) -> dict[str, Any]:
    """Run a client process (`trioka perf ... --json`) and parse the JSON line it prints last.
    The process runs in its own session and is killed by pid on timeout or interruption."""
    proc = subprocess.Popen(
        list(command),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRIOKA_LOG_LEVEL": "WARNING"},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(
            f"{' '.join(command[2:6])}... exited with {proc.returncode} without a result:\n"
            f"{out.decode()[-1500:]}\n{err.decode()[-1500:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    result["exit_code"] = proc.returncode
    return result
