"""`trioka cluster`: the local supervisor's user errors (the running cluster is tested in
tests/integration/cluster)."""

from __future__ import annotations

from pathlib import Path

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
