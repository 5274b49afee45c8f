"""DeleteTopics, IncrementalAlterConfigs and DescribeConfigs tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    ResourceType,
)
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from protocol.metadata.records import ConfigRecord, RemoveTopicRecord

TOPIC = int(ResourceType.TOPIC)


@pytest.fixture
def harness(make_harness: Callable[..., Any]) -> Any:
    h = make_harness(topic_defaults={"retention.bytes": "1000000"})
    response = h.apply(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="t",
                    num_partitions=2,
                    configs=(CreatableTopicConfig(name="retention.ms", value="1000"),),
                ),
                CreatableTopic(name="u"),
            )
        )
    )
    assert [r.error_code for r in response.topics] == [0, 0]
    return h


@pytest.mark.parametrize(
    ("names", "codes"),
    [
        (("t",), [ErrorCode.NONE]),
        (("t", "u"), [ErrorCode.NONE, ErrorCode.NONE]),
        (("nope",), [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]),
        (("t", "nope"), [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]),
        (("t", "t"), [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]),
        (("",), [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]),
    ],
)
def test_delete_topics(harness: Any, names: tuple[str, ...], codes: list[ErrorCode]) -> None:
    ids = {n: t.topic_id for n, t in harness.state.image.topics.by_name.items()}
    result = harness.run(DeleteTopicsRequest(topic_names=names))
    assert [ErrorCode(r.error_code) for r in result.response.responses] == codes
    removed = [r.topic_id for r in result.records if isinstance(r, RemoveTopicRecord)]
    ok = [r for r in result.response.responses if r.error_code == 0]
    assert removed == [ids[r.name] for r in ok] == [r.topic_id for r in ok]
    for r in result.response.responses:
        assert (r.error_message is None) == (r.error_code == 0)
    harness.commit(result.records)
    for r in ok:
        assert harness.state.topic(r.name) is None
    if any(r.name == "t" for r in ok):
        assert harness.state.image.configs.topic_configs("t") == {}


def test_delete_disabled(make_harness: Callable[..., Any]) -> None:
    h = make_harness(delete_topic_enable=False)
    h.apply(CreateTopicsRequest(topics=(CreatableTopic(name="t"),)))
    result = h.run(DeleteTopicsRequest(topic_names=("t",)))
    assert result.response.responses[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED
    assert "delete.topic.enable" in (result.response.responses[0].error_message or "")
    assert result.records == []


def alter(
    *configs: tuple[str, AlterConfigOp, str | None],
    name: str = "t",
    resource_type: int = TOPIC,
) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=resource_type,
        resource_name=name,
        configs=tuple(
            AlterableConfig(name=k, config_operation=int(op), value=v) for k, op, v in configs
        ),
    )


SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOp.SET,
    AlterConfigOp.DELETE,
    AlterConfigOp.APPEND,
    AlterConfigOp.SUBTRACT,
)

ALTER_CASES = [
    (
        "set",
        [alter(("retention.ms", SET, "2000"))],
        [ErrorCode.NONE],
        {"retention.ms": "2000"},
        None,
    ),
    (
        "set-canonical",
        [alter(("unclean.leader.election.enable", SET, "TRUE"))],
        [ErrorCode.NONE],
        {"retention.ms": "1000", "unclean.leader.election.enable": "true"},
        None,
    ),
    ("delete", [alter(("retention.ms", DELETE, None))], [ErrorCode.NONE], {}, None),
    (
        "delete-unset",
        [alter(("segment.ms", DELETE, None))],
        [ErrorCode.NONE],
        {"retention.ms": "1000"},
        None,
    ),
    (
        "unknown-key",
        [alter(("retention.mss", SET, "1"))],
        [ErrorCode.INVALID_CONFIG],
        {"retention.ms": "1000"},
        "retention.mss",
    ),
    (
        "bad-value",
        [alter(("min.insync.replicas", SET, "0"))],
        [ErrorCode.INVALID_CONFIG],
        {"retention.ms": "1000"},
        "min.insync.replicas",
    ),
    (
        "set-null",
        [alter(("retention.ms", SET, None))],
        [ErrorCode.INVALID_CONFIG],
        {"retention.ms": "1000"},
        "retention.ms",
    ),
    (
        "all-or-nothing",
        [alter(("segment.ms", SET, "5"), ("retention.ms", SET, "x"))],
        [ErrorCode.INVALID_CONFIG],
        {"retention.ms": "1000"},
        "retention.ms",
    ),
    (
        "append-non-list",
        [alter(("retention.ms", APPEND, "5"))],
        [ErrorCode.INVALID_CONFIG],
        {"retention.ms": "1000"},
        "because its type is not LIST",
    ),
    (
        "append-list",
        [alter(("cleanup.policy", APPEND, "delete"))],
        [ErrorCode.NONE],
        {"retention.ms": "1000", "cleanup.policy": "delete"},
        None,
    ),
    (
        "append-bad-choice",
        [alter(("cleanup.policy", APPEND, "bogus"))],
        [ErrorCode.INVALID_CONFIG],
        {"retention.ms": "1000"},
        "cleanup.policy",
    ),
    (
        "subtract-list",
        [alter(("cleanup.policy", SUBTRACT, "delete"))],
        [ErrorCode.NONE],
        {"retention.ms": "1000", "cleanup.policy": ""},
        None,
    ),
    (
        "unknown-op",
        [alter(("retention.ms", 9, "1"))],  # type: ignore[arg-type]
        [ErrorCode.INVALID_REQUEST],
        {"retention.ms": "1000"},
        "Unknown alter config operation 9",
    ),
    (
        "duplicate-key",
        [alter(("retention.ms", SET, "1"), ("retention.ms", DELETE, None))],
        [ErrorCode.INVALID_REQUEST],
        {"retention.ms": "1000"},
        "retention.ms",
    ),
    (
        "unknown-topic",
        [alter(("retention.ms", SET, "1"), name="nope")],
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        {"retention.ms": "1000"},
        "'nope' does not exist",
    ),
    (
        "broker-resource",
        [alter(("retention.ms", SET, "1"), name="1", resource_type=4)],
        [ErrorCode.INVALID_REQUEST],
        {"retention.ms": "1000"},
        "TOPIC (2) resources only",
    ),
    (
        "duplicate-resource",
        [alter(("retention.ms", SET, "1")), alter(("segment.ms", SET, "1"))],
        [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST],
        {"retention.ms": "1000"},
        "Duplicate resource 't'",
    ),
    (
        "one-good-one-bad",
        [alter(("retention.ms", SET, "7")), alter(("x", SET, "1"), name="u")],
        [ErrorCode.NONE, ErrorCode.INVALID_CONFIG],
        {"retention.ms": "7"},
        None,
    ),
]


@pytest.mark.parametrize(
    ("resources", "codes", "after", "needle"),
    [c[1:] for c in ALTER_CASES],
    ids=[c[0] for c in ALTER_CASES],
)
def test_incremental_alter_configs(
    harness: Any,
    resources: list[AlterConfigsResource],
    codes: list[ErrorCode],
    after: dict[str, str],
    needle: str | None,
) -> None:
    response = harness.apply(IncrementalAlterConfigsRequest(resources=tuple(resources)))
    assert [ErrorCode(r.error_code) for r in response.responses] == codes
    if needle is not None:
        assert any(needle in (r.error_message or "") for r in response.responses)
    assert dict(harness.state.image.configs.topic_configs("t")) == after


def test_alter_validate_only_and_no_op(harness: Any) -> None:
    result = harness.run(
        IncrementalAlterConfigsRequest(
            resources=(alter(("retention.ms", SET, "5")),), validate_only=True
        )
    )
    assert result.response.responses[0].error_code == 0 and result.records == []
    same = harness.run(
        IncrementalAlterConfigsRequest(resources=(alter(("retention.ms", SET, "1000")),))
    )
    assert same.response.responses[0].error_code == 0 and same.records == []
    changed = harness.run(
        IncrementalAlterConfigsRequest(resources=(alter(("retention.ms", SET, "5")),))
    )
    assert changed.records == [
        ConfigRecord(resource_type=TOPIC, resource_name="t", name="retention.ms", value="5")
    ]


def describe(
    name: str, keys: tuple[str, ...] | None = None, resource_type: int = TOPIC
) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=keys
            ),
        )
    )


def test_describe_sources(harness: Any) -> None:
    (result,) = harness.apply(describe("t")).results
    assert result.error_code == 0
    entries = {e.name: e for e in result.configs}
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["retention.bytes"].value == "1000000"
    assert entries["retention.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert entries["cleanup.policy"].value == "delete"
    assert entries["unclean.leader.election.enable"].value == "false"
    assert all(e.documentation is None for e in result.configs)


@pytest.mark.parametrize(
    ("request_", "code", "names"),
    [
        (describe("t", ("retention.ms", "nope")), ErrorCode.NONE, ["retention.ms"]),
        (describe("t", ()), ErrorCode.NONE, []),
        (describe("nope"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        (describe("1", resource_type=4), ErrorCode.INVALID_REQUEST, []),
    ],
)
def test_describe_cases(
    harness: Any, request_: DescribeConfigsRequest, code: ErrorCode, names: list[str]
) -> None:
    result = harness.run(request_)
    assert result.records == []
    (r,) = result.response.results
    assert r.error_code == code
    assert [e.name for e in r.configs] == names
    assert (r.error_message is None) == (code == ErrorCode.NONE)


def test_describe_documentation(harness: Any) -> None:
    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=TOPIC, resource_name="u", configuration_keys=("segment.ms",)
            ),
        ),
        include_documentation=True,
    )
    (r,) = harness.run(request).response.results
    assert r.configs[0].documentation
