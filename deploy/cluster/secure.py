"""`trioka cluster up --secure`: TLS on every listener, SCRAM for clients, the authorizer on.

    keystore = node_keystore(base_dir, "broker-1", "127.0.0.1")    # <dir>/tls (deploy.cluster.dev_ca)
    broker_security(base_dir, keystore, mode, super_users)         # a broker's keys
    controller_security(base_dir, keystore, super_users)           # a controller's keys
    await create_admin(state, within=60)       # the admin's SCRAM login, <dir>/client.properties

- Clients: the brokers' EXTERNAL listener is SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512.
- Nodes prove themselves with certificates from the cluster's dev CA: INTERNAL (replication,
  the ZK-mode controller's requests) and the controllers' CONTROLLER listener are SSL with client
  certificates required. The controller listener cannot use SCRAM (its credentials live in the
  log it replicates; Kafka bootstraps them at format time, KIP-900); certificates also spare
  the inter-broker listener that bootstrap in both metadata modes.
- The authorizer is on with Kafka's default `allow.everyone.if.no.acl.found=false`: the nodes'
  certificate principals (`User:CN=broker-1`, `User:CN=controller-3001`, ...) and the admin
  (`User:CN=admin`, `User:admin`) are `super.users`; everyone else needs ACLs (`trioka acl`).
- The admin's SCRAM credential is created once the brokers serve, over INTERNAL with the
  admin's certificate (AlterUserScramCredentials, KIP-554); its random password is written with
  the CA's path to `<dir>/client.properties` (mode 0600), which every client command takes:
  `trioka topic list --command-config <dir>/client.properties -b ...`.
- Each node ships its telemetry with its own certificate (`trioka.telemetry.*` client keys).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

import trio

from client import Admin
from client.admin_users import upsertion
from deploy.cluster.client_properties import read_properties, write_properties
from deploy.cluster.dev_ca import DevCA
from deploy.cluster.node_configs import EXTERNAL_LISTENER, INTERNAL_LISTENER
from deploy.cluster.raft import CONTROLLER_LISTENER
from deploy.cluster.state import ClusterError, ClusterState
from protocol.errors import KafkaError, TriokaError
from protocol.scram import ScramMechanism

TLS_DIR = "tls"
CLIENT_PROPERTIES = "client.properties"
ADMIN = "admin"
ADMIN_MECHANISM = "SCRAM-SHA-512"
CLIENT_MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
AUTHORIZERS = {
    "raft": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "zk": "kafka.security.authorizer.AclAuthorizer",
}


def _ca(base_dir: Path) -> DevCA:
    return DevCA.load_or_create(Path(base_dir) / TLS_DIR)


def node_keystore(base_dir: Path, name: str, host: str) -> Path:
    """`<dir>/tls/<name>.pem`: the node's key and certificate (its address and localhost)."""
    return _ca(base_dir).issue(name, sorted({host, "127.0.0.1", "localhost"}))


def super_users(names: Iterable[str]) -> str:
    """super.users: every node's certificate principal and the admin's two principals."""
    principals = [f"User:CN={n}" for n in names] + [f"User:CN={ADMIN}", f"User:{ADMIN}"]
    return ";".join(principals)


def _telemetry_client(base_dir: Path, keystore: Path) -> dict[str, object]:
    return {
        "trioka.telemetry.security.protocol": "SSL",
        "trioka.telemetry.ssl.ca.location": str(_ca(base_dir).ca_file),
        "trioka.telemetry.ssl.certificate.location": str(keystore),
    }


def broker_security(base_dir: Path, keystore: Path, mode: str, users: str) -> dict[str, object]:
    """A broker's keys: EXTERNAL SASL_SSL (SCRAM), INTERNAL mTLS, the controllers dialled with
    its certificate, the authorizer."""
    return {
        "listener.security.protocol.map": [
            f"{EXTERNAL_LISTENER}:SASL_SSL",
            f"{INTERNAL_LISTENER}:SSL",
            f"{CONTROLLER_LISTENER}:SSL",
        ],
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(_ca(base_dir).ca_file),
        f"listener.name.{INTERNAL_LISTENER.lower()}.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": CLIENT_MECHANISMS,
        "authorizer.class.name": AUTHORIZERS[mode],
        "super.users": users,
        **_telemetry_client(base_dir, keystore),
    }


def controller_security(
    base_dir: Path, keystore: Path, users: str, brokers_internal: Iterable[str]
) -> dict[str, object]:
    """A Raft controller's keys: CONTROLLER mTLS, the authorizer (only super.users are served
    there), telemetry shipped to the brokers' INTERNAL listeners with its certificate."""
    return {
        "listener.security.protocol.map": [f"{CONTROLLER_LISTENER}:SSL"],
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(_ca(base_dir).ca_file),
        "ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZERS["raft"],
        "super.users": users,
        "trioka.telemetry.bootstrap.servers": list(brokers_internal),
        **_telemetry_client(base_dir, keystore),
    }


def node_client_config(base_dir: Path) -> dict[str, str]:
    """What the supervisor dials INTERNAL and CONTROLLER listeners with: the admin's
    certificate (a super user)."""
    ca = _ca(base_dir)
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.ca_file),
        "ssl.certificate.location": str(ca.issue(ADMIN)),
    }


def client_properties_path(base_dir: Path) -> Path:
    return Path(base_dir) / CLIENT_PROPERTIES


def read_client_properties(base_dir: Path) -> dict[str, str]:
    """The admin's client settings (`<dir>/client.properties`); {} before they exist."""
    return read_properties(client_properties_path(base_dir), missing_ok=True)


def admin_login(password: str, ca_file: str | Path) -> dict[str, str]:
    """The admin's client settings on a SASL_SSL listener."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": ADMIN_MECHANISM,
        "sasl.username": ADMIN,
        "sasl.password": password,
        "ssl.ca.location": str(ca_file),
    }


async def create_login(
    login: Mapping[str, str], node: Mapping[str, str], bootstrap: str, *, within: float
) -> None:
    """Upsert the SCRAM credential of `login` (sasl.username, sasl.mechanism, sasl.password)
    through `bootstrap`, dialled with the `node` settings (the admin's certificate on an
    INTERNAL listener: the only way in before any SCRAM user exists)."""
    mechanism = ScramMechanism.from_name(login["sasl.mechanism"])
    if mechanism is ScramMechanism.UNKNOWN:
        raise ClusterError(f"sasl.mechanism {login['sasl.mechanism']!r} is not SCRAM-SHA-256/512")
    config = {**node, "bootstrap.servers": bootstrap, "default.api.timeout.ms": int(within * 1000)}
    with trio.fail_after(within):
        async with Admin(config) as admin:
            await admin.alter_user_scram_credentials(
                [upsertion(login["sasl.username"], login["sasl.password"], mechanism)]
            )


async def wait_login(login: Mapping[str, str], addresses: Iterable[str], *, within: float) -> None:
    """Until a login on each of `addresses` succeeds (a broker that has not applied the
    credential from its metadata yet refuses it); ClusterError naming the last failure."""
    last: BaseException | None = None
    with trio.move_on_after(within):
        for address in addresses:
            while True:
                config = {**login, "bootstrap.servers": address, "default.api.timeout.ms": 3000}
                try:
                    async with Admin(config) as admin:
                        await admin.describe_cluster()  # on the bootstrap connection
                    break
                except (TriokaError, KafkaError, OSError) as exc:
                    last = exc
                    await trio.sleep(0.2)  # polling a condition under the deadline
        return
    raise ClusterError(f"the admin's SCRAM login did not work within {within:g} s ({last})")


async def create_admin(state: ClusterState, internal: str, *, within: float) -> dict[str, str]:
    """Once: the admin's SCRAM credential, created over the brokers' INTERNAL listeners
    (`internal`: host:port,...) with the admin's certificate; then waits until every broker
    takes the login on EXTERNAL. Returns (and writes) the client settings."""
    base_dir = Path(state.dir)
    settings = read_client_properties(base_dir)
    if not settings:
        node = node_client_config(base_dir)
        settings = admin_login(secrets.token_urlsafe(24), node["ssl.ca.location"])
        await create_login(settings, node, internal, within=within)
        write_properties(client_properties_path(base_dir), settings,
                         "trioka cluster up --secure: the admin's SCRAM login (a super user)")  # fmt: skip
    await wait_login(settings, (f"{b.host}:{b.port}" for b in state.brokers), within=within)
    return settings
