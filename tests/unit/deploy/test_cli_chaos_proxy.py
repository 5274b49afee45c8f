"""`trioka chaos proxy`: bad flags are named; a real run relays and prints counters at Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import msgpack
import pytest
from click.testing import CliRunner

from deploy.cli.main import cli
from deploy.cluster.zookeeper import free_port
from protocol.framing import encode_frame


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--listen", "nope", "--target", "127.0.0.1:1"], "expected HOST:PORT"),
        (["--listen", ":1", "--target", "h:99999"], "expected HOST:PORT"),
        (["--listen", ":1", "--target", "h:1", "--drop-responses", "prodce"], "unknown api"),
        (["--listen", ":1", "--target", "h:1", "--drop-probability", "2"], "drop-probability"),
    ],
)
def test_bad_flags_are_named(args: list[str], problem: str) -> None:
    result = CliRunner().invoke(cli, ["chaos", "proxy", *args])
    assert result.exit_code == 2
    assert problem in result.output


def test_a_run_relays_and_prints_its_counters_at_interrupt() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        target = server.getsockname()[1]
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "deploy.cli", "chaos", "proxy", "--listen",
             f"127.0.0.1:{port}", "--target", f"127.0.0.1:{target}", "--seed", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            assert "proxy 127.0.0.1:" in proc.stderr.readline()
            with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                frame = encode_frame(msgpack.packb([3, 0, 1, "t", []]))
                client.sendall(frame)
                server.settimeout(10)
                upstream, _ = server.accept()
                with upstream:
                    upstream.settimeout(10)
                    assert upstream.recv(100) == frame
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    counters = json.loads(out.strip().splitlines()[-1])
    assert counters["connections"] == 1
    assert counters["requests_by_api"] == {"3": 1}
