"""deploy.cluster.netns on real namespaces without a cluster: listeners in namespaces and on the host's
bridge address (where a proxy would sit), cuts with extra endpoints, heal, and destroy after a
crashed run. Fast (~3 s): the cluster-level tests are tests/integration/cli/
test_cli_cluster_netns.py."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.cluster import netns

WHY_NOT = netns.available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no network namespaces: {WHY_NOT}")
PORT = 9092
LISTEN = (
    "import socket, sys\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); print('ready', flush=True)\n"
    "while True: s.accept()[0].close()\n"
)


def _links(prefix: str) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names += [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()]
    return [n for n in names if n.startswith(prefix)]


@pytest.fixture
def plan(tmp_path: Path) -> Iterator[netns.NetworkPlan]:
    plan = netns.plan_network(tmp_path, ["a", "b", "c"], netns.used_networks())
    netns.create(plan)
    try:
        yield plan
    finally:
        netns.destroy(plan)


def _listen(prefix: list[str], address: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([*prefix, sys.executable, "-c", LISTEN, address, str(port)],
                            stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_cut_with_extra_endpoints_heal_and_destroy(plan: netns.NetworkPlan) -> None:
    # b listens in its namespace; a "proxy" in front of b listens on the host's bridge address.
    servers = [_listen(netns.exec_prefix(plan, "b"), plan.address("b"), PORT),
               _listen([], plan.host_address, PORT + 1)]  # fmt: skip
    try:
        with socket.create_connection((plan.address("b"), PORT), timeout=2):
            pass  # the host reaches a node through the bridge
        script = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)"

        def a_reaches_proxy() -> bool:
            argv = [*netns.exec_prefix(plan, "a"), sys.executable, "-c", script,
                    plan.host_address, str(PORT + 1)]  # fmt: skip
            return subprocess.run(argv, capture_output=True).returncode == 0

        assert netns.probe(plan, "a", "b", PORT) and a_reaches_proxy()
        netns.cut(plan, "a", "b", extra={"b": [(plan.host_address, PORT + 1)]})
        assert not netns.probe(plan, "a", "b", PORT)
        assert not a_reaches_proxy()  # the endpoint that counts as b is cut too
        assert netns.probe(plan, "c", "b", PORT)  # only that pair
        with socket.create_connection((plan.address("b"), PORT), timeout=2):
            pass  # never the host's own traffic
        netns.heal(plan)
        assert netns.probe(plan, "a", "b", PORT) and a_reaches_proxy()
        netns.isolate(plan, "b")
        assert not netns.probe(plan, "a", "b", PORT) and not netns.probe(plan, "c", "b", PORT)
        netns.heal(plan)
    finally:
        for server in servers:
            server.kill()
            server.wait()
    with pytest.raises(netns.NetnsError, match="itself"):
        netns.cut(plan, "a", "a")


def test_create_and_destroy_clean_up_what_a_crashed_run_left(plan: netns.NetworkPlan) -> None:
    assert len(_links(plan.prefix)) == 1 + 3 + 3  # bridge, host veths, namespaces
    # A later run of the same cluster dir with fewer nodes: create removes the old ones first.
    smaller = netns.NetworkPlan(plan.prefix, plan.subnet, ("a",))
    netns.create(smaller)
    assert sorted(_links(plan.prefix)) == sorted([plan.bridge, plan.veth_host("a"),
                                                  plan.namespace("a")])  # fmt: skip
    netns.destroy(smaller)
    assert _links(plan.prefix) == []
    netns.destroy(smaller)  # nothing left: no error
