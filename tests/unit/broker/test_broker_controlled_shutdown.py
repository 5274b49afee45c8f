"""The broker's controlled-shutdown retry policy (controlled.shutdown.*), as Kafka's
KafkaServer.controlledShutdown, against a fake controller on virtual time (autojump clock:
the backoffs cost no real time)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from broker.controlled_shutdown import (
    ATTEMPT_FAILED,
    GAVE_UP,
    SUCCEEDED,
    ControlledShutdownPolicy,
    controlled_shutdown,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)

POLICY = ControlledShutdownPolicy(
    enable=True, max_retries=3, retry_backoff_s=5.0, request_timeout_s=30.0
)


class FakeController:
    """Answers each attempt from a script: a response, an exception to raise, or "hang"."""

    def __init__(self, script: list[object]) -> None:
        self.script = script
        self.requests: list[tuple[float, ControlledShutdownRequest]] = []

    async def submit(self, request: object) -> object:
        assert isinstance(request, ControlledShutdownRequest)
        self.requests.append((trio.current_time(), request))
        step = self.script[min(len(self.requests), len(self.script)) - 1]
        if step == "hang":
            await trio.sleep_forever()
        if isinstance(step, BaseException):
            raise step
        return step


def remaining(n: int) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(
        remaining_partitions=tuple(
            RemainingPartition(topic_name="t", partition_index=p) for p in range(n)
        )
    )


NOT_CONTROLLER = ControlledShutdownResponse(
    error_code=int(ErrorCode.NOT_CONTROLLER), error_message="no controller yet"
)
DONE = ControlledShutdownResponse()


async def test_fails_twice_then_succeeds(autojump_clock: trio.testing.MockClock) -> None:
    controller = FakeController([remaining(2), NOT_CONTROLLER, DONE])
    start = trio.current_time()
    with capture_logs() as logs:
        done = await controlled_shutdown(controller, 7, lambda: 42, POLICY)
    assert done is True
    assert [r.broker_id for _, r in controller.requests] == [7, 7, 7]
    assert all(r.broker_epoch == 42 for _, r in controller.requests)
    # One backoff between consecutive attempts, none after the success.
    times = [t - start for t, _ in controller.requests]
    assert times == [0.0, 5.0, 10.0]
    events = [(e["event"], e.get("attempt")) for e in logs]
    assert events == [(ATTEMPT_FAILED, 1), (ATTEMPT_FAILED, 2), (SUCCEEDED, 3)]
    assert "2 partitions still led here" in logs[0]["reason"]
    assert "NOT_CONTROLLER" in logs[1]["reason"]


async def test_always_failing_gives_up_after_max_retries_plus_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = FakeController(
        [KafkaError(ErrorCode.NETWORK_EXCEPTION, "connection refused"), remaining(1)]
    )
    start = trio.current_time()
    with capture_logs() as logs:
        done = await controlled_shutdown(controller, 7, lambda: 42, POLICY)
    assert done is False
    assert len(controller.requests) == POLICY.max_retries + 1 == 4
    assert [t - start for t, _ in controller.requests] == [0.0, 5.0, 10.0, 15.0]
    assert [e["event"] for e in logs] == [ATTEMPT_FAILED] * 4 + [GAVE_UP]
    assert "connection refused" in logs[0]["reason"]
    assert logs[-1]["attempts"] == 4
    # No wait after the last attempt: the broker goes on shutting down at once.
    assert trio.current_time() - start == 15.0


async def test_an_attempt_without_answer_times_out_and_counts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = FakeController(["hang", DONE])
    policy = ControlledShutdownPolicy(max_retries=1, retry_backoff_s=1.0, request_timeout_s=3.0)
    start = trio.current_time()
    with capture_logs() as logs:
        assert await controlled_shutdown(controller, 1, lambda: 5, policy) is True
    assert [t - start for t, _ in controller.requests] == [0.0, 4.0]
    assert logs[0]["reason"] == "no answer within 3 s"


async def test_the_epoch_is_read_per_attempt(autojump_clock: trio.testing.MockClock) -> None:
    epochs = iter([10, 11])
    controller = FakeController([NOT_CONTROLLER, DONE])
    assert await controlled_shutdown(controller, 1, lambda: next(epochs), POLICY) is True
    assert [r.broker_epoch for _, r in controller.requests] == [10, 11]


async def test_disabled_asks_nothing(autojump_clock: trio.testing.MockClock) -> None:
    controller = FakeController([DONE])
    policy = ControlledShutdownPolicy(enable=False)
    assert await controlled_shutdown(controller, 1, lambda: 5, policy) is None
    assert controller.requests == []


def test_zero_retries_means_one_attempt_and_bad_values_are_named() -> None:
    assert ControlledShutdownPolicy(max_retries=0).attempts == 1
    with pytest.raises(ValueError, match=r"controlled\.shutdown\.max\.retries"):
        ControlledShutdownPolicy(max_retries=-1)
    with pytest.raises(ValueError, match=r"controlled\.shutdown\.retry\.backoff\.ms"):
        ControlledShutdownPolicy(retry_backoff_s=-1)
