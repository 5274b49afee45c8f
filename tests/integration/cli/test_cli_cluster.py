"""`trioka cluster`: the local supervisor's user errors, and a whole life cycle (up, status,
kill, start, down) in ZK mode and in Raft mode (the default)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest
from protocol.messages.stop_replica import StopReplicaRequest
from tests.integration.cli.test_cli_commands import TRIOKA, one_error_line, trioka
from tests.support.broker_process import REPO_ROOT
from tests.support.wire import WireClient


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
        _inter_broker_requests_refused(bootstrap.split(",")[1])
        metrics_ports = [p["metrics_port"] for p in status["processes"][1:]]
        assert all(metrics_ports) and len(set(metrics_ports)) == 2
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_ports[0]}/metrics") as scraped:
            assert b"kafka_controller_controllerstats_leaderelectionrateandtimems" in scraped.read()

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


def test_a_secure_zk_cluster_takes_scram_logins_over_tls_and_keeps_them(tmp_path: Path) -> None:
    """`cluster up --secure`: clients log in with the admin's client.properties (SASL_SSL,
    SCRAM); a plaintext client, a wrong password and a user without ACLs are refused; the
    brokers replicate over mTLS; the login survives `down` and `up`. (The Raft-mode secure
    cluster: tests/chaos/test_chaos_runs.py.)"""
    cluster_dir = tmp_path / "c"
    try:
        up = trioka("cluster", "up", "--dir", str(cluster_dir), "--mode", "zk", "--brokers", "2",
                    "--secure", timeout=120)  # fmt: skip
        assert up.returncode == 0, up.stderr.decode()
        bootstrap = up.stdout.decode().strip()
        props = cluster_dir / "client.properties"
        assert props.stat().st_mode & 0o077 == 0
        assert "security.protocol=SASL_SSL" in props.read_text()
        login = ("-b", bootstrap, "--command-config", str(props))
        created = trioka("topic", "create", "sec", "--replication-factor", "2", *login)
        assert created.returncode == 0, created.stderr.decode()
        produced = trioka("produce", "sec", *login, stdin="a\nb\n")
        assert produced.returncode == 0, produced.stderr.decode()

        assert one_error_line(trioka("topic", "list", "-b", bootstrap, timeout=60))
        wrong = one_error_line(trioka("topic", "list", *login, "-X", "sasl.password=wrong"))
        assert "SASL_AUTHENTICATION_FAILED" in wrong or "Authentication failed" in wrong, wrong
        bob = trioka("user", "create", "bob", "--password", "bob-secret", *login)
        assert bob.returncode == 0, bob.stderr.decode()
        as_bob = ("-b", bootstrap, "-X", "security.protocol=SASL_SSL",
                  "-X", f"ssl.ca.location={cluster_dir / 'tls' / 'ca.pem'}",
                  "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=bob",
                  "-X", "sasl.password=bob-secret")  # fmt: skip
        refused = one_error_line(trioka("produce", "sec", *as_bob, stdin="c\n"))
        assert "TOPIC_AUTHORIZATION_FAILED" in refused or "authoriz" in refused.lower(), refused

        # `cluster up` saved a profile: commands without -b find the cluster and log in.
        (saved,) = json.loads(trioka("profile", "list", "--json").stdout)
        assert saved["current"] and saved["bootstrap"] == bootstrap
        assert saved["command_config"] == str(props)
        listed = trioka("topic", "list")
        assert listed.returncode == 0, listed.stderr.decode()
        assert "sec" in listed.stdout.decode().split()

        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert status["bootstrap"] == bootstrap
        down = trioka("cluster", "down", "--dir", str(cluster_dir), timeout=120)
        assert down.returncode == 0, down.stderr.decode()
        again = trioka("cluster", "up", "--dir", str(cluster_dir), timeout=120)
        assert again.returncode == 0, again.stderr.decode()
        consumed = trioka("consume", "sec", *login, "--from-beginning", "-c", "2")
        assert consumed.returncode == 0, consumed.stderr.decode()
        assert consumed.stdout.decode().split() == ["a", "b"]
    finally:
        if (cluster_dir / "cluster.json").exists():
            trioka("cluster", "down", "--dir", str(cluster_dir), "--timeout", "5", timeout=120)


def test_cluster_up_raft_refuses_zookeeper_options_and_zero_controllers(tmp_path: Path) -> None:
    line = one_error_line(trioka("cluster", "up", "--dir", str(tmp_path), "--zookeeper-port", "1"))
    assert "--zookeeper-port is for --mode zk" in line
    line = one_error_line(trioka("cluster", "up", "--dir", str(tmp_path), "--controllers", "0"))
    assert "--controllers must be at least 1" in line
    line = one_error_line(trioka("cluster", "up", "--dir", str(tmp_path), "--mode", "kraft"))
    assert "kraft" in line and "raft" in line and "zk" in line
    assert not (tmp_path / "cluster.json").exists()


def test_cluster_status_reads_a_state_file_from_before_raft_mode(tmp_path: Path) -> None:
    """A cluster.json written by issue 3's supervisor (no mode, a zookeeper) is a ZK cluster."""
    node = {"host": "127.0.0.1", "port": 1, "dir": str(tmp_path), "log": str(tmp_path / "x.log"),
            "command": [], "pid": 0, "start_ticks": 0, "metrics_port": 0}  # fmt: skip
    (tmp_path / "cluster.json").write_text(
        json.dumps(
            {
                "dir": str(tmp_path),
                "zookeeper": {**node, "name": "zookeeper", "node_id": 0},
                "brokers": [{**node, "name": "broker-1", "node_id": 1}],
                "zookeeper_connect": "127.0.0.1:1/trioka",
                "overrides": {},
            }
        )
    )
    status = _status(tmp_path)
    assert status["mode"] == "zk"
    assert [p["name"] for p in status["processes"]] == ["zookeeper", "broker-1"]
    assert not any(p["alive"] for p in status["processes"])
    assert status["quorum"] is None


def _free_base_port() -> int:
    """A base port whose cluster ports (2 brokers, 3 controllers) are all free now."""
    from deploy.cluster.layout import port_free

    for base in range(20_000, 30_000, 400):
        ports = [base, base + 1, base + 100, base + 101, base + 200, base + 201, base + 202]
        if all(port_free("127.0.0.1", p) for p in ports):
            return base
    raise AssertionError("no free block of ports between 20000 and 30000")


def _inter_broker_requests_refused(address: str) -> None:
    """The clients' listener (the recorded port) answers CLUSTER_AUTHORIZATION_FAILED to what
    only brokers and the controller send: they have a listener of their own (INTERNAL)."""
    host, port = address.rsplit(":", 1)

    async def ask() -> None:
        async with await WireClient.connect(host, int(port)) as c:
            for forged in (
                StopReplicaRequest(
                    controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=()
                ),
                FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=0, topics=()),
            ):
                answer = await c.request(forged)
                assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, forged

    trio.run(ask)


def test_raft_cluster_up_status_kill_start_down(tmp_path: Path) -> None:
    """Raft mode (the default): 3 controllers and 2 brokers; status shows the quorum's roles;
    the active controller is SIGKILLed and a standby takes over; a broker is killed and fenced,
    both start again; `down` stops the brokers, then the controllers; `up` starts the stopped
    cluster again."""
    cluster_dir = tmp_path / "c"
    base = _free_base_port()
    try:
        up = trioka("cluster", "up", "--dir", str(cluster_dir), "--brokers", "2",
                    "--session-timeout-ms", "3000", "--base-port", str(base),
                    timeout=120)  # fmt: skip
        assert up.returncode == 0, up.stderr.decode()
        assert "(raft mode)" in up.stderr.decode()
        bootstrap = up.stdout.decode().strip()
        # The documented ports: clients BASE, BASE+1; INTERNAL BASE+100...; controllers BASE+200...
        assert bootstrap == f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        broker_toml = (cluster_dir / "broker-2" / "broker.toml").read_text()
        assert f"INTERNAL://127.0.0.1:{base + 101}" in broker_toml
        assert f"3003@127.0.0.1:{base + 202}" in broker_toml
        taken = one_error_line(trioka("cluster", "up", "--dir", str(tmp_path / "other"),
                                      "--base-port", str(base)))  # fmt: skip
        assert f"port {base + 200} (controller-3001)" in taken and "--base-port" in taken, taken
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert status["mode"] == "raft" and status["zookeeper_connect"] is None
        names = [p["name"] for p in status["processes"]]
        assert names == ["controller-3001", "controller-3002", "controller-3003", "broker-1",
                         "broker-2"]  # fmt: skip
        assert all(p["alive"] for p in status["processes"])
        leader = status["quorum"]["leader_id"]
        assert status["quorum"]["voters"] == [3001, 3002, 3003]
        roles = {p["node_id"]: p["role"] for p in status["processes"]}
        assert roles[leader] == "active controller"
        assert sorted(roles[c] for c in (3001, 3002, 3003) if c != leader) == ["standby"] * 2
        assert roles[1] == roles[2] == "broker"
        _inter_broker_requests_refused(bootstrap.split(",")[0])
        text = trioka("cluster", "status", "--dir", str(cluster_dir)).stdout.decode()
        assert f"Quorum: leader {leader}" in text and "active controller" in text
        # Every process serves /metrics, controllers included, each on its own port.
        metrics_ports = {p["name"]: p["metrics_port"] for p in status["processes"]}
        assert all(metrics_ports.values()) and len(set(metrics_ports.values())) == 5
        url = f"http://127.0.0.1:{metrics_ports[f'controller-{leader}']}/metrics"
        with urllib.request.urlopen(url) as scraped:
            text = scraped.read().decode()
        assert f"kafka_server_raftmetrics_current_leader {leader}.0" in text
        assert "kafka_controller_kafkacontroller_activecontrollercount 1.0" in text

        killed = trioka("cluster", "kill", str(leader), "--dir", str(cluster_dir))
        assert killed.returncode == 0, killed.stderr.decode()
        assert f"controller-{leader}" in killed.stderr.decode()
        status = _wait_status(
            cluster_dir, lambda s: s["quorum"] is not None and s["quorum"]["leader_id"] != leader
        )
        assert status["quorum"]["leader_id"] in (3001, 3002, 3003)
        started = trioka("cluster", "start", str(leader), "--dir", str(cluster_dir), timeout=120)
        assert started.returncode == 0, started.stderr.decode()

        killed = trioka("cluster", "kill", "2", "--dir", str(cluster_dir))
        assert killed.returncode == 0, killed.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: s["live_brokers"] == [1])
        started = trioka("cluster", "start", "2", "--dir", str(cluster_dir), timeout=120)
        assert started.returncode == 0, started.stderr.decode()
        status = _wait_status(
            cluster_dir,
            lambda s: (
                sorted(s["live_brokers"]) == [1, 2] and all(p["alive"] for p in s["processes"])
            ),
        )
        assert status["bootstrap"] == bootstrap  # same ports after a restart
        assert {p["name"]: p["metrics_port"] for p in status["processes"]} == metrics_ports
        pids = [p["pid"] for p in status["processes"]]

        down = trioka("cluster", "down", "--dir", str(cluster_dir), timeout=120)
        assert down.returncode == 0, down.stderr.decode()
        lines = down.stderr.decode().splitlines()
        assert [line.split()[0] for line in lines][:2] == ["broker-1", "broker-2"], lines
        assert sum(": stopped" in line for line in lines) == 5, lines
        assert not any(_pid_alive(pid) for pid in pids)

        # `up` on the stopped cluster starts it again: same mode, ports, cluster id and data.
        again = trioka("cluster", "up", "--dir", str(cluster_dir), timeout=120)
        assert again.returncode == 0, again.stderr.decode()
        assert again.stdout.decode().strip() == bootstrap
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert status["mode"] == "raft" and status["quorum"]["voters"] == [3001, 3002, 3003]
    finally:
        if (cluster_dir / "cluster.json").exists():
            trioka("cluster", "down", "--dir", str(cluster_dir), "--timeout", "5", timeout=120)


def _process(status: dict[str, Any], name: str) -> dict[str, Any]:
    (process,) = [p for p in status["processes"] if p["name"] == name]
    return process


def _follow_until(cluster_dir: Path, node_id: int, action: Callable[[], None], wanted: str,
                  out_file: Path) -> str:  # fmt: skip
    """`trioka cluster logs NODE -f -n 0` while `action` runs, until `wanted` shows up; then
    Ctrl-C (SIGINT), which must end it cleanly. Returns what it printed."""
    with out_file.open("wb") as out:
        proc = subprocess.Popen(
            [*TRIOKA, "cluster", "logs", str(node_id), "-f", "-n", "0", "--dir",
             str(cluster_dir)], stdout=out, stderr=subprocess.PIPE, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip
    try:
        action()
        deadline = time.monotonic() + 60
        while wanted not in out_file.read_text():
            assert proc.poll() is None, proc.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"{wanted!r} never followed: {out_file.read_text()}"
            time.sleep(0.1)  # polling a condition under a deadline
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
        assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out_file.read_text()


def test_raft_cluster_logs_pause_resume_restart(tmp_path: Path) -> None:
    """`logs` prints a node's last lines and follows new ones; a paused broker shows as paused
    and is fenced past its session, and comes back on resume; `restart` brings a controller and
    a broker back on their ports; user errors are one line."""
    cluster_dir = tmp_path / "c"
    d = ("--dir", str(cluster_dir))
    try:
        up = trioka("cluster", "up", *d, "--brokers", "2", "--controllers", "1",
                    "--session-timeout-ms", "3000", timeout=120)  # fmt: skip
        assert up.returncode == 0, up.stderr.decode()
        bootstrap = up.stdout.decode().strip()
        _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])

        logs = trioka("cluster", "logs", "3001", "-n", "3", *d)
        assert logs.returncode == 0, logs.stderr.decode()
        lines = logs.stdout.decode().splitlines()
        assert len(lines) == 3 and all(json.loads(line)["event"] for line in lines)
        everything = trioka("cluster", "logs", "1", *d).stdout.decode()
        assert '"broker listening"' in everything and len(everything.splitlines()) > 3
        assert "no node 9" in one_error_line(trioka("cluster", "logs", "9", *d))

        paused = trioka("cluster", "pause", "2", *d)
        assert paused.returncode == 0, paused.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: s["live_brokers"] == [1])  # fenced
        assert _process(status, "broker-2")["paused"] and _process(status, "broker-2")["alive"]
        assert not _process(status, "broker-1")["paused"]
        table = trioka("cluster", "status", *d).stdout.decode()
        assert any(
            line.split()[:1] == ["broker-2"] and "paused" in line for line in table.splitlines()
        )
        resumed = trioka("cluster", "resume", "2", *d)
        assert resumed.returncode == 0, resumed.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert not _process(status, "broker-2")["paused"]

        pids = {p["name"]: p["pid"] for p in status["processes"]}
        restarted = trioka("cluster", "restart", "3001", *d, timeout=120)
        assert restarted.returncode == 0, restarted.stderr.decode()
        assert "restarted controller-3001" in restarted.stderr.decode()
        status = _wait_status(
            cluster_dir, lambda s: s["quorum"] is not None and s["quorum"]["leader_id"] == 3001
        )
        assert _process(status, "controller-3001")["pid"] != pids["controller-3001"]

        def restart_broker() -> None:
            result = trioka("cluster", "restart", "1", *d, timeout=120)
            assert result.returncode == 0, result.stderr.decode()

        followed = _follow_until(cluster_dir, 1, restart_broker, '"broker listening"',
                                 tmp_path / "followed.log")  # fmt: skip
        assert '"broker listening"' not in followed.splitlines()[0]  # -n 0: only new lines
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert _process(status, "broker-1")["pid"] != pids["broker-1"]
        assert status["bootstrap"] == bootstrap

        trioka("cluster", "kill", "2", *d)
        assert "broker-2 is not running" in one_error_line(trioka("cluster", "pause", "2", *d))
        restarted = trioka("cluster", "restart", "2", *d, timeout=120)  # a stopped node: started
        assert restarted.returncode == 0, restarted.stderr.decode()
        _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
    finally:
        if (cluster_dir / "cluster.json").exists():
            trioka("cluster", "down", *d, "--timeout", "5", timeout=120)


def test_zk_cluster_pause_the_controller_and_restart_zookeeper(tmp_path: Path) -> None:
    """ZK mode: the controller broker paused past its session loses the controller to the other
    broker and rejoins when resumed (a zombie controller); ZooKeeper (node 0) is paused,
    resumed, and restarted on its port, and the brokers stay registered."""
    cluster_dir = tmp_path / "c"
    d = ("--dir", str(cluster_dir))
    try:
        up = trioka("cluster", "up", *d, "--mode", "zk", "--brokers", "2",
                    "--session-timeout-ms", "3000", timeout=120)  # fmt: skip
        assert up.returncode == 0, up.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        controller = status["controller_id"]
        other = 3 - controller

        assert trioka("cluster", "pause", str(controller), *d).returncode == 0
        status = _wait_status(
            cluster_dir, lambda s: s["controller_id"] == other and s["live_brokers"] == [other]
        )
        assert _process(status, f"broker-{controller}")["paused"]
        assert trioka("cluster", "resume", str(controller), *d).returncode == 0
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        assert status["controller_id"] == other

        zk_log = trioka("cluster", "logs", "0", "-n", "50", *d).stdout.decode()
        assert "ZooKeeper" in zk_log or "zookeeper" in zk_log
        assert trioka("cluster", "pause", "0", *d).returncode == 0
        assert _process(_status(cluster_dir), "zookeeper")["paused"]
        assert trioka("cluster", "resume", "0", *d).returncode == 0
        zk = _process(_status(cluster_dir), "zookeeper")
        restarted = trioka("cluster", "restart", "0", *d, timeout=120)
        assert restarted.returncode == 0, restarted.stderr.decode()
        status = _wait_status(cluster_dir, lambda s: sorted(s["live_brokers"]) == [1, 2])
        new_zk = _process(status, "zookeeper")
        assert new_zk["alive"] and new_zk["pid"] != zk["pid"] and new_zk["port"] == zk["port"]
    finally:
        if (cluster_dir / "cluster.json").exists():
            trioka("cluster", "down", *d, "--timeout", "5", timeout=120)
