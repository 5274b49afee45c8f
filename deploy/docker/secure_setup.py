"""`python -m deploy.docker.secure_setup [DIR]`: the files docker-compose.secure.yml mounts, made
by `scripts/docker-setup.sh --secure` (`make docker-setup-secure`) in DIR (default build/tls):

    ca.pem, ca-key.pem     the dev CA (deploy.cluster.dev_ca); its key is never mounted
    <service>.pem          each compose node's key and certificate (COMPOSE_NODES): CN=<service>,
                           subjectAltNames the service, its network aliases, localhost and
                           127.0.0.1 (host clients dial 127.0.0.1:1909N)
    admin.pem              the admin's (CN=admin, a super user): secure-init creates the admin's
                           SCRAM login over INTERNAL with it
    client.properties      the admin's SCRAM login for host clients (SASL_SSL, SCRAM-SHA-512, a
                           random password, the CA by absolute path; secure-init reads it too):
                           `trioka topic list --command-config build/tls/client.properties
                           -b 127.0.0.1:19092`

The same choices as `trioka cluster up --secure` (deploy.cluster.secure). Idempotent: the CA,
every certificate and the password are kept when they exist (a cluster whose volumes outlive a
`down` keeps its trust and its login); only what is missing is made.

The containers run as uid CONTAINER_UID (deploy/docker/Dockerfile's `useradd --uid 1000`) and
must read the files mounted into them (compose secrets are bind mounts: they keep the host's
owner and mode). The least-bad way found: DIR is made 0700, so no other host user can reach
anything in it (docker's daemon mounts the files as root, so the containers still can); a
mounted file already owned by that uid (a developer who is uid 1000 on the host) stays 0600;
any other is made 0644 - acceptable ONLY because this is a throwaway development CA behind a
0700 directory. Handing the files to uid 1000 instead (chown, as root) would give them to
whichever host user has that uid; the CA's key is never mounted and stays 0600.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from deploy.cluster.client_properties import write_properties
from deploy.cluster.dev_ca import DevCA
from deploy.cluster.secure import (
    ADMIN,
    CLIENT_PROPERTIES,
    admin_login,
    read_client_properties,
)

DEFAULT_DIR = Path("build/tls")
PROPERTIES_HEADER = (
    "docker-compose.secure.yml: the admin's SCRAM login (a super user), for host\n"
    "clients: trioka ... --command-config THIS_FILE -b 127.0.0.1:19092"
)
CONTAINER_UID = 1000
"""The trioka user of deploy/docker/Dockerfile (and Dockerfile.analytics)."""

COMPOSE_NODES: Mapping[str, tuple[str, ...]] = {
    "controller-1": (),
    "controller-2": (),
    "controller-3": (),
    "broker-1": (),
    "broker-2": (),
    "broker-3": (),
    # The zk brokers answer to broker-N on the compose network too (docker-compose.yml).
    "zk-broker-1": ("broker-1",),
    "zk-broker-2": ("broker-2",),
    "zk-broker-3": ("broker-3",),
}
"""Every trioka node of docker-compose.yml (both profiles): service -> its network aliases."""


def node_hosts(service: str) -> list[str]:
    """A node certificate's subjectAltNames."""
    return [service, *COMPOSE_NODES[service], "localhost", "127.0.0.1"]


def share_with_containers(path: Path) -> str:
    """Make `path` readable by the containers' user (see the module doc); says how."""
    if path.stat().st_uid == CONTAINER_UID:
        return "0600, owned by the containers' uid"
    # Dev CA only: readable by whoever reaches it, and the directory (0700) lets nobody.
    path.chmod(0o644)
    return "0644 in a 0700 directory"


def admin_client_settings(tls_dir: Path) -> dict[str, str]:
    """The admin's client.properties settings: the existing password when there is one."""
    existing = read_client_properties(tls_dir)
    password = existing.get("sasl.password") or secrets.token_urlsafe(24)
    return admin_login(password, (tls_dir / "ca.pem").resolve())


def setup(tls_dir: Path = DEFAULT_DIR) -> list[str]:
    """Make what is missing in `tls_dir` (see the module doc); lines saying what was done."""
    tls_dir.mkdir(parents=True, exist_ok=True)
    tls_dir.chmod(0o700)
    ca = DevCA.load_or_create(tls_dir)
    keys = [ca.issue(name, node_hosts(name)) for name in COMPOSE_NODES]
    keys.append(ca.issue(ADMIN))
    properties = tls_dir / CLIENT_PROPERTIES
    settings = admin_client_settings(tls_dir)
    if read_client_properties(tls_dir) != settings:
        write_properties(properties, settings, PROPERTIES_HEADER)
    done = [f"{ca.ca_file} (the dev CA) and {len(keys)} keys and certificates in {tls_dir}"]
    how = {share_with_containers(path) for path in (ca.ca_file, *keys, properties)}
    done.append(f"what the containers mount: {', '.join(sorted(how))}")
    done.append(f"host clients: --command-config {properties} -b 127.0.0.1:19092")
    return done


def main(argv: Sequence[str]) -> int:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: python -m deploy.docker.secure_setup [DIR]", file=sys.stderr)
        return 2
    for line in setup(Path(argv[0]) if argv else DEFAULT_DIR):
        print(f"secure setup: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
