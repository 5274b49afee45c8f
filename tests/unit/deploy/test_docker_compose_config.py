"""docker-compose.yml as `docker-compose config` resolves it, per profile (no Docker daemon).

Debian's docker-compose 1.29 (the Makefile's APT_PACKAGES) validates the file and prints the
resolved configuration; these tests read that and check what the deployment promises: the
services of each profile, healthchecks, ports published on 127.0.0.1 only and matching the
advertised EXTERNAL listeners, named volumes on the log and metadata dirs, and node configs that
trioka itself accepts (the same loaders the processes run: each node's `--config` file, mounted
from deploy/docker/config, under its `--override`s). docker-compose.secure.yml:
tests/unit/deploy/test_docker_compose_secure.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.node.config import BrokerConfig, load_broker_config
from deploy.node.controller_config import ControllerProcessConfig, load_controller_config

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_FILE = ROOT / "docker-compose.yml"
CONFIG_TARGET = "/etc/trioka/config"
"""Where every node's config directory is mounted (deploy/docker/config/plaintext or secure)."""
PROFILES = {
    "raft": {"controller-1", "controller-2", "controller-3", "broker-1", "broker-2", "broker-3"},
    "zk": {"zookeeper", "zk-broker-1", "zk-broker-2", "zk-broker-3"},
}
EXTERNAL_PORTS = {1: 19092, 2: 19093, 3: 19094}


def compose_config(
    profile: str, extra_env: dict[str, str] | None = None, files: tuple[Path, ...] = (COMPOSE_FILE,)
) -> dict[str, Any]:
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is missing: `make setup` installs it (the Makefile's APT_PACKAGES)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRIOKA_", "COMPOSE_"))}
    env.update(extra_env or {})
    file_args = [arg for f in files for arg in ("-f", str(f))]
    out = subprocess.run(
        [exe, *file_args, "--profile", profile, "config"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, f"docker-compose config failed:\n{out.stderr}"
    config = yaml.safe_load(out.stdout)
    # compose 1.29's `config` prints every service; `up --profile P` starts those without a
    # profile and those of P.
    config["services"] = {
        name: s for name, s in config["services"].items() if profile in s.get("profiles", [profile])
    }
    return config


@pytest.fixture(scope="module", params=sorted(PROFILES))
def profile(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return request.param, compose_config(request.param)


def overrides(service: dict[str, Any]) -> dict[str, str]:
    """The service's `--override=KEY=VALUE` arguments as a mapping."""
    out: dict[str, str] = {}
    for arg in service.get("command") or []:
        if arg.startswith("--override="):
            key, _, value = arg.removeprefix("--override=").partition("=")
            out[key] = value
    return out


def brokers(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in config["services"].items() if "broker" in name}


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """The service's volumes as target -> source (a named volume, or a host path)."""
    out = {}
    for volume in service.get("volumes") or []:
        source, target = volume.split(":")[:2]
        out[target] = source
    return out


def config_file(service: dict[str, Any]) -> Path:
    """The host file behind the service's `--config=/etc/trioka/config/NAME` argument."""
    (arg,) = [a for a in service["command"] if a.startswith("--config=")]
    target = Path(arg.removeprefix("--config="))
    assert target.parent == Path(CONFIG_TARGET), arg
    return Path(mounts(service)[CONFIG_TARGET]) / target.name


def broker_config(service: dict[str, Any]) -> BrokerConfig:
    return load_broker_config(config_file(service), overrides(service))


def controller_config(service: dict[str, Any]) -> ControllerProcessConfig:
    return load_controller_config(config_file(service), overrides(service))


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) of each published port."""
    out = []
    for port in service.get("ports") or []:
        host_ip, host_port, container = str(port).split(":")
        out.append((host_ip, int(host_port), int(container.split("/")[0])))
    return out


def test_each_profile_has_its_services(profile: tuple[str, dict[str, Any]]) -> None:
    name, config = profile
    assert set(config["services"]) == PROFILES[name]
    for service in config["services"].values():
        assert service["profiles"] == [name]


def test_every_service_has_a_healthcheck(profile: tuple[str, dict[str, Any]]) -> None:
    _, config = profile
    for name, service in config["services"].items():
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"


def test_broker_healthcheck_asks_for_its_own_node(profile: tuple[str, dict[str, Any]]) -> None:
    _, config = profile
    for name, service in brokers(config).items():
        test = service["healthcheck"]["test"]
        assert test[1:5] == ["python", "-m", "deploy.docker.healthcheck", "broker"], name
        assert test[6] == overrides(service)["node.id"], f"{name} checks another node's health"


def test_healthchecks_dial_with_the_mounted_client_settings(
    profile: tuple[str, dict[str, Any]],
) -> None:
    """The node-client.properties of the mounted config directory: PLAINTEXT here, the node's
    certificate under docker-compose.secure.yml."""
    _, config = profile
    for name, service in config["services"].items():
        if name == "zookeeper":
            continue
        test = service["healthcheck"]["test"]
        assert test[-2:] == ["--command-config", f"{CONFIG_TARGET}/node-client.properties"], name
        source = Path(mounts(service)[CONFIG_TARGET])
        assert (source / "node-client.properties").is_file(), name


def test_ports_are_published_on_loopback_and_advertised(
    profile: tuple[str, dict[str, Any]],
) -> None:
    _, config = profile
    for name, service in config["services"].items():
        ports = published(service)
        assert all(ip == "127.0.0.1" for ip, _, _ in ports), f"{name} publishes {ports}"
        if name not in brokers(config):
            assert ports == [], f"{name} publishes {ports}; only brokers should"
    for name, service in brokers(config).items():
        conf = overrides(service)
        external = EXTERNAL_PORTS[int(conf["node.id"])]
        assert published(service) == [("127.0.0.1", external, external)], name
        assert f"EXTERNAL://127.0.0.1:{external}" in conf["advertised.listeners"].split(",")
        assert f"EXTERNAL://0.0.0.0:{external}" in conf["listeners"].split(",")
        assert f"INTERNAL://{name}:9092" in conf["advertised.listeners"].split(",")
        assert conf["inter.broker.listener.name"] == "INTERNAL"


def test_log_and_metadata_dirs_are_named_volumes(profile: tuple[str, dict[str, Any]]) -> None:
    """...and the only other mount is the config directory, read-only, from the repository."""
    _, config = profile
    named = set(config.get("volumes") or {})
    for name, service in config["services"].items():
        for volume in service.get("volumes") or []:
            source, target, *mode = volume.split(":")
            if target == CONFIG_TARGET:
                assert source == str(ROOT / "deploy/docker/config/plaintext"), name
                assert mode == ["ro"], f"{name}: {volume} is writable"
            else:
                assert source in named, f"{name}: {source} is not a named volume"
        conf = overrides(service)
        for key in ("log.dirs", "metadata.log.dir"):
            if key in conf:
                assert conf[key] in mounts(service), f"{name}: {key}={conf[key]} is not on a volume"
        if name == "zookeeper":
            assert "/var/lib/zookeeper" in mounts(service)
        else:
            assert CONFIG_TARGET in mounts(service), f"{name} has no config directory"


def test_node_configs_are_valid_and_agree(profile: tuple[str, dict[str, Any]]) -> None:
    mode, config = profile
    broker_ids = set()
    for service in brokers(config).values():
        conf = broker_config(service)
        assert conf.metadata_mode == mode
        assert set(conf.listener_security_protocol_map.values()) == {"PLAINTEXT"}
        broker_ids.add(conf.node_id)
    assert broker_ids == {1, 2, 3}
    controllers = [s for n, s in config["services"].items() if n.startswith("controller-")]
    assert len(controllers) == (3 if mode == "raft" else 0)
    voters = {overrides(s).get("controller.quorum.voters") for s in config["services"].values()}
    cluster_ids = {overrides(s).get("cluster.id") for s in config["services"].values()}
    if mode == "raft":
        assert len(voters) == 1 and len(cluster_ids) == 1, "nodes disagree on the quorum"
        ids = sorted(controller_config(s).node_id for s in controllers)
        assert ids == [3001, 3002, 3003]
        assert {f"{i}@controller-{i - 3000}:9093" for i in ids} == set(voters.pop().split(","))


def test_analytics_is_a_one_shot_report_into_a_named_volume() -> None:
    config = compose_config("analytics")
    assert set(config["services"]) == {"analytics"}
    service = config["services"]["analytics"]
    assert service["profiles"] == ["analytics"]
    assert service["restart"] == "no"
    assert "trioka-analytics" in service["image"]
    assert service["command"] == ["report", "--bootstrap-server", "broker-1:9092", "--out",
                                  "/reports"]  # fmt: skip
    assert published(service) == []
    (volume,) = service["volumes"]
    source, target = volume.split(":")[:2]
    assert target == "/reports" and source in (config.get("volumes") or {})


@pytest.mark.parametrize("mode", sorted(PROFILES))
def test_broker_1_names_a_broker_in_both_profiles(mode: str) -> None:
    """The analytics service's bootstrap: a service name in raft, a network alias in zk."""
    config = compose_config(mode)
    names = {
        name: {name, *((s.get("networks") or {}).get("default") or {}).get("aliases", [])}
        for name, s in brokers(config).items()
    }
    for node_id in (1, 2, 3):
        (owner,) = [n for n, known in names.items() if f"broker-{node_id}" in known]
        assert overrides(config["services"][owner])["node.id"] == str(node_id)


def test_session_settings_come_from_the_environment() -> None:
    """`trioka chaos run --docker` brings the cluster up with short sessions (compose_env)."""
    from deploy.chaos.docker import compose_env

    for mode, key in (("zk", "zookeeper.session.timeout.ms"),
                      ("raft", "broker.session.timeout.ms")):  # fmt: skip
        default = {s: overrides(v).get(key) for s, v in compose_config(mode)["services"].items()}
        short = compose_config(mode, compose_env(3000))["services"]
        for name, value in default.items():
            if value is not None:
                assert value in ("18000", "9000"), (name, value)  # Kafka's defaults
                assert overrides(short[name])[key] == "3000", name
        if mode == "raft":
            for name in brokers(compose_config(mode)):
                assert overrides(short[name])["broker.heartbeat.interval.ms"] == "1000"
                broker_config(short[name])


METRICS_PORT = 9404
"""Every node's /metrics in compose (Strimzi's port), scraped by the monitoring profile."""


def test_nodes_restart_on_failure(profile: tuple[str, dict[str, Any]]) -> None:
    """on-failure, not always: a container killed or stopped through Docker (the chaos
    nemesis, `docker-compose stop`) stays down until started again."""
    _, config = profile
    for name, service in config["services"].items():
        assert service.get("restart") == "on-failure", f"{name}: restart {service.get('restart')}"


def test_every_node_serves_metrics_on_the_compose_network(
    profile: tuple[str, dict[str, Any]],
) -> None:
    _, config = profile
    for name, service in config["services"].items():
        if name == "zookeeper":
            continue  # Debian's package has no Prometheus metrics provider
        conf = broker_config(service) if name in brokers(config) else controller_config(service)
        assert int(conf["trioka.metrics.port"]) == METRICS_PORT, name
        assert conf["trioka.metrics.host"] == "0.0.0.0", f"{name} serves /metrics on loopback"
        assert METRICS_PORT not in [p for _, _, p in published(service)], f"{name} publishes it"


def _scraped_names() -> set[tuple[str, int]]:
    """(name, port) of every target of the monitoring profile's Prometheus: static targets and
    DNS-discovered names."""
    scrape = yaml.safe_load((ROOT / "deploy/docker/monitoring/prometheus.yml").read_text())
    out = set()
    for job in scrape["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, _, port = target.rpartition(":")
                out.add((host, int(port)))
        for sd in job.get("dns_sd_configs", []):
            out.update((name, sd["port"]) for name in sd["names"])
    return out


@pytest.mark.parametrize("mode", sorted(PROFILES))
def test_monitoring_scrapes_every_node_of_either_profile(mode: str) -> None:
    config = compose_config(mode)
    scraped = _scraped_names()
    for name, service in config["services"].items():
        if name == "zookeeper":
            continue
        known = {name, *((service.get("networks") or {}).get("default") or {}).get("aliases", [])}
        assert {(n, METRICS_PORT) for n in known} & scraped, f"nothing scrapes {name}"


def test_monitoring_is_prometheus_on_loopback() -> None:
    config = compose_config("monitoring")
    assert set(config["services"]) == {"prometheus"}
    service = config["services"]["prometheus"]
    assert "trioka-prometheus" in service["image"]
    assert published(service) == [("127.0.0.1", 9090, 9090)]
    assert mounts(service)["/etc/prometheus/prometheus.yml"] == str(
        ROOT / "deploy/docker/monitoring/prometheus.yml"
    )
    assert "--config.file=/etc/prometheus/prometheus.yml" in service["command"]
    assert service["restart"] == "on-failure"
