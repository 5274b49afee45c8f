"""`trioka cluster up|status|describe|logs|kill|pause|resume|restart|start|partition|heal|down`:
the local cluster supervisor (deploy.cluster.supervisor, deploy.cluster.network) on the command line. Raft mode (the default) runs N controller processes and the
brokers; `--mode zk` a ZooKeeper and the brokers."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click
import trio
from rich.table import Table

from client import Admin
from deploy.cli.options import property_option
from deploy.cli.profiles import DEFAULT_PROFILE, save_profile
from deploy.cluster import network as cluster_network
from deploy.cluster import node_logs
from deploy.cluster import supervisor as sup
from deploy.cluster.netns import NetnsError
from deploy.cluster.pids import node_alive, node_paused
from deploy.cluster.quorum import QuorumReport
from deploy.cluster.raft import quorum_report
from protocol.config_defs import ConfigError
from protocol.errors import KafkaError, TriokaError

T = TypeVar("T")

DEFAULT_CLUSTER_DIR = ".trioka-cluster"


def cluster_dir_option(fn: Any) -> Any:
    return click.option(
        "--dir",
        "cluster_dir",
        type=click.Path(file_okay=False),
        default=lambda: os.environ.get("TRIOKA_CLUSTER_DIR", DEFAULT_CLUSTER_DIR),
        show_default=DEFAULT_CLUSTER_DIR,
        help="Directory of the cluster: state file, the processes' dirs and logs "
        "(env TRIOKA_CLUSTER_DIR).",
    )(fn)


def _cluster_call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    from deploy.cli.common import fail
    from deploy.cluster.zookeeper import ZooKeeperStartError

    try:
        return fn(*args, **kwargs)
    except (sup.ClusterError, ZooKeeperStartError, NetnsError) as exc:
        fail(str(exc))
    except ConfigError as exc:
        fail(exc.message)


def _quorum(state: sup.ClusterState) -> tuple[QuorumReport | None, str | None]:
    """The controller quorum as its leader describes it (Raft mode), or why there is none."""
    if not any(node_alive(c) for c in state.controllers):
        return None, "no controller is running" if state.controllers else None
    # A paused controller accepts connections and never answers: ask only the others.
    awake = [c for c in state.controllers if node_alive(c) and not node_paused(c)]
    if not awake:
        return None, "every running controller is paused"
    try:
        bootstrap = ",".join(f"{c.host}:{c.port}" for c in awake)
        client = sup.controller_client_config(state)
        return trio.run(partial(quorum_report, bootstrap, client=client)), None
    except (KafkaError, OSError) as exc:
        return None, str(exc)


@click.group()
def cluster() -> None:
    """Supervise a local cluster: controllers (Raft mode) or ZooKeeper (ZK mode), plus brokers."""


@cluster.command("up")
@cluster_dir_option
@click.option("--mode", type=click.Choice(sup.MODES), default="raft", show_default=True,
              help="raft: controller processes hold the metadata; zk: a ZooKeeper does.")  # fmt: skip
@click.option("--brokers", "-n", type=int, default=3, show_default=True,
              help="Number of brokers (node ids 1..N).")  # fmt: skip
@click.option("--controllers", type=int, default=3, show_default=True,
              help="Raft mode: number of controllers (node ids 3001..).")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address every process listens on.")  # fmt: skip
@click.option("--base-port", type=click.IntRange(0, 65535 - 300), default=9092,
              envvar="TRIOKA_BASE_PORT", show_default=True,
              help="Broker N's clients listen on BASE_PORT+N-1 (9092, 9093, ...), its INTERNAL "
              "listener on BASE_PORT+100+N-1, controller 3001+I on BASE_PORT+200+I; 0: free "
              "ports (env TRIOKA_BASE_PORT).")  # fmt: skip
@click.option("--zookeeper-port", type=int, default=0, show_default="a free port",
              help="ZK mode: ZooKeeper's client port.")  # fmt: skip
@click.option("--session-timeout-ms", type=int, default=sup.DEFAULT_SESSION_TIMEOUT_MS,
              show_default=True, help="How soon a dead broker is noticed: "
              "broker.session.timeout.ms (raft) or zookeeper.session.timeout.ms (zk).")  # fmt: skip
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Broker config for every broker, and for every controller when it is a "
              "controller config too (num.partitions, ...) (repeatable).")  # fmt: skip
@click.option("--controller-override", "controller_overrides", multiple=True,
              metavar="KEY=VALUE", help="Raft mode: config for every controller (repeatable).")  # fmt: skip
@click.option("--netns", "use_netns", is_flag=True,
              help="Every process in its own network namespace with its own address (root; "
              "ip and iptables), so `trioka cluster partition` can cut nodes apart.")  # fmt: skip
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for the cluster to be ready.")  # fmt: skip
@click.option("--profile", "profile_name", default=DEFAULT_PROFILE, show_default=True,
              help="Save the cluster as this profile and make it current: client commands "
              "without -b then use it (`trioka profile list`).")  # fmt: skip
@click.option("--secure", is_flag=True,
              help="TLS on every listener (a dev CA in DIR/tls), SCRAM logins for clients, "
              "certificates between nodes, the authorizer on; the admin's login is written to "
              "DIR/client.properties (--command-config).")  # fmt: skip
def cluster_up(cluster_dir: str, mode: str, brokers: int, controllers: int, host: str,
               base_port: int, zookeeper_port: int, session_timeout_ms: int,
               overrides: tuple[str, ...], controller_overrides: tuple[str, ...],
               use_netns: bool, timeout: float, profile_name: str,
               secure: bool) -> None:  # fmt: skip
    """Start the cluster in the background; prints the bootstrap servers.

    A directory holding a stopped cluster starts it again with its mode, ports and data."""
    from deploy.cli.common import fail, run

    if mode == "raft" and zookeeper_port:
        fail("--zookeeper-port is for --mode zk (a Raft-mode cluster has no ZooKeeper)")
    if mode == "zk" and controller_overrides:
        fail("--controller-override is for --mode raft (a ZK-mode cluster has no controllers)")
    state = _cluster_call(
        sup.cluster_up, Path(cluster_dir), mode=mode, brokers=brokers, controllers=controllers,
        host=host, base_port=base_port, zookeeper_port=zookeeper_port,
        session_timeout_ms=session_timeout_ms, overrides=list(overrides),
        controller_overrides=list(controller_overrides), netns=use_netns, timeout=timeout,
        secure=secure,
    )  # fmt: skip
    try:
        report = run(partial(sup.wait_ready, state, within=timeout))
    except click.ClickException:
        click.echo("the cluster did not become ready; stopping it", err=True)
        sup.cluster_down(Path(cluster_dir), timeout=10.0)
        raise
    if state.zookeeper is not None:
        where = f"ZooKeeper {state.zookeeper_connect} (pid {state.zookeeper.pid})"
        controller = f"controller {report.controller_id}"
    else:
        quorum, _ = _quorum(state)
        where = f"controllers {','.join(str(c.node_id) for c in state.controllers)}"
        controller = f"active controller {quorum.leader_id if quorum else 'unknown'}"
    click.echo(
        f"cluster up in {state.dir} ({state.mode} mode): {where}, {len(state.brokers)} brokers, "
        f"{controller}",
        err=True,
    )
    properties = Path(state.dir) / "client.properties"
    save_profile(profile_name, state.bootstrap, Path(state.dir),
                 properties if state.secure else None)  # fmt: skip
    if state.secure:
        click.echo(
            f"secure: TLS + SCRAM; clients log in as the admin (a super user) with "
            f"--command-config {properties}, or without -b through the profile",
            err=True,
        )
    click.echo(f"profile {profile_name!r} is current: client commands without -b use it",
               err=True)  # fmt: skip
    click.echo(state.bootstrap)


def _roles(state: sup.ClusterState, alive: dict[str, bool], report: sup.ClusterReport | None,
           quorum: QuorumReport | None) -> dict[str, str]:  # fmt: skip
    """Each running process's role: a controller's Raft role, a broker's standing."""
    roles: dict[str, str] = {}
    statuses = {r.node_id: r.status for r in quorum.replicas} if quorum else {}
    for n in state.controllers:
        if alive[n.name]:
            status = statuses.get(n.node_id)
            roles[n.name] = {"Leader": "active controller", "Follower": "standby"}.get(
                status or "", "unknown"
            )
    live = {b.node_id for b in report.brokers} if report else set()
    for b in state.brokers:
        if report is None or not alive[b.name]:
            continue
        if state.mode == "zk" and b.node_id == report.controller_id:
            roles[b.name] = "controller"
        elif b.node_id in live:
            roles[b.name] = "broker"
        else:
            roles[b.name] = "fenced" if state.mode == "raft" else "not registered"
    return roles


@cluster.command("status")
@cluster_dir_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def cluster_status(cluster_dir: str, as_json: bool) -> None:
    """Processes (pid, alive, role), the quorum (Raft mode), brokers and partition health."""
    from deploy.cli.common import stdout_console

    state = _cluster_call(sup.read_state, Path(cluster_dir))
    nodes = state.nodes
    alive = {n.name: node_alive(n) for n in nodes}
    paused = {n.name: node_paused(n) for n in nodes}
    report = None
    error = None
    # A paused broker accepts connections but answers nothing: ask the running ones only.
    serving = ",".join(
        f"{b.host}:{b.port}" for b in state.brokers if alive[b.name] and not paused[b.name]
    )
    if serving:
        try:
            report = trio.run(partial(sup.describe_cluster, serving, timeout_ms=5000,
                                      client=sup.client_config(state)))  # fmt: skip
        except (TriokaError, OSError) as exc:
            error = str(exc)
    elif any(alive[b.name] for b in state.brokers):
        error = "every running broker is paused"
    quorum, quorum_error = _quorum(state)
    roles = _roles(state, alive, report, quorum)
    if as_json:
        out: dict[str, Any] = {
            "dir": state.dir,
            "mode": state.mode,
            "zookeeper_connect": state.zookeeper_connect or None,
            "controller_bootstrap": state.controller_bootstrap or None,
            "bootstrap": state.bootstrap,
            "processes": [
                {
                    "name": n.name,
                    "node_id": n.node_id,
                    "pid": n.pid,
                    "host": n.host,
                    "port": n.port,
                    "metrics_port": n.metrics_port or None,
                    "alive": alive[n.name],
                    "paused": paused[n.name],
                    "role": roles.get(n.name),
                    "log": n.log,
                }
                for n in nodes
            ],
            "quorum": {
                "leader_id": quorum.leader_id,
                "leader_epoch": quorum.leader_epoch,
                "high_watermark": quorum.high_watermark,
                "voters": quorum.current_voters,
                "observers": quorum.current_observers,
            }
            if quorum
            else None,
            "quorum_error": quorum_error,
            "controller_id": report.controller_id if report else None,
            "live_brokers": [b.node_id for b in report.brokers] if report else [],
            "partitions": report.partitions if report else None,
            "under_replicated": [list(p) for p in report.under_replicated] if report else None,
            "offline": [list(p) for p in report.offline] if report else None,
            "error": error,
            "network": {
                "subnet": state.network.subnet,
                "host_address": state.network.host_address,
                "prefix": state.network.prefix,
            }
            if state.network
            else None,
            "cuts": [list(pair) for pair in state.cuts],
        }
        click.echo(json.dumps(out))
        return
    console = stdout_console()
    table = Table("Process", "Pid", "Address", "Metrics", "Alive", "Role", box=None)
    for n in nodes:
        metrics = f"http://{n.host}:{n.metrics_port}/metrics" if n.metrics_port else ""
        table.add_row(n.name, str(n.pid), f"{n.host}:{n.port}", metrics,
                      _alive_text(alive[n.name], paused[n.name]), roles.get(n.name, ""))  # fmt: skip
    console.print(table)
    if state.network is not None:
        console.print(
            f"Network: {state.network.subnet} (host {state.network.host_address}, namespaces "
            f"{state.network.prefix}-*)"
        )
    for a, b in state.cuts:
        console.print(f"  cut: {a} <-> {b}")
    if quorum is not None:
        console.print(
            f"Quorum: leader {quorum.leader_id}\tepoch {quorum.leader_epoch}\t"
            f"high watermark {quorum.high_watermark}\tvoters {quorum.current_voters}\t"
            f"observers {quorum.current_observers}"
        )
    elif quorum_error:
        console.print(f"quorum unreachable: {quorum_error}")
    if report is None:
        console.print(f"cluster unreachable: {error}" if error else "no broker is running")
        return
    controller = "Controller" if state.mode == "zk" else "Controller (as brokers report it)"
    console.print(
        f"{controller}: {report.controller_id}\tLive brokers: "
        f"{','.join(str(b.node_id) for b in report.brokers)}\tTopics: {report.topics}\t"
        f"Partitions: {report.partitions}\tUnder-replicated: {len(report.under_replicated)}\t"
        f"Offline: {len(report.offline)}"
    )
    for what, partitions in (("under-replicated", report.under_replicated),
                             ("offline", report.offline)):  # fmt: skip
        for topic_name, numbers in _by_topic(partitions).items():
            console.print(f"  {what}: {topic_name} partitions {_ranges(numbers)}")


def _alive_text(alive: bool, paused: bool) -> str:
    return "paused" if paused else "yes" if alive else "no"


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic_name, partition in partitions:
        by_topic.setdefault(topic_name, []).append(partition)
    return by_topic


def _ranges(numbers: Iterable[int]) -> str:
    """ "0-49" for 50 partitions in a row, "0,2,5-7" otherwise: one line per topic even for
    __consumer_offsets's 50."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@cluster.command("describe")
@click.option("--bootstrap-server", "-b", default=None, metavar="HOST:PORT[,...]",
              help="Broker(s) to ask (default: the brokers of --dir's cluster).")  # fmt: skip
@cluster_dir_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object on stdout: cluster_id, controller_id, brokers (node_id, "
              "host, port, rack).")  # fmt: skip
@property_option
def cluster_describe(bootstrap_server: str | None, cluster_dir: str, as_json: bool,
                     properties: tuple[str, ...]) -> None:  # fmt: skip
    """The cluster id, the controller and the live brokers."""
    from deploy.cli.common import admin_props, emit_json, run, stdout_console

    if bootstrap_server is None:
        state = _cluster_call(sup.read_state, Path(cluster_dir))
        bootstrap_server = state.bootstrap
        # The cluster's own client settings (a --secure one's admin login), then -X.
        properties = (*(f"{k}={v}" for k, v in sup.client_config(state).items()), *properties)

    async def go() -> Any:
        async with Admin(admin_props(bootstrap_server, properties)) as admin:
            return await admin.describe_cluster()

    description = run(go)
    if as_json:
        brokers = [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                   for b in description.brokers]  # fmt: skip
        emit_json({"cluster_id": description.cluster_id,
                   "controller_id": description.controller_id, "brokers": brokers})  # fmt: skip
        return
    console = stdout_console()
    console.print(f"ClusterId: {description.cluster_id}\tController: {description.controller_id}")
    table = Table("Broker", "Host", "Port", "Rack", "Controller", box=None)
    for b in description.brokers:
        is_controller = "yes" if b.node_id == description.controller_id else ""
        table.add_row(str(b.node_id), b.host, str(b.port), b.rack or "", is_controller)
    console.print(table)


@cluster.command("down")
@cluster_dir_option
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="Seconds each process gets after SIGTERM before SIGKILL.")  # fmt: skip
def cluster_down(cluster_dir: str, timeout: float) -> None:
    """Stop the brokers (controlled shutdown), then the controllers (the active one last) or
    ZooKeeper: SIGTERM, then SIGKILL."""
    state = _cluster_call(sup.read_state, Path(cluster_dir))
    controller = None
    if state.mode == "zk" and any(node_alive(b) for b in state.brokers):
        try:
            controller = trio.run(
                partial(
                    sup.describe_cluster,
                    state.bootstrap,
                    timeout_ms=3000,
                    client=sup.client_config(state),
                )
            ).controller_id
        except (TriokaError, OSError):
            controller = None
    quorum, _ = _quorum(state)
    for node, outcome in sup.cluster_down(
        Path(cluster_dir), timeout=timeout, controller_id=controller,
        active_controller_id=quorum.leader_id if quorum else None,
    ):  # fmt: skip
        click.echo(f"{node.name} (pid {node.pid}): {outcome}", err=True)


@cluster.command("kill")
@click.argument("node_id", type=int)
@cluster_dir_option
@click.option("--signal", "signal_name", default="KILL", show_default=True,
              type=click.Choice(["KILL", "TERM", "STOP", "CONT"], case_sensitive=False),
              help="Signal to send.")  # fmt: skip
def cluster_kill(node_id: int, cluster_dir: str, signal_name: str) -> None:
    """Send a signal to broker or controller NODE_ID (0: ZooKeeper), e.g. to test a failover."""
    sig = signal.Signals[f"SIG{signal_name.upper()}"]
    node = _cluster_call(sup.kill_node, Path(cluster_dir), node_id, sig)
    click.echo(f"sent {sig.name} to {node.name} (pid {node.pid})", err=True)


@cluster.command("start")
@click.argument("node_id", type=int)
@cluster_dir_option
@click.option("--timeout", type=float, default=30.0, show_default=True)
def cluster_start(node_id: int, cluster_dir: str, timeout: float) -> None:
    """Start stopped broker or controller NODE_ID again (same config, port and data)."""
    node = _cluster_call(sup.start_node, Path(cluster_dir), node_id, timeout=timeout)
    click.echo(f"started {node.name} (pid {node.pid}) on {node.host}:{node.port}", err=True)


@cluster.command("restart")
@click.argument("node_id", type=int)
@cluster_dir_option
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="Seconds the node gets after SIGTERM before SIGKILL.")  # fmt: skip
@click.option("--start-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait until it serves again.")  # fmt: skip
def cluster_restart(node_id: int, cluster_dir: str, timeout: float, start_timeout: float) -> None:
    """Stop node NODE_ID gracefully (SIGTERM, SIGKILL after --timeout), then start it with the
    same config, port and data; returns once it serves."""
    node = _cluster_call(sup.restart_node, Path(cluster_dir), node_id, timeout=timeout,
                         start_timeout=start_timeout)  # fmt: skip
    click.echo(f"restarted {node.name} (pid {node.pid}) on {node.host}:{node.port}", err=True)


@cluster.command("pause")
@click.argument("node_id", type=int)
@cluster_dir_option
def cluster_pause(node_id: int, cluster_dir: str) -> None:
    """SIGSTOP node NODE_ID (0: ZooKeeper): it answers nothing until `resume`, and its sessions
    expire meanwhile (a zombie, once resumed)."""
    node = _cluster_call(sup.pause_node, Path(cluster_dir), node_id)
    click.echo(f"paused {node.name} (pid {node.pid})", err=True)


@cluster.command("resume")
@click.argument("node_id", type=int)
@cluster_dir_option
def cluster_resume(node_id: int, cluster_dir: str) -> None:
    """SIGCONT node NODE_ID after `pause`."""
    node = _cluster_call(sup.resume_node, Path(cluster_dir), node_id)
    click.echo(f"resumed {node.name} (pid {node.pid})", err=True)


@cluster.command("logs")
@click.argument("node_id", type=int)
@cluster_dir_option
@click.option("--tail", "-n", "lines", type=click.IntRange(min=0), default=None,
              show_default="all", help="Print only the last LINES lines.")  # fmt: skip
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until Ctrl-C.")
def cluster_logs(node_id: int, cluster_dir: str, lines: int | None, follow: bool) -> None:
    """The log of node NODE_ID (0: ZooKeeper), like `docker logs`."""
    from deploy.cli.common import fail

    path = _cluster_call(sup.node_log_path, Path(cluster_dir), node_id)
    try:
        tail, end = node_logs.tail_lines(path, lines)
    except FileNotFoundError:
        if not follow:
            fail(f"node {node_id} has no log yet ({path} does not exist)")
        tail, end = [], 0
    out = click.get_binary_stream("stdout")
    out.writelines(tail)
    out.flush()
    if not follow:
        return
    try:
        for line in node_logs.follow(path, end):
            out.write(line)
            out.flush()
    except KeyboardInterrupt:
        return


@cluster.command("partition", context_settings={"ignore_unknown_options": True})
@click.argument("nodes", nargs=-1)
@click.option("--isolate", "isolated", type=int, default=None, metavar="NODE",
              help="Cut NODE from every other node.")  # fmt: skip
@cluster_dir_option
def cluster_partition(nodes: tuple[str, ...], isolated: int | None, cluster_dir: str) -> None:
    """Cut NODE [NODE...] --from NODE [NODE...] apart: traffic between every pair across the two
    sides is dropped both ways (node ids; 0: ZooKeeper). Needs a cluster started with --netns;
    `heal` undoes it."""
    from deploy.cli.common import fail

    if isolated is not None:
        if nodes:
            fail("--isolate NODE takes no other nodes (it cuts NODE from all of them)")
        state = _cluster_call(cluster_network.isolate_node, Path(cluster_dir), isolated)
    else:
        side, other = _partition_sides(nodes)
        state = _cluster_call(cluster_network.partition_nodes, Path(cluster_dir), side, other)
    click.echo(f"cuts now: {', '.join(f'{a} <-> {b}' for a, b in state.cuts)}", err=True)


def _partition_sides(args: tuple[str, ...]) -> tuple[list[int], list[int]]:
    from deploy.cli.common import fail

    if args.count("--from") != 1:
        fail(
            "usage: trioka cluster partition NODE [NODE...] --from NODE [NODE...] (or --isolate NODE)"
        )
    at = args.index("--from")
    try:
        return [int(a) for a in args[:at]], [int(a) for a in args[at + 1 :]]
    except ValueError:
        fail(
            f"nodes are node ids (a broker id, a controller id, 0 for ZooKeeper): {' '.join(args)}"
        )


@cluster.command("heal")
@cluster_dir_option
def cluster_heal(cluster_dir: str) -> None:
    """Remove every cut `partition` made."""
    _cluster_call(cluster_network.heal_network, Path(cluster_dir))
    click.echo("healed: no cuts", err=True)
