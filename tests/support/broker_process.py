"""Test harness: a real broker process (`python -m deploy.node.broker`) on a free loopback port.

    proc = BrokerProcess(tmp_path, overrides={"num.partitions": "3"})
    proc.start()                 # blocks until the broker answers ApiVersions (deadline: timeout)
    proc.bootstrap               # "127.0.0.1:PORT"    (also .host, .port, .pid, .log_dir)
    proc.stop()                  # SIGTERM, wait for exit; returns the exit code
    proc.restart()               # stop (SIGTERM) if running, start again on the same port
    proc.kill()                  # SIGKILL, wait for exit
    proc.pause(); proc.resume()  # SIGSTOP / SIGCONT
    proc.events()                # the broker's JSON log lines, parsed (dicts)
    proc.wait_for_event("broker started", timeout=10)
    proc.cleanup()               # SIGKILL by pid if still alive (the fixtures call it always)

Every blocking method has an async twin for trio tests (`astart`, `astop`, `arestart`, `akill`, `await_exit`; their
`within` is the blocking twin's `timeout`)
that runs it in a worker thread, so the test's own trio tasks keep running meanwhile.

The first start asks for port 0 and reads the bound port from the broker's "broker listening"
log event (no port race); restarts reuse that port. The broker's stderr (JSON log lines) goes
to `<tmp>/broker-<node>.log`, appended across restarts; `log_tail()` shows it in failures.
`preexec_fn` is passed to subprocess.Popen (e.g. to set RLIMIT_NOFILE in the child).

Telemetry (deploy/telemetry) is off unless `overrides` sets `trioka.telemetry.enable`.

Readiness is a condition with a deadline (the process answers ApiVersions), never a sleep.
Fixtures in tests/conftest.py: `broker` (one started broker per test) and `broker_factory`
(`broker_factory(overrides=..., start=True, preexec_fn=None, log_dirs=None)`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from deploy.cluster.process import ManagedProcess
from tests.support.wire import api_versions_blocking

REPO_ROOT = Path(__file__).resolve().parents[2]
POLL_S = 0.02

__all__ = ["REPO_ROOT", "BrokerProcess", "BrokerStartError"]


class BrokerStartError(RuntimeError):
    """The broker did not come up in time, or exited while starting (the log tail says why)."""


class BrokerProcess(ManagedProcess):
    """One broker process under test. Not started until `start()`."""

    what = "broker"
    module = "deploy.node.broker"
    """What `python -m` runs."""

    def __init__(
        self,
        tmp_dir: str | Path,
        overrides: Mapping[str, Any] | None = None,
        *,
        node_id: int = 1,
        log_dirs: list[str | Path] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.tmp_dir = Path(tmp_dir)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.host = host
        self.port = 0
        self.log_dirs = [Path(d) for d in log_dirs] if log_dirs else [self.tmp_dir / "data"]
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        # Off unless a test asks for it: shipping adds two topics, their replication and the
        # shipper's CPU to every test cluster (tests/integration/telemetry turn it on).
        self.overrides.setdefault("trioka.telemetry.enable", "false")
        self.preexec_fn = preexec_fn
        self.extra_env = dict(env or {})
        self.config_file = self.tmp_dir / f"broker-{node_id}.toml"
        self.log_file = self.tmp_dir / f"broker-{node_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log_offset = 0

    # -- addresses -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.log_dirs[0]

    # -- lifecycle -------------------------------------------------------------------------

    def _write_config(self) -> None:
        dirs = ", ".join(json.dumps(str(d)) for d in self.log_dirs)
        self.config_file.write_text(
            f'"node.id" = {self.node_id}\n'
            f'"listeners" = ["PLAINTEXT://{self.host}:{self.port}"]\n'
            f'"log.dirs" = [{dirs}]\n'
        )

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", self.module, "--config", str(self.config_file)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait until it answers ApiVersions."""
        if self.running:
            raise RuntimeError(f"{self.what} {self.node_id} is already running (pid {self.pid})")
        self._write_config()
        env = {**os.environ, "TRIOKA_LOG_FORMAT": "json", **self.extra_env}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env,
                preexec_fn=self.preexec_fn,
                start_new_session=True,
            )
        self.starts += 1
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.cleanup()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with code {self.proc.returncode} while starting:\n"
                    + self.log_tail()
                )
            if self.port == 0:
                for event in self.events(since_start=True):
                    # A combined node's CONTROLLER listener is not where clients go.
                    if event.get("event") == "broker listening" and (
                        event.get("listener") not in self._controller_listener_names()
                    ):
                        self.port = int(event["port"])
                        break
            if self.port:
                try:
                    api_versions_blocking(self.host, self.port, timeout=1.0)
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"broker did not answer ApiVersions within {timeout}s:\n" + self.log_tail()
                )
            time.sleep(POLL_S)  # polling a condition under a deadline, not synchronisation

    def _controller_listener_names(self) -> set[str]:
        names = self.overrides.get("controller.listener.names", "")
        return {n.strip().upper() for n in names.strip("[]").replace('"', "").split(",") if n}

    # -- async twins ---------------------------------------------------------------------

    async def astart(self, within: float = 30.0) -> None:
        await trio.to_thread.run_sync(self.start, within)

    async def astop(self, within: float = 30.0) -> int:
        return await trio.to_thread.run_sync(self.stop, within)

    async def arestart(self, within: float = 30.0) -> None:
        await trio.to_thread.run_sync(self.restart, within)

    async def akill(self) -> int:
        return await trio.to_thread.run_sync(self.kill)

    async def await_exit(self, within: float = 30.0) -> int:
        return await trio.to_thread.run_sync(self.wait_exit, within)

    # -- logs ------------------------------------------------------------------------------

    def events(self, *, since_start: bool = False) -> list[dict[str, Any]]:
        """The broker's JSON log events (all starts, or only the current one)."""
        if not self.log_file.exists():
            return []
        with self.log_file.open("rb") as f:
            if since_start:
                f.seek(self._log_offset)
            data = f.read()
        out = []
        for line in data.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                out.append(event)
        return out

    def wait_for_event(
        self, name: str, timeout: float = 10.0, *, since_start: bool = True, **match: Any
    ) -> dict[str, Any]:
        """The first log event called `name` (with the given fields); polls under a deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events(since_start=since_start):
                if event.get("event") == name and all(event.get(k) == v for k, v in match.items()):
                    return event
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {name!r} event within {timeout}s:\n{self.log_tail()}")
            time.sleep(POLL_S)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
