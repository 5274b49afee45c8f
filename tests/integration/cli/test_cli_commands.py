"""The `trioka` CLI as a user runs it: real processes, a real broker, stdout/stderr/exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess

_SCRIPT = Path(sys.executable).parent / "trioka"
TRIOKA = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "deploy.cli"]


def trioka(
    *args: str, stdin: str | bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("TRIOKA_BOOTSTRAP_SERVER", None)
    return subprocess.run(
        [*TRIOKA, *args], input=data, capture_output=True, timeout=timeout, cwd=REPO_ROOT, env=env
    )


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    """Assert the command failed with exactly one `error:` line on stderr, and return it."""
    err = result.stderr.decode()
    assert result.returncode != 0, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert result.stdout == b""
    return lines[0]


def test_topic_lifecycle(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    created = trioka("topic", "create", "orders", "-b", b, "--partitions", "3",
                     "--replication-factor", "1", "--config", "retention.ms=3600000")  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert b"Created topic orders" in created.stderr
    listed = trioka("topic", "list", "-b", b)
    assert listed.returncode == 0 and "orders" in listed.stdout.decode().split()
    described = trioka("topic", "describe", "orders", "-b", b).stdout.decode()
    assert "PartitionCount: 3" in described and "retention.ms=3600000" in described
    assert "Leader" in described and "Isr" in described
    altered = trioka("topic", "alter-config", "orders", "-b", b, "--config", "retention.ms=7200000",
                     "--delete-config", "segment.ms")  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    assert "retention.ms=7200000" in trioka("topic", "describe", "orders", "-b", b).stdout.decode()
    assert trioka("topic", "create", "orders", "-b", b, "--if-not-exists").returncode == 0
    deleted = trioka("topic", "delete", "orders", "-b", b)
    assert deleted.returncode == 0, deleted.stderr
    deadline = time.monotonic() + 10
    while "orders" in trioka("topic", "list", "-b", b).stdout.decode().split():
        assert time.monotonic() < deadline, "topic still listed after delete"


def test_produce_and_consume_round_trip(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert trioka("topic", "create", "lines", "-b", b, "-p", "2").returncode == 0
    produced = trioka("produce", "lines", "-b", b, "--key-separator", ":", "--partition", "1",
                      "--acks", "1", "-H", "source=test", stdin="k1:v1\nk2:v2\nk3:v3\n")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    assert b"Produced 3 records" in produced.stderr

    raw = trioka("consume", "lines", "-b", b, "--from-beginning")
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout == b"v1\nv2\nv3\n"  # stdout carries the data and nothing else
    assert b"Processed a total of 3 messages" in raw.stderr

    js = trioka("consume", "lines", "-b", b, "--from-beginning", "--format", "json")
    rows = [json.loads(line) for line in js.stdout.decode().splitlines()]
    assert [(r["key"], r["value"], r["partition"], r["offset"]) for r in rows] == [
        ("k1", "v1", 1, 0), ("k2", "v2", 1, 1), ("k3", "v3", 1, 2)
    ]  # fmt: skip
    assert all(r["timestamp"] > 0 and r["headers"] == {"source": "test"} for r in rows)

    assert (
        trioka("consume", "lines", "-b", b, "--partition", "1", "--offset", "1").stdout
        == b"v2\nv3\n"
    )
    assert trioka("consume", "lines", "-b", b, "--offset", "-1").stdout == b"v3\n"
    assert (
        trioka("consume", "lines", "-b", b, "--from-beginning", "--max-messages", "2").stdout
        == b"v1\nv2\n"
    )
    keyed = trioka("consume", "lines", "-b", b, "--from-beginning", "--print-key")
    assert keyed.stdout == b"k1\tv1\nk2\tv2\nk3\tv3\n"
    latest = trioka("consume", "lines", "-b", b)  # default: latest, so nothing, and exit
    assert latest.returncode == 0 and latest.stdout == b""


def test_produce_json_values_and_files(broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker.bootstrap
    trioka("topic", "create", "docs", "-b", b)
    ok = trioka(
        "produce", "docs", "-b", b, "--format", "json", stdin='{"a": 1,  "b": [1, 2]}\n\n"x"\n'
    )
    assert ok.returncode == 0, ok.stderr
    source = tmp_path / "in.txt"
    source.write_bytes(b"from-file-1\nfrom-file-2")
    assert trioka("produce", "docs", "-b", b, "--file", str(source)).returncode == 0
    out = trioka("consume", "docs", "-b", b, "--from-beginning").stdout
    assert out == b'{"a":1,"b":[1,2]}\n"x"\nfrom-file-1\nfrom-file-2\n'
    bad = trioka("produce", "docs", "-b", b, "--format", "json", stdin="{oops\n")
    assert "line 1 is not valid JSON" in one_error_line(bad)
    nosep = trioka("produce", "docs", "-b", b, "-K", ":", stdin="no separator here\n")
    assert "line 1 has no key separator" in one_error_line(nosep)


def test_user_errors_are_one_line_and_exit_non_zero(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert "topic 'nope' does not exist" in one_error_line(trioka("consume", "nope", "-b", b))
    assert "topic 'nope' does not exist" in one_error_line(
        trioka("produce", "nope", "-b", b, stdin="x\n")
    )
    assert "does not exist" in one_error_line(trioka("topic", "describe", "nope", "-b", b))
    assert "does not exist" in one_error_line(trioka("topic", "delete", "nope", "-b", b))
    bad_name = one_error_line(trioka("topic", "create", "bad/name", "-b", b))
    assert "illegal characters" in bad_name
    trioka("topic", "create", "dup", "-b", b)
    assert "already exists" in one_error_line(trioka("topic", "create", "dup", "-b", b))
    bad_config = one_error_line(trioka("topic", "create", "cfg", "-b", b, "-c", "retention.ms=x"))
    assert "retention.ms" in bad_config
    assert "partition 9 does not exist" in one_error_line(
        trioka("consume", "dup", "-b", b, "--partition", "9")
    )


def test_usage_and_connection_errors_without_a_broker() -> None:
    unreachable = trioka("topic", "list", "-b", "127.0.0.1:1")
    assert unreachable.returncode == 1
    assert "cannot connect to broker 127.0.0.1:1: Connection refused" in one_error_line(unreachable)
    flag = trioka("consume", "t", "--no-such-flag")
    assert flag.returncode == 2 and "no-such-flag" in one_error_line(flag)
    assert trioka("consume", "t", "--offset", "soon").returncode == 2
    assert trioka("topic", "create").returncode == 2
    bad_prop = trioka("topic", "list", "-b", "127.0.0.1:1", "-X", "lingr.ms=1")
    assert "lingr.ms" in one_error_line(bad_prop)
    assert "unknown broker config 'no.such.key'" in one_error_line(
        trioka("broker", "start", "--override", "no.such.key=1")
    )


def test_consume_follow_prints_new_records(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    trioka("topic", "create", "live", "-b", b)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    follower = subprocess.Popen([*TRIOKA, "consume", "live", "-b", b, "--follow"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)  # fmt: skip
    try:
        # --follow starts at the end; keep producing until the follower has seen one record
        assert follower.stdout is not None
        os.set_blocking(follower.stdout.fileno(), False)
        seen = b""
        deadline = time.monotonic() + 30
        while b"hello" not in seen:
            assert time.monotonic() < deadline, "follower printed nothing"
            assert follower.poll() is None, follower.stderr.read() if follower.stderr else ""
            trioka("produce", "live", "-b", b, stdin="hello\n")
            seen += follower.stdout.read() or b""
    finally:
        follower.send_signal(signal.SIGINT)
        try:
            follower.wait(timeout=10)
        except subprocess.TimeoutExpired:
            follower.kill()
            follower.wait()


def test_perf_produce_and_consume(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    trioka("topic", "create", "perf", "-b", b, "-p", "2")
    produced = trioka("perf", "produce", "--topic", "perf", "--num-records", "3000",
                      "--record-size", "100", "-b", b, "--json")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    result = json.loads(produced.stdout)
    assert result["records"] == 3000 and result["failed"] == 0
    assert result["records_per_sec"] > 0 and result["latency_p99_ms"] >= result["latency_p50_ms"]
    text = trioka("perf", "produce", "-t", "perf", "-n", "100", "-s", "10", "-b", b)
    assert b"records sent" in text.stdout and b"99th" in text.stdout
    consumed = trioka("perf", "consume", "--topic", "perf", "--messages", "3100", "-b", b, "--json")
    assert consumed.returncode == 0, consumed.stderr
    assert json.loads(consumed.stdout)["records"] == 3100


def test_broker_start_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRIOKA_LOG_FORMAT": "json"}
    log = tmp_path / "broker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*TRIOKA, "broker", "start", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={tmp_path / 'data'}"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        port = None
        deadline = time.monotonic() + 30
        while port is None:
            assert time.monotonic() < deadline, log.read_text()
            assert proc.poll() is None, log.read_text()
            for line in log.read_text().splitlines():
                if '"broker listening"' in line:
                    port = json.loads(line)["port"]
            time.sleep(0.02)  # polling a condition under a deadline
        listed = trioka("topic", "list", "-b", f"127.0.0.1:{port}")
        assert listed.returncode == 0, listed.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("args", [["--help"], ["topic", "--help"], ["perf", "produce", "--help"]])
def test_help(args: list[str]) -> None:
    result = trioka(*args)
    assert result.returncode == 0 and b"Usage: trioka" in result.stdout


def test_json_on_every_list_and_describe(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert (
        trioka("topic", "create", "js", "-b", b, "-p", "2", "-c", "retention.ms=60000").returncode
        == 0
    )
    assert trioka("produce", "js", "-b", b, "--partition", "1", stdin="a\nb\n").returncode == 0
    assert (
        trioka("consume", "js", "-b", b, "--group", "readers", "--from-beginning").returncode == 0
    )

    def document(*args: str) -> object:
        result = trioka(*args, "-b", b, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)  # one document: a second line would not parse

    (listed,) = [t for t in document("topic", "list") if t["name"] == "js"]
    assert listed["partitions"] == 2 and listed["replication_factor"] == 1
    assert listed["internal"] is False and listed["topic_id"]
    (described,) = document("topic", "describe", "js")
    assert described["configs"] == {"retention.ms": "60000"}
    assert described["partition_count"] == 2 and described["replication_factor"] == 1
    assert described["partitions"][1] == {"partition": 1, "leader": 1, "leader_epoch": 0,
                                          "replicas": [1], "isr": [1], "offline_replicas": []}  # fmt: skip
    assert {"group": "readers", "state": "Empty", "protocol_type": "consumer",
            "coordinator": 1} in document("group", "list")  # fmt: skip
    group = document("group", "describe", "readers")
    assert group["group"] == "readers" and group["state"] == "Empty" and group["members"] == []
    assert group["offsets"] == [
        {"topic": "js", "partition": 0, "current_offset": 0, "log_end_offset": 0, "lag": 0,
         "consumer_id": None, "host": None, "client_id": None},
        {"topic": "js", "partition": 1, "current_offset": 2, "log_end_offset": 2, "lag": 0,
         "consumer_id": None, "host": None, "client_id": None},
    ]  # fmt: skip
    assert document("group", "describe", "readers", "--members") == group  # --json: all of it
    cluster = document("cluster", "describe")
    assert cluster["controller_id"] == 1 and cluster["cluster_id"]
    assert cluster["brokers"] == [{"node_id": 1, "host": broker.host, "port": broker.port,
                                   "rack": None}]  # fmt: skip
    assert document("reassign", "--list") == []
    assert document("acl", "list") == [] and document("user", "list") == []


def test_an_unknown_group_is_one_error_whatever_is_asked(broker: BrokerProcess) -> None:
    for extra in ([], ["--members"], ["--members", "--verbose"], ["--state"], ["--json"]):
        result = trioka("group", "describe", "nosuchgroup", "-b", broker.bootstrap, *extra)
        assert one_error_line(result) == "error: Consumer group 'nosuchgroup' does not exist."
        assert result.returncode == 1


def test_x_wins_over_defaults_and_bad_values_are_refused(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRIOKA_CONFIG_DIR", str(tmp_path))  # no profile: -b's default is 9092
    b = broker.bootstrap
    assert trioka("topic", "create", "xs", "-X", f"bootstrap.servers={b}").returncode == 0
    assert trioka("produce", "xs", "-b", b, stdin="one\ntwo\n").returncode == 0
    # the start of a consumer without --group: auto.offset.reset, latest unless -X says
    assert trioka("consume", "xs", "-b", b).stdout == b""
    early = trioka("consume", "xs", "-b", b, "-X", "auto.offset.reset=earliest")
    assert early.stdout == b"one\ntwo\n", early.stderr
    assert trioka("consume", "xs", "-b", b, "-X", "group.id=by-x", "-X",
                  "auto.offset.reset=earliest").stdout == b"one\ntwo\n"  # fmt: skip
    assert "by-x" in trioka("group", "list", "-b", b).stdout.decode().split()
    bad = trioka("produce", "xs", "-b", b, "-X", "acks=7", stdin="three\n")
    assert bad.returncode == 2
    line = "error: Invalid value 7 for configuration acks: String must be one of: all, -1, 0, 1"
    assert one_error_line(bad) == line
    both = trioka("produce", "xs", "-b", b, "--acks", "1", "-X", "acks=all", stdin="three\n")
    assert "Can't simultaneously specify --acks 1 and 'acks=all'" in one_error_line(both)
    assert trioka("consume", "xs", "-b", b, "--from-beginning").stdout == b"one\ntwo\n"


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", b"_trioka_completion()"), ("zsh", b"#compdef trioka"), ("fish", b"complete ")],
)
def test_shell_completion_scripts(
    shell: str, marker: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_TRIOKA_COMPLETE", f"{shell}_source")
    result = trioka()
    assert result.returncode == 0 and marker in result.stdout, result.stderr
