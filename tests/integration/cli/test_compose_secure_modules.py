"""What docker-compose.secure.yml's containers run, against a real broker process with the compose
cluster's listeners (INTERNAL: SSL with client certificates required; EXTERNAL: SASL_SSL with
SCRAM; the authorizer on) and certificates from deploy.docker.secure_setup, without Docker:
the healthcheck dials with the node's own certificate (`--command-config`), and secure-init
(deploy.docker.secure_init) creates the admin's SCRAM login over INTERNAL with the admin's
certificate, after which host clients log in with client.properties."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deploy.docker import secure_setup
from tests.integration.cli.test_cli_commands import one_error_line, trioka
from tests.support.broker_process import BrokerProcess


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def secure_broker(broker_factory, tls: Path) -> tuple[BrokerProcess, str, str]:
    """(broker, its INTERNAL address, its EXTERNAL address); PLAINTEXT only for the harness's
    readiness probe."""
    broker: BrokerProcess = broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SASL_SSL",
            "ssl.keystore.location": str(tls / "broker-1.pem"),
            "ssl.truststore.location": str(tls / "ca.pem"),
            "listener.name.internal.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:CN=broker-1;User:CN=admin;User:admin",
        }
    )
    ports = {
        e["listener"]: e["port"]
        for e in broker.events(since_start=True)
        if e.get("event") == "broker listening"
    }
    return broker, f"127.0.0.1:{ports['INTERNAL']}", f"127.0.0.1:{ports['EXTERNAL']}"


def node_properties(tmp_path: Path, tls: Path, name: str) -> Path:
    """deploy/docker/config/secure/node-client.properties with this test's paths."""
    path = tmp_path / f"{name}-client.properties"
    path.write_text(
        "security.protocol=SSL\n"
        f"ssl.ca.location={tls / 'ca.pem'}\n"
        f"ssl.certificate.location={tls / f'{name}.pem'}\n"
    )
    return path


def test_the_healthcheck_dials_with_the_nodes_certificate(broker_factory, tmp_path: Path) -> None:
    tls = tmp_path / "tls"
    secure_setup.setup(tls)
    _, internal, _ = secure_broker(broker_factory, tls)
    health = "deploy.docker.healthcheck"
    own = node_properties(tmp_path, tls, "broker-1")
    done = run_module(health, "broker", internal, "1", "--command-config", str(own))
    assert done.returncode == 0, done.stderr
    assert run_module(health, "broker", internal, "1").returncode == 1  # plaintext on TLS
    no_certificate = run_module(health, "broker", internal, "1", "--command-config", str(own),
                                "-X", "ssl.certificate.location=")  # fmt: skip
    assert no_certificate.returncode == 1 and "unhealthy" in no_certificate.stderr


def test_secure_init_creates_the_admins_login_for_host_clients(
    broker_factory, tmp_path: Path
) -> None:
    tls = tmp_path / "tls"
    secure_setup.setup(tls)
    _, internal, external = secure_broker(broker_factory, tls)
    login = ("-b", external, "--command-config", str(tls / "client.properties"))
    refused = one_error_line(trioka("topic", "list", *login, timeout=60))
    assert "Authentication failed" in refused or "SASL_AUTHENTICATION_FAILED" in refused, refused

    init = ("--admin-config", str(tls / "client.properties"),
            "--command-config", str(node_properties(tmp_path, tls, "admin")),
            "--bootstrap-server", internal, "--login", external, "--within", "30")  # fmt: skip
    done = run_module("deploy.docker.secure_init", *init)
    assert done.returncode == 0, done.stderr
    assert "the login works on" in done.stdout
    created = trioka("topic", "create", "orders", *login)
    assert created.returncode == 0, created.stderr.decode()
    again = run_module("deploy.docker.secure_init", *init)  # a rerun sets the same password
    assert again.returncode == 0, again.stderr
    listed = trioka("topic", "list", *login)
    assert listed.returncode == 0 and "orders" in listed.stdout.decode(), listed.stderr.decode()

    # Without the admin's certificate INTERNAL takes nobody: a one-line failure, exit 1.
    anonymous = tmp_path / "anonymous.properties"
    anonymous.write_text(f"security.protocol=SSL\nssl.ca.location={tls / 'ca.pem'}\n")
    failed = run_module("deploy.docker.secure_init", *init[:2], "--command-config",
                        str(anonymous), *init[4:8], "--within", "5")  # fmt: skip
    assert failed.returncode == 1 and failed.stderr.startswith("secure-init: error:"), failed.stderr
