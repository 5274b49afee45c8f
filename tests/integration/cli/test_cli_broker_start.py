"""`trioka broker start` refuses bad start-up conditions with one clear line, no traceback."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.integration.cli.test_cli_commands import trioka


def _error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    # The broker logs JSON events on stderr before failing; the error is the last plain line.
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert "Traceback" not in err
    plain = [line for line in err.splitlines() if line and not line.startswith("{")]
    assert len(plain) == 1 and plain[0].startswith("error: cannot start the broker: "), err
    return plain[0]


def test_log_dir_of_another_cluster_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text(
        "version=1\nnode.id=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n"
    )
    result = trioka("broker", "start", "--override", f"log.dirs={data}",
                    "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                    "--override", "cluster.id=BBBBBBBBBBBBBBBBBBBBBB")  # fmt: skip
    line = _error_line(result)
    assert "AAAAAAAAAAAAAAAAAAAAAA" in line and "BBBBBBBBBBBBBBBBBBBBBB" in line


def test_port_in_use_names_the_listener(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = trioka("broker", "start", "--override", f"log.dirs={tmp_path / 'data'}",
                        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}")  # fmt: skip
    line = _error_line(result)
    assert f"127.0.0.1:{port}" in line and "PLAINTEXT" in line
