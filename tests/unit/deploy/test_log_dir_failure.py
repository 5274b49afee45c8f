"""deploy.node.broker_base.log_manager_for: the broker process halts once every log dir has
failed (Kafka's "Shutdown broker because all log dirs in ... have failed"), not before."""

from __future__ import annotations

from pathlib import Path

from broker.config import BrokerConfig
from deploy.node.broker_base import log_manager_for
from protocol.clock import SYSTEM_CLOCK


def test_the_broker_halts_when_its_last_log_dir_fails(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    config = BrokerConfig.from_values({"node.id": 1, "log.dirs": dirs})
    halted: list[int] = []
    log_manager = log_manager_for(config, "c", SYSTEM_CLOCK, halt=halted.append)
    log_manager.startup()
    log_manager.fail_dir(dirs[0], "EIO")
    assert halted == []  # a dir is left: only its partitions are offline
    log_manager.fail_dir(dirs[1], "ENOSPC")
    assert halted == [1]
    log_manager.shutdown()
