"""deploy.docker.secure_setup (`scripts/docker-setup.sh --secure`): build/tls for
docker-compose.secure.yml made once and kept on every rerun (CA, keys, the admin's password),
readable by the containers' user and by nobody else on the host; and the healthcheck's client
options (deploy.docker.healthcheck)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import javaproperties
import pytest
from cryptography import x509

from deploy.docker import healthcheck, secure_setup

ROOT = Path(__file__).resolve().parents[3]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_rerun_keeps_the_ca_every_key_and_the_password(tmp_path: Path) -> None:
    tls = tmp_path / "tls"
    assert secure_setup.main([str(tls)]) == 0
    first = snapshot(tls)
    names = {f"{n}.pem" for n in secure_setup.COMPOSE_NODES}
    assert set(first) == names | {"ca.pem", "ca-key.pem", "admin.pem", "client.properties"}
    assert secure_setup.main([str(tls)]) == 0
    assert snapshot(tls) == first
    (tls / "broker-2.pem").unlink()  # only what is missing is made again
    secure_setup.setup(tls)
    again = snapshot(tls)
    assert again.pop("broker-2.pem") != first.pop("broker-2.pem")
    assert again == first


def test_the_admins_login_is_for_host_clients_and_an_existing_password_is_kept(
    tmp_path: Path,
) -> None:
    tls = tmp_path / "tls"
    tls.mkdir()
    (tls / "client.properties").write_text("sasl.password=kept-secret\nsasl.username=old\n")
    secure_setup.setup(tls)
    with (tls / "client.properties").open() as f:
        settings = javaproperties.load(f)
    assert settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": "kept-secret",
        "ssl.ca.location": str((tls / "ca.pem").resolve()),
    }


def test_a_new_password_is_random(tmp_path: Path) -> None:
    passwords = set()
    for run in ("a", "b"):
        secure_setup.setup(tmp_path / run)
        with (tmp_path / run / "client.properties").open() as f:
            passwords.add(javaproperties.load(f)["sasl.password"])
    assert len(passwords) == 2 and all(len(p) >= 32 for p in passwords)


def test_the_containers_can_read_what_they_mount_and_other_host_users_cannot(
    tmp_path: Path,
) -> None:
    tls = tmp_path / "tls"
    secure_setup.setup(tls)
    assert mode(tls) == 0o700, "the directory is what keeps other host users out"
    assert mode(tls / "ca-key.pem") == 0o600, "the CA's key is never mounted"
    mounted = [tls / "ca.pem", tls / "admin.pem", tls / "client.properties"]
    mounted += [tls / f"{n}.pem" for n in secure_setup.COMPOSE_NODES]
    owned = os.geteuid() == secure_setup.CONTAINER_UID
    for path in mounted:
        if owned:
            assert path.stat().st_uid == secure_setup.CONTAINER_UID and mode(path) & 0o400
        else:
            assert mode(path) == 0o644, (
                f"{path.name}: uid {secure_setup.CONTAINER_UID} cannot read it"
            )


def test_the_containers_uid_is_the_images_user() -> None:
    for dockerfile in ("Dockerfile", "Dockerfile.analytics"):
        text = (ROOT / "deploy/docker" / dockerfile).read_text()
        assert re.search(rf"useradd [^\n]*--uid {secure_setup.CONTAINER_UID}\b", text), dockerfile


def test_node_certificates_answer_to_their_aliases_and_the_admins_to_nothing(
    tmp_path: Path,
) -> None:
    tls = tmp_path / "tls"
    secure_setup.setup(tls)

    def sans(name: str) -> list[str]:
        cert = x509.load_pem_x509_certificate((tls / f"{name}.pem").read_bytes())
        try:
            ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return []
        return [*ext.get_values_for_type(x509.DNSName),
                *(str(ip) for ip in ext.get_values_for_type(x509.IPAddress))]  # fmt: skip

    assert sans("zk-broker-2") == ["zk-broker-2", "broker-2", "localhost", "127.0.0.1"]
    assert sans("controller-1") == ["controller-1", "localhost", "127.0.0.1"]
    assert sans("admin") == []


def test_bad_arguments_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert secure_setup.main(["a", "b"]) == 2
    assert secure_setup.main(["--help"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_the_healthchecks_client_options_each_x_wins_over_the_file(tmp_path: Path) -> None:
    props = tmp_path / "node.properties"
    props.write_text("# the node's\nsecurity.protocol=SSL\nssl.ca.location=/ca.pem\n")
    args = healthcheck.parser().parse_intermixed_args(
        ["broker", "localhost:9092", "--command-config", str(props), "1",
         "-X", "ssl.ca.location=/other.pem"]
    )  # fmt: skip
    assert [args.kind, args.address, args.node_id] == ["broker", "localhost:9092", 1]
    client = healthcheck.client_settings(args)
    assert client == {"security.protocol": "SSL", "ssl.ca.location": "/other.pem"}
    args = healthcheck.parser().parse_intermixed_args(
        [f"--command-config={props}", "controller", "h:1"]
    )
    assert healthcheck.client_settings(args)["security.protocol"] == "SSL"


@pytest.mark.parametrize(
    "argv",
    [
        ["broker", "h:1", "1", "-X"],
        ["broker", "h:1", "1", "-X", "novalue"],
        ["controller", "h:1", "--command-config", "/no/such/file"],
    ],
)
def test_bad_healthcheck_options_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert healthcheck.main(argv) == 2
    assert "error:" in capsys.readouterr().err
