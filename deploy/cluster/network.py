"""Partitions of a local cluster started with `--netns` (deploy.cluster.supervisor, deploy.cluster.netns): cut
nodes apart by node id, heal, probe; the cuts are recorded in the state file, so `trioka cluster
status` lists them.

    partition_nodes(Path("/tmp/c"), [1], [2, 3001])   # broker 1 <-> broker 2, controller 3001
    isolate_node(Path("/tmp/c"), 2)                   # broker 2 from every other node
    probe_nodes(Path("/tmp/c"), 1, 2)                 # False: broker 1 cannot reach broker 2
    heal_network(Path("/tmp/c"))                      # every cut gone
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from deploy.cluster import netns
from deploy.cluster.netns import Endpoint, NetworkPlan
from deploy.cluster.state import ClusterError, ClusterState, read_state, write_state

__all__ = ["heal_network", "isolate_node", "partition_nodes", "probe_nodes"]


def _networked(base_dir: Path) -> tuple[ClusterState, NetworkPlan]:
    state = read_state(Path(base_dir).resolve())
    if state.network is None:
        raise ClusterError(
            f"the cluster in {state.dir!r} runs without network namespaces: partitions need "
            "one started with `trioka cluster up --netns`"
        )
    return state, state.network


def _names(state: ClusterState, node_ids: Iterable[int]) -> list[str]:
    return [state.node(i).name for i in node_ids]


def partition_nodes(base_dir: Path, side: Sequence[int], other: Sequence[int],
                    extra: Mapping[str, Collection[Endpoint]] | None = None) -> ClusterState:  # fmt: skip
    """Cut every node of `side` from every node of `other` (node ids; 0: ZooKeeper), both ways.
    `extra[name]`: more (ip, port) endpoints that count as that node (deploy.cluster.netns.cut)."""
    state, plan = _networked(base_dir)
    a_names, b_names = _names(state, side), _names(state, other)
    if not a_names or not b_names:
        raise ClusterError("a partition needs nodes on both sides (NODE... --from NODE...)")
    both = sorted(set(a_names) & set(b_names))
    if both:
        raise ClusterError(f"{', '.join(both)} cannot be on both sides of a partition")
    pairs = {tuple(sorted(p)) for p in state.cuts}
    for a in a_names:
        for b in b_names:
            netns.cut(plan, a, b, extra)
            pairs.add(tuple(sorted((a, b))))
    # Recorded after the rules: a failure midway leaves the file naming only finished cuts.
    state = replace(read_state(Path(state.dir)), cuts=tuple(sorted(pairs)))  # type: ignore[arg-type]
    write_state(state)
    return state


def isolate_node(base_dir: Path, node_id: int, from_ids: Sequence[int] | None = None,
                 extra: Mapping[str, Collection[Endpoint]] | None = None) -> ClusterState:  # fmt: skip
    """Cut node `node_id` from `from_ids` (default: every other node of the cluster)."""
    state, _ = _networked(base_dir)
    if from_ids is None:
        from_ids = [n.node_id for n in state.nodes if n.node_id != node_id]
    return partition_nodes(base_dir, [node_id], from_ids, extra)


def heal_network(base_dir: Path) -> ClusterState:
    """Remove every cut (the rules in every node's namespace) and forget them."""
    state, plan = _networked(base_dir)
    netns.heal(plan)
    state = replace(read_state(Path(state.dir)), cuts=())
    write_state(state)
    return state


def probe_nodes(base_dir: Path, a: int, b: int) -> bool:
    """Can node `a` open a TCP connection to node `b`'s listener (its recorded port)?"""
    state, plan = _networked(base_dir)
    target = state.node(b)
    return netns.probe(plan, state.node(a).name, target.name, target.port)
