"""Per-broker request channels of the active controller (Kafka's ControllerChannelManager)."""

import trio  # noqa: F401
