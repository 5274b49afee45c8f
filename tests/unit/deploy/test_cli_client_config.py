"""-X on the command line: refused with Kafka's ConfigException texts before any connection,
merged with the options that set the same configs (an option typed wins over the file, -X
wins over an option's default, an option and a -X both typed must agree)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from client.config import ADMIN_CONFIGS, CONSUMER_CONFIGS, PRODUCER_CONFIGS
from deploy.cli import perf, produce_consume
from deploy.cli.client_config import config_problem
from deploy.cli.group import _props
from deploy.cli.main import main

NOWHERE = "127.0.0.1:1"  # nothing listens: a connection attempt would fail differently


@pytest.fixture(autouse=True)
def _no_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TRIOKA_BOOTSTRAP_SERVER", raising=False)
    monkeypatch.setenv("TRIOKA_CONFIG_DIR", str(tmp_path / "config"))


def trioka(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one `error:` line of a usage error (exit 2), without the error: prefix."""
    code, out, err = trioka(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (code, out, err)
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["produce", "t", "-X", "acks=7"],
         "Invalid value 7 for configuration acks: String must be one of: all, -1, 0, 1"),
        (["produce", "t", "-X", "compression.type=foo"],
         "Invalid value foo for configuration compression.type: String must be one of: none, "
         "lz4, zstd"),
        (["produce", "t", "-X", "linger.ms=soon"],
         "Invalid value soon for configuration linger.ms: Not a number of type LONG"),
        (["produce", "t", "-X", "lingr.ms=5"],
         "The configuration 'lingr.ms' was supplied but isn't a known producer config; did you "
         "mean 'linger.ms'?"),
        (["consume", "t", "-X", "check.crcs=maybe"],
         "Invalid value maybe for configuration check.crcs: Expected value to be either true or "
         "false"),
        (["consume", "t", "-X", "auto.offset.reset=first"],
         "Invalid value first for configuration auto.offset.reset: String must be one of: "
         "latest, earliest, none"),
        (["topic", "list", "-X", "request.timeout.ms=0"],
         "Invalid value 0 for configuration request.timeout.ms: Value must be at least 1"),
        (["group", "describe", "g", "-X", "acks=1"],
         "The configuration 'acks' was supplied but isn't a known admin config"),
        (["perf", "produce", "-t", "t", "-n", "1", "-X", "acks=7"],
         "Invalid value 7 for configuration acks: String must be one of: all, -1, 0, 1"),
        (["produce", "t", "-X", "acks=1", "-X", "enable.idempotence=true"],
         "enable.idempotence: must set acks to all to use the idempotent producer (otherwise "
         "retries may write duplicates)"),
    ],
)  # fmt: skip
def test_bad_configs_are_refused_with_kafkas_text_before_any_connection(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    assert refused(capsys, *argv, "-b", NOWHERE) == line


def test_a_command_config_file_is_checked_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "client.properties"
    path.write_text("acks=7\n")
    line = refused(capsys, "produce", "t", "-b", NOWHERE, "--command-config", str(path))
    assert line == "Invalid value 7 for configuration acks: String must be one of: all, -1, 0, 1"


@pytest.fixture
def produced(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The producer configs `trioka produce` would use (nothing is sent)."""
    configs: list[dict[str, Any]] = []

    async def fake(topic: str, source: Any, sep: Any, fmt: Any, partition: Any, headers: Any,
                   config: dict[str, Any]) -> tuple[int, int, str]:  # fmt: skip
        configs.append(config)
        return 0, 0, ""

    monkeypatch.setattr(produce_consume, "_produce", fake)
    return configs


def test_x_wins_over_the_produce_options_defaults(
    capsys: pytest.CaptureFixture[str], produced: list[dict[str, Any]]
) -> None:
    assert trioka(capsys, "produce", "t", "-b", NOWHERE)[0] == 0
    assert (produced[-1]["acks"], produced[-1]["compression.type"]) == ("all", "none")
    assert trioka(capsys, "produce", "t", "-b", NOWHERE, "-X", "acks=0",
                  "-X", "compression.type=lz4")[0] == 0  # fmt: skip
    assert (produced[-1]["acks"], produced[-1]["compression.type"]) == ("0", "lz4")
    assert (
        trioka(capsys, "produce", "t", "-b", NOWHERE, "--acks", "1", "--compression", "zstd")[0]
        == 0
    )
    assert (produced[-1]["acks"], produced[-1]["compression.type"]) == ("1", "zstd")
    # both typed and agreeing (all is -1): fine
    assert trioka(capsys, "produce", "t", "-b", NOWHERE, "--acks", "all", "-X", "acks=-1")[0] == 0
    assert trioka(capsys, "produce", "t", "-b", NOWHERE, "--acks", "1", "-X", "acks=1")[0] == 0
    # the servers: -X wins over the default and over TRIOKA_BOOTSTRAP_SERVER
    assert trioka(capsys, "produce", "t", "-X", "bootstrap.servers=h:9")[0] == 0
    assert produced[-1]["bootstrap.servers"] == "h:9"


def test_an_option_and_a_x_typed_for_the_same_config_must_agree(
    capsys: pytest.CaptureFixture[str], produced: list[dict[str, Any]]
) -> None:
    assert refused(capsys, "produce", "t", "-b", NOWHERE, "--acks", "1", "-X", "acks=all") == (
        "Can't simultaneously specify --acks 1 and 'acks=all', please remove one option"
    )
    assert refused(capsys, "produce", "t", "-b", NOWHERE, "--compression", "lz4",
                   "-X", "compression.type=zstd").startswith("Can't simultaneously specify "
                   "--compression lz4 and 'compression.type=zstd'")  # fmt: skip
    assert refused(capsys, "topic", "list", "-b", NOWHERE, "-X", "bootstrap.servers=h:9") == (
        "Can't simultaneously specify --bootstrap-server 127.0.0.1:1 and "
        "'bootstrap.servers=h:9', please remove one option"
    )
    assert produced == []


def test_the_environment_and_a_file_lose_to_what_is_typed(
    capsys: pytest.CaptureFixture[str],
    produced: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("TRIOKA_BOOTSTRAP_SERVER", "env:1")
    assert trioka(capsys, "produce", "t", "-X", "bootstrap.servers=h:9")[0] == 0
    assert produced[-1]["bootstrap.servers"] == "h:9"
    path = tmp_path / "client.properties"
    path.write_text("acks=0\nbootstrap.servers=file:1\n")
    file = ("--command-config", str(path))
    assert trioka(capsys, "produce", "t", *file)[0] == 0  # the file wins over the defaults
    assert (produced[-1]["acks"], produced[-1]["bootstrap.servers"]) == ("0", "file:1")
    assert trioka(capsys, "produce", "t", *file, "--acks", "1", "-b", "b:1")[0] == 0
    assert (produced[-1]["acks"], produced[-1]["bootstrap.servers"]) == ("1", "b:1")
    assert trioka(capsys, "produce", "t", *file, "-X", "acks=1")[0] == 0
    assert produced[-1]["acks"] == "1"


def test_consume_takes_its_group_and_start_from_x(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, tuple[Any, ...]]] = []

    async def plain(*args: Any) -> int:
        calls.append(("plain", args))
        return 0

    async def grouped(*args: Any) -> int:
        calls.append(("group", args))
        return 0

    monkeypatch.setattr(produce_consume, "_consume", plain)
    monkeypatch.setattr(produce_consume, "_consume_group", grouped)
    b = ("-b", NOWHERE)
    assert trioka(capsys, "consume", "t", *b, "-X", "auto.offset.reset=earliest")[0] == 0
    kind, args = calls[-1]
    assert kind == "plain" and args[2] == "earliest"  # the start: -X over the default latest
    assert trioka(capsys, "consume", "t", *b)[0] == 0
    assert calls[-1][1][2] == "latest"
    assert trioka(capsys, "consume", "t", *b, "-X", "group.id=g")[0] == 0
    kind, args = calls[-1]
    assert kind == "group" and args[2].group_id == "g"
    assert args[4]["group.id"] == "g" and "auto.offset.reset" not in args[4]  # latest by default
    assert trioka(capsys, "consume", "t", *b, "--group", "g", "--from-beginning")[0] == 0
    assert calls[-1][1][4]["auto.offset.reset"] == "earliest"
    assert refused(capsys, "consume", "t", *b, "--from-beginning",
                   "-X", "auto.offset.reset=latest") == (
        "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please "
        "remove one option"
    )  # fmt: skip
    assert refused(capsys, "consume", "t", *b, "--group", "a", "-X", "group.id=b") == (
        "Can't simultaneously specify --group a and 'group.id=b', please remove one option"
    )
    assert "cannot be used with --offset" in refused(
        capsys, "consume", "t", *b, "-X", "group.id=g", "--offset", "3"
    )


def test_perf_produce_acks_default_loses_to_x(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []

    async def lookup(bootstrap: str, topic: str, props: dict[str, Any]) -> int:
        return 1

    async def fake(config: dict[str, Any], *args: Any, **kwargs: Any) -> perf.PerfResult:
        seen.append(config)
        return perf.make_result("produce", 1, 1, 1.0, [1.0])

    monkeypatch.setattr(produce_consume, "topic_partitions", lookup)
    monkeypatch.setattr(perf, "run_produce_perf", fake)
    argv = ["perf", "produce", "-t", "t", "-n", "1", "-b", NOWHERE, "--no-progress"]
    assert trioka(capsys, *argv)[0] == 0
    assert seen[-1]["acks"] == "1"
    assert trioka(capsys, *argv, "-X", "acks=all")[0] == 0
    assert seen[-1]["acks"] == "all"


def test_group_commands_keep_every_admin_config() -> None:
    # They kept only a few timeouts, so a secured cluster's login never reached the broker.
    props = _props(("security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512"), NOWHERE)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"


def test_kafka_texts_for_every_kind_of_check() -> None:
    assert config_problem(PRODUCER_CONFIGS, "acks", "all") is None
    assert config_problem(PRODUCER_CONFIGS, "batch.size", "-1") == (
        "Invalid value -1 for configuration batch.size: Value must be at least 0"
    )
    assert config_problem(PRODUCER_CONFIGS, "batch.size", "99999999999") == (
        "Invalid value 99999999999 for configuration batch.size: Not a number of type INT"
    )
    assert config_problem(CONSUMER_CONFIGS, "enable.auto.commit", "yes") == (
        "Invalid value yes for configuration enable.auto.commit: Expected value to be either "
        "true or false"
    )
    assert config_problem(ADMIN_CONFIGS, "zzz", "1") == (
        "The configuration 'zzz' was supplied but isn't a known admin config"
    )
