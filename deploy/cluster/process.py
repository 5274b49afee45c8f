"""A child process started and controlled by this program, by pid: what the local cluster
supervisor's ZooKeeper and the test harnesses' brokers share."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


class ManagedProcess:
    """Signals, waits and clean-up for `self.proc`. Subclasses start it and name it."""

    what = "process"
    """How messages name the process ("zookeeper", "broker")."""

    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        raise NotImplementedError

    def log_tail(self, lines: int = 40) -> str:
        return ""

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.what} not started")
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit; returns its exit code (negative: killed by signal)."""
        if self.proc is None:
            raise RuntimeError(f"{self.what} not started")
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"{self.what} {self.pid} did not exit within {timeout}s:\n{self.log_tail()}"
            ) from None

    def signal(self, sig: int) -> None:
        if self.running:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM (graceful shutdown) without waiting."""
        self.signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (after SIGCONT, in case it is paused) and wait; returns the exit code."""
        if self.proc is None:
            raise RuntimeError(f"{self.what} not started")
        self.resume()
        self.terminate()
        return self.wait_exit(timeout)

    def kill(self) -> int:
        """SIGKILL and wait; returns the exit code (-9)."""
        if self.proc is None:
            raise RuntimeError(f"{self.what} not started")
        self.signal(signal.SIGKILL)
        return self.wait_exit(30)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop if running, then start again (same address, same data)."""
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
