"""The simulated network: per-message drop, duplication and delay (delay spread reorders), and
partitions as a set of blocked directions (src -> dst), so both symmetric and asymmetric cuts
are the same mechanism. A partition is checked when a message is sent and again when it
arrives: what was in flight when the cut happened is lost, as on a real link."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    drop_rate: float = 0.05
    duplicate_rate: float = 0.03
    min_delay_ms: int = 1
    max_delay_ms: int = 30

    def __post_init__(self) -> None:
        for name in ("drop_rate", "duplicate_rate"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"NetworkConfig.{name} must be in [0, 1), got {value}")
        if not 0 <= self.min_delay_ms <= self.max_delay_ms:
            raise ValueError(
                "NetworkConfig delays need 0 <= min_delay_ms <= max_delay_ms, got "
                f"{self.min_delay_ms} and {self.max_delay_ms}"
            )


class Network:
    def __init__(self, rng: random.Random, config: NetworkConfig | None = None) -> None:
        self._rng = rng
        self.config = config or NetworkConfig()
        self._blocked: set[tuple[int, int]] = set()
        self.sent = self.dropped = self.duplicated = 0

    def delays(self, src: int, dst: int) -> list[int]:
        """Delivery delays (ms) for one message: [] when it is lost, two when duplicated."""
        self.sent += 1
        cfg = self.config
        if (src, dst) in self._blocked or self._rng.random() < cfg.drop_rate:
            self.dropped += 1
            return []
        delays = [self._rng.randint(cfg.min_delay_ms, cfg.max_delay_ms)]
        if self._rng.random() < cfg.duplicate_rate:
            self.duplicated += 1
            delays.append(self._rng.randint(cfg.min_delay_ms, cfg.max_delay_ms))
        return delays

    def can_deliver(self, src: int, dst: int) -> bool:
        return (src, dst) not in self._blocked

    def partition(self, a: Iterable[int], b: Iterable[int], *, symmetric: bool = True) -> None:
        """Cut a -> b (and b -> a when symmetric). Node ids must not appear on both sides."""
        side_a, side_b = set(a), set(b)
        if side_a & side_b:
            raise ValueError(f"a partition's sides overlap: {sorted(side_a & side_b)}")
        for x in side_a:
            for y in side_b:
                self._blocked.add((x, y))
                if symmetric:
                    self._blocked.add((y, x))

    def heal(self) -> None:
        self._blocked.clear()

    @property
    def partitioned(self) -> bool:
        return bool(self._blocked)

    def reachable(self, src: int, dst: int) -> bool:
        return src == dst or (src, dst) not in self._blocked
