"""Kafka's broker-side controlled shutdown (KafkaServer.controlledShutdown, ZK mode).

On SIGTERM a ZK-mode broker asks the controller to move its leaderships away before it stops
serving, so that clients switch leaders at once instead of after its ZooKeeper session ends.
The retry policy is Kafka's:

- `controlled.shutdown.enable=false`: no request at all (the broker just stops; its
  partitions move when the controller sees the registration go, the BrokerChange path);
- otherwise up to `controlled.shutdown.max.retries` retries after the first attempt, with
  `controlled.shutdown.retry.backoff.ms` between attempts. An attempt fails when the request
  fails (no controller, timeout, connection), when the controller answers an error, or when
  it answers with partitions this broker still leads;
- when every attempt failed the broker shuts down anyway (Kafka logs "Proceeding to do an
  unclean shutdown as all the controlled shutdown attempts failed"): its logs are still
  flushed and the clean-shutdown marker written, only leadership moves later, by BrokerChange.

The log events (tests read them): `controlled shutdown succeeded` (attempt),
`controlled shutdown attempt failed` (attempt, reason), `controlled shutdown gave up; shutting
down anyway` (attempts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from broker.config import BrokerConfig
from broker.ports import ControllerChannel
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

log = structlog.get_logger("broker")

SUCCEEDED = "controlled shutdown succeeded"
ATTEMPT_FAILED = "controlled shutdown attempt failed"
GAVE_UP = "controlled shutdown gave up; shutting down anyway"


@dataclass(frozen=True, slots=True)
class ControlledShutdownPolicy:
    """controlled.shutdown.* with request.timeout.ms per attempt."""

    enable: bool = True
    max_retries: int = 3
    retry_backoff_s: float = 5.0
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(
                f"controlled.shutdown.max.retries must be >= 0, got {self.max_retries}"
            )
        if self.retry_backoff_s < 0:
            raise ValueError(
                f"controlled.shutdown.retry.backoff.ms must be >= 0, got {self.retry_backoff_s}"
            )

    @property
    def attempts(self) -> int:
        return self.max_retries + 1

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ControlledShutdownPolicy:
        return cls(
            enable=bool(config["controlled.shutdown.enable"]),
            max_retries=int(config["controlled.shutdown.max.retries"]),
            retry_backoff_s=int(config["controlled.shutdown.retry.backoff.ms"]) / 1000,
            request_timeout_s=int(config["request.timeout.ms"]) / 1000,
        )


async def controlled_shutdown(
    controller: ControllerChannel,
    broker_id: int,
    broker_epoch: Callable[[], int],
    policy: ControlledShutdownPolicy,
) -> bool | None:
    """Ask the controller until no partition is led here. True: done; False: every attempt
    failed (shut down anyway); None: disabled, nothing was asked."""
    if not policy.enable:
        return None
    for attempt in range(1, policy.attempts + 1):
        request = ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch())
        reason: str
        try:
            with trio.fail_after(policy.request_timeout_s):
                response = await controller.submit(request)
            if not isinstance(response, ControlledShutdownResponse):
                reason = f"unexpected answer {type(response).__name__}"
            elif response.error_code == 0 and not response.remaining_partitions:
                log.info(SUCCEEDED, attempt=attempt)
                return True
            elif response.error_code != 0:
                reason = (
                    f"{ErrorCode.from_wire(response.error_code).name}: {response.error_message}"
                )
            else:
                reason = f"{len(response.remaining_partitions)} partitions still led here"
        except trio.TooSlowError:
            reason = f"no answer within {policy.request_timeout_s:g} s"
        except Exception as exc:  # the channel may fail in any way; retry
            reason = str(exc) or repr(exc)
        log.warning(ATTEMPT_FAILED, attempt=attempt, reason=reason)
        if attempt < policy.attempts:
            await trio.sleep(policy.retry_backoff_s)
    log.warning(GAVE_UP, attempts=policy.attempts)
    return False
