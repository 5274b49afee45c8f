"""Describing topic configs from a MetadataImage (shared by the controller and brokers).

In KRaft a broker answers DescribeConfigs from its own image, so this lives next to the image
rather than in the controller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from protocol.config_defs import TOPIC_CONFIGS
from protocol.messages.configs import ConfigSource, DescribeConfigsEntry


def describe_topic_config_entries(
    dynamic: Mapping[str, str],
    static_defaults: Mapping[str, str],
    keys: Sequence[str] | None = None,
    *,
    include_documentation: bool = False,
) -> tuple[DescribeConfigsEntry, ...]:
    """Entries for a topic's configs: the dynamic value (DYNAMIC_TOPIC_CONFIG), else the
    broker's static default (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG).

    `dynamic` is `image.configs.topic_configs(name)`; `static_defaults` maps topic config names
    to values set in the broker's config file (log.retention.ms -> retention.ms, ...). `keys`
    None means every topic config; unknown keys are left out, as Kafka does.
    """
    names = list(TOPIC_CONFIGS.defs) if keys is None else [k for k in keys if k in TOPIC_CONFIGS]
    entries = []
    for name in names:
        definition = TOPIC_CONFIGS.defs[name]
        if name in dynamic:
            value, source = dynamic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        elif name in static_defaults:
            value, source = static_defaults[name], ConfigSource.STATIC_BROKER_CONFIG
        else:
            value = definition.to_string(definition.default)
            source = ConfigSource.DEFAULT_CONFIG
        entries.append(
            DescribeConfigsEntry(
                name=name,
                value=value,
                read_only=definition.read_only,
                config_source=int(source),
                documentation=definition.doc if include_documentation else None,
            )
        )
    return tuple(entries)
