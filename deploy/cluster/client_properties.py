"""Client settings files (Kafka tools' client.properties: Java properties, Kafka's client
config names), read and written in one place: `--command-config`, `cluster up --secure`'s
admin login, the compose healthchecks and secure-init.

    settings = read_properties("client.properties")        # ClusterError naming the file
    write_properties(path, settings, "a comment line")      # 0600 from its creation
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import javaproperties

from deploy.cluster.state import ClusterError


def read_properties(path: str | Path, *, missing_ok: bool = False) -> dict[str, str]:
    """A client.properties file (Java properties); ClusterError naming it when it cannot be
    read ({} for a missing one when `missing_ok`)."""
    try:
        with open(path, encoding="utf-8") as f:
            return dict(javaproperties.load(f))
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise ClusterError(f"{path}: no such client properties file") from None
    except (OSError, ValueError) as exc:
        raise ClusterError(f"{path}: cannot be read as client properties: {exc}") from None


def write_properties(path: Path, settings: Mapping[str, str], header: str) -> None:
    """`settings` as a client.properties file, mode 0600 from its creation (it holds a
    password), replacing `path` at once; `header`: comment lines on top."""
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(f"# {line}\n" for line in header.splitlines())
        javaproperties.dump(dict(settings), f, timestamp=False)
    tmp.replace(path)
