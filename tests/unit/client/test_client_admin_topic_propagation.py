"""A topic just created reaches the other brokers' metadata a moment after CreateTopics
answers: `Admin.wait_for_topics` (and `trioka topic create`, which uses it) returns only once
every live broker shows it, so the next command finds it whichever broker it asks."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from click.testing import CliRunner

from client import Admin, NewTopic
from deploy.cli.main import cli
from protocol.messages import ApiKey
from protocol.messages.metadata import MetadataBroker
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.test_client_admin_dead_controller import closed_port


class Controller(FakeBroker):
    """Node 1: creates topics; its Metadata lists `others` as the cluster's other brokers."""

    def __init__(self) -> None:
        super().__init__(node_id=1)
        self.others: list[MetadataBroker] = []

    def _answer(self, key: ApiKey, req: Any) -> Any:
        response = super()._answer(key, req)
        if key is ApiKey.METADATA:
            response = dataclasses.replace(response, brokers=(*response.brokers, *self.others))
        return response


class Lagging(FakeBroker):
    """Node 2: learns a topic of the controller only after `lag` Metadata requests naming it
    (ZK mode's UpdateMetadata, or Raft mode's metadata log, still on the way)."""

    def __init__(self, controller: Controller, lag: int | None) -> None:
        super().__init__(node_id=2)
        self.controller = controller
        self.lag = lag
        self.asked = 0

    def _answer(self, key: ApiKey, req: Any) -> Any:
        if key is ApiKey.METADATA and req.topics:
            for name in req.topics:
                if name in self.controller.topics and name not in self.topics:
                    self.asked += 1
                    if self.lag is not None and self.asked > self.lag:
                        self.create(name, len(self.controller.topics[name]))
        return super()._answer(key, req)


async def cluster(nursery: trio.Nursery, lag: int | None) -> tuple[Controller, Lagging]:
    controller = Controller()
    await nursery.start(controller.serve)
    lagging = Lagging(controller, lag)
    await nursery.start(lagging.serve)
    controller.others = [
        MetadataBroker(node_id=2, host="127.0.0.1", port=lagging.port),
        MetadataBroker(node_id=3, host="127.0.0.1", port=closed_port()),  # down
    ]
    return controller, lagging


def admin_of(controller: Controller, **overrides: Any) -> Admin:
    return Admin(
        bootstrap_servers=f"127.0.0.1:{controller.port}",
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        **overrides,
    )


async def test_waits_until_a_lagging_broker_shows_the_topic(nursery: trio.Nursery) -> None:
    controller, lagging = await cluster(nursery, lag=3)
    async with admin_of(controller) as admin:
        await admin.create_topics([NewTopic("t", 2)])
        assert "t" not in lagging.topics  # the controller answered before node 2 knew it
        with trio.fail_after(5):
            late = await admin.wait_for_topics(["t"], partitions={"t": 2})
    assert late == []  # node 3 is down: skipped, not waited for
    assert len(lagging.topics["t"]) == 2


async def test_names_the_brokers_that_never_show_it(nursery: trio.Nursery) -> None:
    controller, _ = await cluster(nursery, lag=None)
    async with admin_of(controller) as admin:
        await admin.create_topics([NewTopic("t", 1)])
        with trio.fail_after(5):
            late = await admin.wait_for_topics(["t"], timeout_ms=300)
    assert late == [2]


@pytest.fixture
def threaded_cluster() -> Iterator[tuple[Controller, Lagging]]:
    """The fakes in a trio loop of their own thread, since the CLI runs its own trio.run."""
    ready: list[tuple[Controller, Lagging, trio.CancelScope, trio.lowlevel.TrioToken]] = []
    started = threading.Event()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pair = await cluster(nursery, lag=3)
            ready.append((*pair, nursery.cancel_scope, trio.lowlevel.current_trio_token()))
            started.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert started.wait(10)
    controller, lagging, scope, token = ready[0]
    yield controller, lagging
    trio.from_thread.run_sync(scope.cancel, trio_token=token)
    thread.join(10)
    assert not thread.is_alive()


def test_topic_create_returns_once_every_broker_shows_it(
    threaded_cluster: tuple[Controller, Lagging],
) -> None:
    controller, lagging = threaded_cluster
    result = CliRunner().invoke(
        cli,
        ["topic", "create", "t", "-p", "2", "-b", f"127.0.0.1:{controller.port}",
         "-X", "retry.backoff.ms=1", "-X", "retry.backoff.max.ms=5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(lagging.topics.get("t", ())) == 2  # old code: returned while node 2 did not know t


async def test_a_broker_that_does_not_answer_is_reported_not_raised(nursery: trio.Nursery) -> None:
    """A broker slower than request.timeout.ms made the wait raise, and `topic create` fail
    after the topic was created (review finding)."""
    controller, lagging = await cluster(nursery, lag=None)
    lagging.held = trio.Event()  # answers nothing until the test ends
    async with admin_of(controller, request_timeout_ms=200) as admin:
        await admin.create_topics([NewTopic("t", 1)])
        with trio.fail_after(5):
            late = await admin.wait_for_topics(["t"], timeout_ms=600)
        lagging.held.set()
    assert late == [2]
