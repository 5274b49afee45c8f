"""Per-node network namespaces for a local cluster, so that chaos tests can partition it.

    plan = plan_network(Path("/tmp/c"), ["controller-3001", "broker-1"], used_networks())
    create(plan)                       # a bridge on the host (plan.host_address), one namespace
                                       # per node with a veth into the bridge and its address
    cmd = [*exec_prefix(plan, "broker-1"), sys.executable, "-m", "deploy.node.broker", ...]
    cut(plan, "broker-1", "controller-3001")       # DROP both ways, in the two namespaces
    isolate(plan, "broker-1", ["controller-3001"])  # cut from each of them
    probe(plan, "broker-1", "controller-3001", 9093)   # False while cut
    reject(plan, "broker-1", ["controller-3001"])  # resets: its connects are refused
    heal(plan)                         # every rule gone
    destroy(plan)                      # namespaces, veths and bridge; also a crashed run's

The plan is pure (names and addresses from the cluster dir); the functions below it run `ip` and
`iptables` in subprocesses, as root. Rules live in the nodes' namespaces (their INPUT and OUTPUT
chains), never in the host's tables, so a heal is a flush there and the host's firewall is never
touched. The bridge opts out of the host's bridge netfilter (nf_call_iptables 0), so a host
FORWARD policy (Docker's DROP) does not cut the nodes from each other either.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREFIX_TAG = "tk"
# 10.200.0.0/24 .. 10.255.255.0/24: clear of Docker's 172.17/16 and the usual 10.0/16 LANs.
SUBNET_FIRST = ipaddress.IPv4Network("10.200.0.0/24")
SUBNET_COUNT = 56 * 256
FIRST_NODE_HOST = 2  # .1 is the host's bridge address
IFNAMSIZ = 15  # Linux interface names: 15 characters at most
PROBE_TIMEOUT_S = 1.0

__all__ = [
    "Endpoint",
    "NetnsError",
    "NetworkPlan",
    "available",
    "create",
    "cut",
    "destroy",
    "exec_prefix",
    "heal",
    "isolate",
    "plan_network",
    "probe",
    "used_networks",
]

Endpoint = tuple[str, int]
"""(ip, port): an address that counts as a node, e.g. a proxy in front of it."""


class NetnsError(RuntimeError):
    """An `ip`/`iptables` command failed: the message names the command and its stderr."""


# -- the plan (pure) --------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkPlan:
    prefix: str
    """"tk" + 6 hex digits of the cluster dir's hash: every name this plan makes starts so."""
    subnet: str
    """"10.A.B.0/24"."""
    nodes: tuple[str, ...]
    """Node names in address order: "zookeeper", "controller-3001", "broker-1", ..."""

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def host_address(self) -> str:
        """The host's address on the bridge: where host clients (and proxies) sit."""
        return str(self.network.network_address + 1)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    def _index(self, node: str) -> int:
        try:
            return self.nodes.index(node)
        except ValueError:
            raise NetnsError(
                f"no node {node!r} in this network (nodes: {', '.join(self.nodes)})"
            ) from None

    def address(self, node: str) -> str:
        return str(self.network.network_address + FIRST_NODE_HOST + self._index(node))

    def namespace(self, node: str) -> str:
        self._index(node)
        return f"{self.prefix}-{node}"

    def veth_host(self, node: str) -> str:
        """The host end of the node's veth pair (in the bridge)."""
        return f"{self.prefix}h{self._index(node)}"

    def veth_node(self, node: str) -> str:
        """The node's end, inside its namespace."""
        return f"{self.prefix}n{self._index(node)}"

    def to_dict(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "subnet": self.subnet, "nodes": list(self.nodes)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NetworkPlan:
        return cls(prefix=str(raw["prefix"]), subnet=str(raw["subnet"]),
                   nodes=tuple(str(n) for n in raw["nodes"]))  # fmt: skip


def plan_network(cluster_dir: Path, nodes: Sequence[str],
                 used: Iterable[ipaddress.IPv4Network] = ()) -> NetworkPlan:  # fmt: skip
    """The plan of a cluster's network: names from a hash of its (absolute) directory, so two
    clusters on one machine get different ones; the first /24 from the hash's own starting
    point that overlaps none of `used` (the host's networks, `used_networks()`)."""
    if not nodes:
        raise NetnsError("a network needs at least one node")
    if len(set(nodes)) != len(nodes):
        raise NetnsError(f"node names repeat: {list(nodes)}")
    if len(nodes) > 250:
        raise NetnsError(f"{len(nodes)} nodes do not fit in a /24 (at most 250)")
    digest = hashlib.sha256(str(Path(cluster_dir).absolute()).encode()).hexdigest()
    taken = list(used)
    start = int(digest[6:14], 16) % SUBNET_COUNT
    for step in range(SUBNET_COUNT):
        candidate = ipaddress.IPv4Network(
            (int(SUBNET_FIRST.network_address) + ((start + step) % SUBNET_COUNT) * 256, 24)
        )
        if not any(candidate.overlaps(net) for net in taken):
            return NetworkPlan(f"{PREFIX_TAG}{digest[:6]}", str(candidate), tuple(nodes))
    raise NetnsError("every /24 of 10.200.0.0-10.255.255.0 is in use on this host")


def cut_rules(plan: NetworkPlan, peer: str, extra: Mapping[str, Collection[Endpoint]]
              ) -> list[list[str]]:  # fmt: skip
    """iptables arguments that, in some node's namespace, drop all traffic to and from `peer`
    and its extra endpoints."""
    address = plan.address(peer)
    rules = [["-A", "INPUT", "-s", address, "-j", "DROP"],
             ["-A", "OUTPUT", "-d", address, "-j", "DROP"]]  # fmt: skip
    for ip, port in extra.get(peer, ()):
        rules += [
            ["-A", "OUTPUT", "-p", "tcp", "-d", ip, "--dport", str(port), "-j", "DROP"],
            ["-A", "INPUT", "-p", "tcp", "-s", ip, "--sport", str(port), "-j", "DROP"],
        ]
    return rules


def reject_rules(plan: NetworkPlan, peer: str, *, established_only: bool) -> list[list[str]]:
    """iptables arguments that, in some node's namespace, answer TCP from `peer` with a reset:
    every segment (new connections are refused: ECONNREFUSED, as if nothing listened), or with
    `established_only` every segment but a SYN (connects succeed, then each connection is reset
    at its first data: a live process whose connections break)."""
    match = ["-p", "tcp", *(["!", "--syn"] if established_only else [])]
    reset = ["-j", "REJECT", "--reject-with", "tcp-reset"]
    return [["-A", "INPUT", "-s", plan.address(peer), *match, *reset]]


# -- I/O: ip and iptables ---------------------------------------------------------------------


def available() -> str | None:
    """None when this machine can run namespaced clusters, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); this process is not root"
    for tool, package in (("ip", "iproute2"), ("iptables", "iptables")):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (apt-get install {package})"
    return None


def _run(args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed: {result.stderr.strip()}")
    return result


def used_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of the host's interfaces (`ip -o -4 addr`)."""
    out = _run(["ip", "-o", "-4", "addr", "show"]).stdout
    nets = []
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            nets.append(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    return nets


def exec_prefix(plan: NetworkPlan, node: str) -> list[str]:
    """The command prefix that runs a program in the node's namespace. `ip netns exec` execs
    the program, so the pid a spawner sees is the program's own."""
    return ["ip", "netns", "exec", plan.namespace(node)]


def create(plan: NetworkPlan) -> None:
    """Bridge, namespaces, veths and addresses; leftovers of an earlier run with this prefix are
    removed first. On failure what was made is removed again."""
    destroy(plan)
    try:
        _create(plan)
    except BaseException:
        destroy(plan)
        raise


def _create(plan: NetworkPlan) -> None:
    prefix_len = plan.network.prefixlen
    _run(["ip", "link", "add", plan.bridge, "type", "bridge"])
    # Bridged frames skip the host's iptables (br_netfilter would pass them through FORWARD).
    _run(["ip", "link", "set", plan.bridge, "type", "bridge", "nf_call_iptables", "0"],
         check=False)  # fmt: skip
    _run(["ip", "addr", "add", f"{plan.host_address}/{prefix_len}", "dev", plan.bridge])
    _run(["ip", "link", "set", plan.bridge, "up"])
    for node in plan.nodes:
        ns = plan.namespace(node)
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", plan.veth_host(node), "type", "veth", "peer", "name",
              plan.veth_node(node), "netns", ns])  # fmt: skip
        _run(["ip", "link", "set", plan.veth_host(node), "master", plan.bridge, "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{plan.address(node)}/{prefix_len}", "dev",
              plan.veth_node(node)])  # fmt: skip
        _run(["ip", "-n", ns, "link", "set", plan.veth_node(node), "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])


def destroy(plan: NetworkPlan) -> None:
    """Remove every namespace and link whose name starts with the plan's prefix, whatever node
    list made them (a crashed run's too). Removing nothing is no error."""
    listed = _run(["ip", "netns", "list"]).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"{plan.prefix}-"):
            _run(["ip", "netns", "del", name], check=False)
    links = _run(["ip", "-o", "link", "show"]).stdout
    for line in links.splitlines():
        # "7: tk1a2b3ch0@if6: <...>": the name, before any "@peer".
        name = line.split(":", 2)[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(plan.prefix):
            _run(["ip", "link", "del", name], check=False)


def _iptables(plan: NetworkPlan, node: str, rule: Sequence[str]) -> None:
    _run([*exec_prefix(plan, node), "iptables", "-w", *rule])


def cut(plan: NetworkPlan, a: str, b: str,
        extra: Mapping[str, Collection[Endpoint]] | None = None) -> None:  # fmt: skip
    """Drop all traffic both ways between nodes `a` and `b`: in a's namespace everything to and
    from b's address and b's `extra` endpoints, and the same in b's namespace for a."""
    if a == b:
        raise NetnsError(f"cannot cut {a!r} from itself")
    extra = extra or {}
    for here, peer in ((a, b), (b, a)):
        for rule in cut_rules(plan, peer, extra):
            _iptables(plan, here, rule)


def isolate(plan: NetworkPlan, node: str, from_nodes: Iterable[str] | None = None,
            extra: Mapping[str, Collection[Endpoint]] | None = None) -> None:  # fmt: skip
    """Cut `node` from each of `from_nodes` (default: every other node). The host still
    reaches it."""
    peers = [n for n in plan.nodes if n != node] if from_nodes is None else list(from_nodes)
    for peer in peers:
        cut(plan, node, peer, extra)


def reject(plan: NetworkPlan, node: str, peers: Iterable[str], *,
           established_only: bool = False) -> None:  # fmt: skip
    """In `node`'s namespace, reset TCP from each of `peers` (reject_rules); `heal` removes it."""
    for peer in peers:
        for rule in reject_rules(plan, peer, established_only=established_only):
            _iptables(plan, node, rule)


def heal(plan: NetworkPlan) -> None:
    """Remove every rule: flush the filter table in each node's namespace."""
    for node in plan.nodes:
        _iptables(plan, node, ["-F"])


def probe(plan: NetworkPlan, a: str, b: str, port: int,
          timeout: float = PROBE_TIMEOUT_S) -> bool:  # fmt: skip
    """Can node `a` open a TCP connection to node `b`'s address on `port` (within `timeout`)?
    Runs a small Python in a's namespace."""
    script = (
        "import socket, sys\n"
        "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))"
    )
    result = subprocess.run(
        [*exec_prefix(plan, a), sys.executable, "-c", script, plan.address(b), str(port),
         str(timeout)], capture_output=True, timeout=timeout + 30,
    )  # fmt: skip
    return result.returncode == 0
