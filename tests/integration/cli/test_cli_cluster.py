"""`trioka cluster`: the local supervisor's user errors (the running cluster is tested in
tests/integration/cluster)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.cli.test_cli_commands import one_error_line, trioka


def test_cluster_status_without_a_cluster_names_the_directory(tmp_path: Path) -> None:
    line = one_error_line(trioka("cluster", "status", "--dir", str(tmp_path / "none")))
    assert "no cluster in" in line and "trioka cluster up" in line


def test_cluster_down_without_a_cluster_is_an_error(tmp_path: Path) -> None:
    line = one_error_line(trioka("cluster", "down", "--dir", str(tmp_path)))
    assert "no cluster in" in line


def test_cluster_up_refuses_a_bad_override_before_starting_anything(tmp_path: Path) -> None:
    result = trioka("cluster", "up", "--dir", str(tmp_path), "--override", "no.such.key=1")
    line = one_error_line(result)
    assert "no.such.key" in line
    assert not (tmp_path / "cluster.json").exists()
    assert not (tmp_path / "zookeeper").exists()


def test_cluster_up_refuses_zero_brokers(tmp_path: Path) -> None:
    line = one_error_line(trioka("cluster", "up", "--dir", str(tmp_path), "--brokers", "0"))
    assert "--brokers must be at least 1" in line


def _status(cluster_dir: Path) -> dict[str, Any]:
    result = trioka("cluster", "status", "--dir", str(cluster_dir), "--json")
    assert result.returncode == 0, result.stderr.decode()
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def _wait_status(cluster_dir: Path, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        status = _status(cluster_dir)
        if condition(status):
            return status
        assert time.monotonic() < deadline, f"cluster status never matched: {status}"
        time.sleep(0.2)  # polling a condition under a deadline


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_zk_cluster_up_status_describe_kill_start_down(tmp_path: Path) -> None:
    cluster_dir = tmp_path / "c"
    pids: list[int] = []
    try:
        up = trioka("cluster", "up", "--dir", str(cluster_dir), "--mode", "zk", "--brokers", "2",
                    "--session-timeout-ms", "3000", timeout=120)  # fmt: skip
        assert up.returncode == 0, up.stderr.decode()
        bootstrap = up.stdout.decode().strip()
        assert len(bootstrap.split(",")) == 2
        status = _status(cluster_dir)
        pids = [p["pid"] for p in status["processes"]]
        assert status["bootstrap"] == bootstrap
        assert status["controller_id"] in (1, 2)
        assert sorted(status["live_brokers"]) == [1, 2]
        assert all(p["alive"] for p in status["processes"])
        metrics_ports = [p["metrics_port"] for p in status["processes"][1:]]
        assert all(metrics_ports) and len(set(metrics_ports)) == 2
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_ports[0]}/metrics") as scraped:
            assert b"kafka_controller_ControllerStats_LeaderElectionRateAndTimeMs" in scraped.read()

        described = trioka("cluster", "describe", "--dir", str(cluster_dir))
        assert described.returncode == 0, described.stderr.decode()
        text = described.stdout.decode()
        assert f"Controller: {status['controller_id']}" in text
        for address in bootstrap.split(","):
            assert address.split(":")[1] in text

        again = trioka("cluster", "up", "--dir", str(cluster_dir))
        assert "already running" in one_error_line(again)

        killed = trioka("cluster", "kill", "2", "--dir", str(cluster_dir))
        assert killed.returncode == 0, killed.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: s["live_brokers"] == [1])
        assert [p["alive"] for p in status["processes"]] == [True, True, False]

        started = trioka("cluster", "start", "2", "--dir", str(cluster_dir), timeout=120)
        assert started.returncode == 0, started.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert status["bootstrap"] == bootstrap  # same ports after a restart
        assert [p["metrics_port"] for p in status["processes"][1:]] == metrics_ports
        pids = [p["pid"] for p in status["processes"]]

        down = trioka("cluster", "down", "--dir", str(cluster_dir), timeout=120)
        assert down.returncode == 0, down.stderr.decode()
        assert down.stderr.decode().count(": stopped") == 3, down.stderr.decode()
        assert not any(_pid_alive(pid) for pid in pids)
        status = _status(cluster_dir)
        assert not any(p["alive"] for p in status["processes"])
    finally:
        if (cluster_dir / "cluster.json").exists():
            trioka("cluster", "down", "--dir", str(cluster_dir), "--timeout", "5", timeout=120)
