"""docker-compose.secure.yml over docker-compose.yml, as `docker-compose config` resolves the two
(no Docker daemon): the override changes no command and adds only the one-shot init service;
every node mounts the secure config directory, its own key and the CA, never the CA's key; the
secure configs are what `trioka cluster up --secure` sets (deploy.cluster.secure); and the
certificates deploy.docker.secure_setup makes name every host the nodes and clients dial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from deploy.cluster import secure
from deploy.docker import secure_setup
from deploy.node.config import read_config_file
from deploy.node.controller_config import CONTROLLER_CONFIGS
from tests.unit.deploy.test_docker_compose_config import (
    COMPOSE_FILE,
    CONFIG_TARGET,
    EXTERNAL_PORTS,
    PROFILES,
    ROOT,
    broker_config,
    brokers,
    compose_config,
    config_file,
    controller_config,
    mounts,
    overrides,
)

SECURE_FILE = ROOT / "docker-compose.secure.yml"
INIT = {"raft": "secure-init", "zk": "zk-secure-init"}
TLS_TARGET = Path("/etc/trioka/tls")
SECURE_DIR = ROOT / "deploy/docker/config/secure"


@pytest.fixture(scope="module", params=sorted(PROFILES))
def both(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(profile, the base file's config, the base + secure files' config)."""
    mode: str = request.param
    return mode, compose_config(mode), compose_config(mode, files=(COMPOSE_FILE, SECURE_FILE))


def secrets_of(config: dict[str, Any], service: dict[str, Any]) -> dict[Path, Path]:
    """The service's compose secrets as target -> the host file."""
    files = config["secrets"]
    return {Path(s["target"]): Path(files[s["source"]]["file"]) for s in service["secrets"]}


def nodes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in config["services"].items() if n not in ("zookeeper", *INIT.values())}


def test_the_override_adds_the_init_service_and_changes_no_command(
    both: tuple[str, dict[str, Any], dict[str, Any]],
) -> None:
    mode, base, secured = both
    assert set(secured["services"]) == set(base["services"]) | {INIT[mode]}
    for name, service in base["services"].items():
        changed = secured["services"][name]
        for key in ("command", "entrypoint", "ports", "depends_on", "healthcheck", "profiles"):
            assert changed.get(key) == service.get(key), f"{name}: {key} differs"
        if name == "zookeeper":
            assert changed == service
            continue
        base_mounts, secure_mounts = mounts(service), mounts(changed)
        assert base_mounts.pop(CONFIG_TARGET).endswith("/config/plaintext"), name
        assert secure_mounts.pop(CONFIG_TARGET) == str(SECURE_DIR), name
        assert secure_mounts == base_mounts, f"{name}: the data volumes differ"
        assert "secrets" not in service, name


def test_each_node_mounts_its_own_key_and_the_ca_never_the_cas_key(
    both: tuple[str, dict[str, Any], dict[str, Any]],
) -> None:
    _, _, secured = both
    tls = ROOT / "build/tls"
    for name, service in nodes(secured).items():
        assert secrets_of(secured, service) == {
            TLS_TARGET / "ca.pem": tls / "ca.pem",
            TLS_TARGET / "node.pem": tls / f"{name}.pem",
        }, name
    for name, secret in secured["secrets"].items():
        assert Path(secret["file"]).name != "ca-key.pem", f"secret {name} is the CA's key"


def _expected_security(tmp_path: Path, mode: str, kind: str, names: list[str]) -> dict[str, Any]:
    """deploy.cluster.secure's keys for one node, with the containers' paths."""
    keystore = tmp_path / "tls" / "node.pem"
    users = secure.super_users(names)
    if kind == "controller":
        internal = [f"broker-{i}:9092" for i in (1, 2, 3)]
        keys = secure.controller_security(tmp_path, keystore, users, internal)
    else:
        keys = secure.broker_security(tmp_path, keystore, mode, users)
    container = {str(tmp_path / "tls" / f): str(TLS_TARGET / f) for f in ("node.pem", "ca.pem")}
    return {k: container.get(v, v) if isinstance(v, str) else v for k, v in keys.items()}


def test_the_secure_configs_are_cluster_up_secure_choices(
    both: tuple[str, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    mode, _, secured = both
    names = sorted(nodes(secured))
    for name, service in nodes(secured).items():
        kind = "controller" if name.startswith("controller-") else "broker"
        if kind == "controller":
            file_keys = read_config_file(config_file(service), CONTROLLER_CONFIGS)
        else:
            file_keys = read_config_file(config_file(service))
        assert config_file(service).parent == SECURE_DIR
        want = _expected_security(tmp_path, mode, kind, names)
        # The order of super.users and of the protocol map is not a choice: compare as sets.
        users = file_keys.pop("super.users").split(";")
        assert set(users) == set(want.pop("super.users").split(";")), name
        assert set(file_keys.pop("listener.security.protocol.map")) == set(
            want.pop("listener.security.protocol.map")
        ), name
        # Beside security, the files say only where /metrics is (as the plaintext ones do).
        assert file_keys.pop("trioka.metrics.port") == 9404, name
        assert file_keys.pop("trioka.metrics.host") == "0.0.0.0", name
        assert file_keys == want, name
        # ...and the node accepts its config (the process's own loader).
        if kind == "controller":
            assert controller_config(service).listener_security_protocol_map == {
                "CONTROLLER": "SSL"
            }
        else:
            conf = broker_config(service)
            assert conf.listener_security_protocol_map["EXTERNAL"] == "SASL_SSL"
            assert conf.listener_security_protocol_map["INTERNAL"] == "SSL"


def test_node_client_settings_use_the_mounted_certificate() -> None:
    def props(path: Path) -> dict[str, str]:
        lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
        return dict(line.split("=", 1) for line in lines if line)

    plain = props(ROOT / "deploy/docker/config/plaintext/node-client.properties")
    assert plain == {"security.protocol": "PLAINTEXT"}
    assert props(SECURE_DIR / "node-client.properties") == {
        "security.protocol": "SSL",
        "ssl.ca.location": str(TLS_TARGET / "ca.pem"),
        "ssl.certificate.location": str(TLS_TARGET / "node.pem"),
    }


def _arg(command: list[str], flag: str) -> list[str]:
    return [a.removeprefix(f"{flag}=") for a in command if a.startswith(f"{flag}=")]


def test_the_init_service_logs_in_on_every_broker_once_they_are_healthy(
    both: tuple[str, dict[str, Any], dict[str, Any]],
) -> None:
    mode, _, secured = both
    init = secured["services"][INIT[mode]]
    assert init["profiles"] == [mode] and init["restart"] == "no"
    assert init["entrypoint"] == ["python", "-m", "deploy.docker.secure_init"]
    assert init["depends_on"] == {
        b: {"condition": "service_healthy"} for b in brokers(secured) if b in nodes(secured)
    }
    tls = ROOT / "build/tls"
    assert secrets_of(secured, init) == {
        TLS_TARGET / "ca.pem": tls / "ca.pem",
        TLS_TARGET / "node.pem": tls / "admin.pem",
        TLS_TARGET / "client.properties": tls / "client.properties",
    }
    assert mounts(init) == {CONFIG_TARGET: str(SECURE_DIR)}
    command = init["command"]
    assert _arg(command, "--admin-config") == [str(TLS_TARGET / "client.properties")]
    assert _arg(command, "--command-config") == [f"{CONFIG_TARGET}/node-client.properties"]
    # INTERNAL to create the login, each broker's EXTERNAL (its container port) to try it.
    (bootstrap,) = _arg(command, "--bootstrap-server")
    assert bootstrap == ",".join(f"broker-{i}:9092" for i in (1, 2, 3))
    assert _arg(command, "--login") == [f"broker-{i}:{EXTERNAL_PORTS[i]}" for i in (1, 2, 3)]


def _dialled_hosts(secured: dict[str, Any]) -> dict[str, set[str]]:
    """Every host name a TLS client dials, by the service that must answer to it."""
    services = secured["services"]
    aliases = {
        name: {name, *((s.get("networks") or {}).get("default") or {}).get("aliases", [])}
        for name, s in services.items()
    }
    owner = {alias: name for name, known in aliases.items() for alias in known}
    dialled: dict[str, set[str]] = {name: {"localhost"} for name in nodes(secured)}  # health
    for name, service in nodes(secured).items():
        conf = overrides(service)
        for item in conf.get("controller.quorum.voters", "").split(","):
            if item:
                host = item.split("@")[1].rsplit(":", 1)[0]
                dialled[owner[host]].add(host)
        for listener in filter(None, conf.get("advertised.listeners", "").split(",")):
            host = listener.split("://")[1].rsplit(":", 1)[0]
            dialled[name].add(host)  # INTERNAL by brokers, EXTERNAL (127.0.0.1) by the host
        if name.startswith("controller-"):
            for server in read_config_file(config_file(service), CONTROLLER_CONFIGS)[
                "trioka.telemetry.bootstrap.servers"
            ]:
                host = server.rsplit(":", 1)[0]
                dialled[owner[host]].add(host)
        else:
            dialled[name].add("127.0.0.1")  # the telemetry shipper, to its own INTERNAL
    for init in INIT.values():
        if init in services:
            command = services[init]["command"]
            for server in [*_arg(command, "--bootstrap-server")[0].split(","),
                           *_arg(command, "--login")]:  # fmt: skip
                host = server.rsplit(":", 1)[0]
                dialled[owner[host]].add(host)
    return dialled


def test_the_certificates_name_every_host_the_nodes_are_dialled_at(
    both: tuple[str, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    _, _, secured = both
    tls = tmp_path / "tls"
    secure_setup.setup(tls)
    for name, hosts in _dialled_hosts(secured).items():
        certificate = x509.load_pem_x509_certificate((tls / f"{name}.pem").read_bytes())
        assert certificate.subject.rfc4514_string() == f"CN={name}"
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = {*san.get_values_for_type(x509.DNSName),
                 *(str(ip) for ip in san.get_values_for_type(x509.IPAddress))}  # fmt: skip
        assert hosts <= names, f"{name}'s certificate lacks {sorted(hosts - names)}"
    every_secret = {Path(s["file"]).name for s in secured["secrets"].values()}
    assert every_secret <= {p.name for p in tls.iterdir()}, "a mounted file is not made"
