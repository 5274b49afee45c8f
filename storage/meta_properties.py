"""meta.properties: which node and cluster a log dir belongs to (Kafka's version 1 format).

Checked at start-up so a disk moved to the wrong broker, or a broker pointed at another
cluster's data, stops with an error naming both values instead of serving foreign data.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from storage.errors import MetaPropertiesError
from storage.files import atomic_write, read_text

META_PROPERTIES = "meta.properties"
VERSION = 1


@dataclass(frozen=True, slots=True)
class MetaProperties:
    node_id: int
    cluster_id: str | None
    version: int = VERSION

    def to_text(self) -> str:
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
        lines = ["#", f"#{stamp}"]
        if self.cluster_id is not None:
            lines.append(f"cluster.id={self.cluster_id}")
        lines += [f"node.id={self.node_id}", f"version={self.version}"]
        return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka writes: `key=value` lines and `#` comments."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def read_meta_properties(log_dir: str) -> MetaProperties | None:
    path = os.path.join(log_dir, META_PROPERTIES)
    text = read_text(path, MetaPropertiesError)
    if text is None:
        return None
    props = parse_properties(text)
    # Version 0 (ZooKeeper-mode Kafka) calls it broker.id.
    raw_id = props.get("node.id", props.get("broker.id"))
    if raw_id is None:
        raise MetaPropertiesError(f"{path} has no node.id")
    try:
        node_id = int(raw_id)
        version = int(props.get("version", "0"))
    except ValueError:
        raise MetaPropertiesError(f"{path} has a non-integer node.id or version") from None
    return MetaProperties(node_id=node_id, cluster_id=props.get("cluster.id"), version=version)


def write_meta_properties(log_dir: str, props: MetaProperties) -> None:
    atomic_write(os.path.join(log_dir, META_PROPERTIES), props.to_text().encode())


def ensure_meta_properties(log_dir: str, node_id: int, cluster_id: str | None) -> MetaProperties:
    """Verify meta.properties in `log_dir` against the configuration, creating it if absent.

    `cluster_id=None` means "not known yet": the stored one, if any, is adopted.
    Raises MetaPropertiesError naming the file, the stored and the configured values.
    """
    path = os.path.join(log_dir, META_PROPERTIES)
    stored = read_meta_properties(log_dir)
    if stored is None:
        props = MetaProperties(node_id=node_id, cluster_id=cluster_id)
        write_meta_properties(log_dir, props)
        return props
    if stored.node_id != node_id:
        raise MetaPropertiesError(
            f"{path} belongs to node.id {stored.node_id} but this broker is configured with "
            f"node.id {node_id}; point log.dirs at this node's own directories"
        )
    if cluster_id is not None and stored.cluster_id is not None and stored.cluster_id != cluster_id:
        raise MetaPropertiesError(
            f"{path} belongs to cluster.id {stored.cluster_id!r} but this broker is in cluster "
            f"{cluster_id!r}; the log dir holds another cluster's data"
        )
    if (stored.cluster_id is None and cluster_id is not None) or stored.version != VERSION:
        upgraded = MetaProperties(node_id=node_id, cluster_id=stored.cluster_id or cluster_id)
        write_meta_properties(log_dir, upgraded)
        return upgraded
    return stored
