"""deploy.cluster.zookeeper.free_port: the ports `trioka cluster up` gives its nodes come from
below the kernel's ephemeral range, never twice. A port picked by binding port 0 was given by
the kernel to another node's /metrics server (port 0) before the controller bound it: the
controller failed with EADDRINUSE and `make demo` with it (CI of 9d0ef79)."""

from __future__ import annotations

import socket

from deploy.cluster.zookeeper import _ephemeral_start, free_port


def test_ports_are_outside_the_ephemeral_range_and_never_repeat() -> None:
    start = _ephemeral_start()
    ports = [free_port() for _ in range(200)]
    assert all(1024 <= p < start for p in ports)
    assert len(set(ports)) == len(ports)


def test_a_port_zero_bind_cannot_take_a_picked_port() -> None:
    picked = {free_port() for _ in range(20)}
    kernel = []
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            kernel.append(sock.getsockname()[1])
    assert not picked & set(kernel)
