"""What a node process has once, handed to every component that needs it: its clock and its
failpoints. Built by the process's `start` from its environment (a bad failpoint spec is a
one-line startup error); in-process runs (tests, benchmarks) get the system clock and no
failpoints unless they pass their own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from deploy.node.failpoints import ENV_VAR, Failpoints
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.config_defs import ConfigError


@dataclass(frozen=True)
class NodeRuntime:
    clock: Clock = SYSTEM_CLOCK
    failpoints: Failpoints = field(default_factory=Failpoints)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> NodeRuntime:
        """The system clock and the failpoints of `TRIOKA_FAILPOINTS` (deploy.node.failpoints);
        ConfigError naming the variable when its spec is bad."""
        try:
            return cls(failpoints=Failpoints.from_environ(environ))
        except ValueError as exc:
            raise ConfigError(f"{ENV_VAR}: {exc}") from None
