"""The cluster's processes by pid (the pids cluster.json keeps): whether a node still runs or is
paused, stopping it, starting a command in its own session.

    node_alive(node); node_paused(node)        # /proc/<pid>/stat: state and start time
    stop_node(node, timeout)                   # SIGCONT + SIGTERM, SIGKILL after `timeout` s
    pid = spawn(command, log_file, cwd, env)   # its own session: it outlives the supervisor

A pid is signalled only while /proc says it is still the process that was started (its start
time matches the one recorded), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from deploy.cluster.state import ClusterError, NodeRecord

POLL_S = 0.05


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) from /proc/<pid>/stat (fields 3 and 22); None when there is no such
    process or it has exited (a zombie not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[0], int(fields[19])


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time); None when there is no such process."""
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def node_alive(node: NodeRecord) -> bool:
    """True while the process started for `node` is running (not a reused pid)."""
    return node.pid > 0 and start_ticks(node.pid) == node.start_ticks


def node_paused(node: NodeRecord) -> bool:
    """True while the process started for `node` is stopped by a signal (/proc state T), as
    `pause_node` leaves it."""
    stat = _proc_stat(node.pid) if node.pid > 0 else None
    return stat is not None and stat[1] == node.start_ticks and stat[0] == "T"


def reap(pid: int) -> None:
    # Our own child (started in this process) would stay a zombie until reaped.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def wait_gone(node: NodeRecord, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while node_alive(node):
        reap(node.pid)
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)  # polling a condition under a deadline
    return True


def stop_node(node: NodeRecord, timeout: float = 30.0) -> str:
    """SIGTERM (after SIGCONT, in case it is paused), then SIGKILL after `timeout` s.
    Returns "stopped", "killed" or "not running"."""
    if not node_alive(node):
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(node.pid, signal.SIGCONT)
        os.kill(node.pid, signal.SIGTERM)
    if wait_gone(node, timeout):
        return "stopped"
    with contextlib.suppress(ProcessLookupError):
        os.kill(node.pid, signal.SIGKILL)
    wait_gone(node, 30.0)
    return "killed"


def spawn(command: Sequence[str], log_file: Path, cwd: Path, env: Mapping[str, str]) -> int:
    with log_file.open("ab") as out:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    # Popen would warn that the child outlives it: the supervisor hands it over on purpose.
    proc.returncode = 0
    return proc.pid


def wait_for(condition: Callable[[], bool], timeout: float, failure: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ClusterError(f"{failure} within {timeout:g} s")
        time.sleep(POLL_S)  # polling a condition under a deadline
