"""`controller.quorum.voters` (Kafka's QuorumConfig syntax): `id@host:port[,id@host:port...]`.

Pure, so that the controller's config (deploy.node.controller_config) and a Raft-mode broker's
(broker.config) parse it by the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.config_defs import ConfigError

VOTERS_KEY = "controller.quorum.voters"


@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_voters(text: str) -> dict[int, Voter]:
    """`1@host:9093,2@host:9094` -> {1: Voter, 2: Voter}; ConfigError naming the bad entry."""
    key = VOTERS_KEY
    voters: dict[int, Voter] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not node.strip().isdigit() or not port.isdigit() or not host:
            raise ConfigError(f"{key}: {item!r} is not id@host:port")
        node_id = int(node)
        if node_id in voters:
            raise ConfigError(f"{key}: voter id {node_id} is listed twice")
        voters[node_id] = Voter(node_id, host.strip("[]"), int(port))
    if not voters:
        raise ConfigError(f"{key}: required, as id@host:port[,id@host:port...]")
    return voters
