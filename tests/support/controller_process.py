"""Test harness: a real controller process (`python -m deploy.node.controller`), one voter of a
Raft metadata quorum, on a port chosen before it starts (the voters must know each other).

    proc = ControllerProcess(tmp_path, 3001, port, voters="3001@127.0.0.1:P1,...",
                             cluster_id="...", overrides={"broker.session.timeout.ms": 3000})
    proc.start()                 # blocks until it logged "controller started" and answers
                                 # ApiVersions (deadline: timeout)
    proc.bootstrap               # "127.0.0.1:PORT" (the CONTROLLER listener)
    proc.stop(); proc.kill(); proc.restart(); proc.pause(); proc.resume(); proc.cleanup()
    proc.events(); proc.wait_for_event("controller active", timeout=10)

Its config is deploy.cluster.raft.controller_toml (what `trioka cluster up` writes); its
metadata log is `<tmp>/metadata`, its JSON log `<tmp>/controller-<id>.log` (appended across
restarts). Async twins as BrokerProcess: `astart`, `astop`, `arestart`, `akill`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deploy.cluster.raft import controller_toml
from tests.support.broker_process import BrokerProcess, BrokerStartError
from tests.support.wire import api_versions_blocking

POLL_S = 0.02

__all__ = ["ControllerProcess", "ControllerStartError"]


class ControllerStartError(BrokerStartError):
    """The controller did not come up in time, or exited while starting (the log says why)."""


class ControllerProcess(BrokerProcess):
    """One controller process under test. Not started until `start()`. Shares BrokerProcess's
    log reading, signals and async twins; only its config and readiness differ."""

    what = "controller"
    module = "deploy.node.controller"

    def __init__(
        self,
        tmp_dir: str | Path,
        node_id: int,
        port: int,
        *,
        voters: str,
        cluster_id: str,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(tmp_dir, overrides, node_id=node_id, env=env, host=host)
        self.port = port
        self.voters = voters
        self.cluster_id = cluster_id
        self.metadata_dir = self.tmp_dir / "metadata"
        self.config_file = self.tmp_dir / f"controller-{node_id}.toml"
        self.log_file = self.tmp_dir / f"controller-{node_id}.log"

    def _write_config(self) -> None:
        self.config_file.write_text(
            controller_toml(
                self.node_id,
                self.host,
                self.port,
                self.voters,
                self.metadata_dir,
                self.cluster_id,
                {},
            )
        )

    def _listener_uses_tls(self) -> bool:
        protocols = self.overrides.get("listener.security.protocol.map", "")
        return any(
            entry.strip().upper() in ("CONTROLLER:SSL", "CONTROLLER:SASL_SSL")
            for entry in protocols.split(",")
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ControllerStartError(
                    f"controller {self.node_id} exited with code {self.proc.returncode} while "
                    f"starting:\n{self.log_tail()}"
                )
            if any(e.get("event") == "controller started" for e in self.events(since_start=True)):
                if self._listener_uses_tls():
                    return  # bound and serving; a plaintext ApiVersions could not tell more
                try:
                    api_versions_blocking(self.host, self.port, timeout=1.0)
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise ControllerStartError(
                    f"controller {self.node_id} did not serve within {timeout}s:\n"
                    + self.log_tail()
                )
            time.sleep(POLL_S)  # polling a condition under a deadline, not synchronisation
