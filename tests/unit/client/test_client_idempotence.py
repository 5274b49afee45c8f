"""The idempotent producer: sequence assignment, retries keeping their sequences, the broker's
sequence errors (client.idempotence pure, and the Producer against the fake broker)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

from client import Producer
from client.accumulator import RecordAccumulator
from client.errors import KafkaTimeoutError, OutOfOrderSequenceError
from client.failpoints import LOSE_PRODUCE_RESPONSE
from client.idempotence import SEQUENCE_MAX, IdempotenceManager, increment_sequence
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.produce import ProduceRequest
from protocol.names import TopicPartition
from protocol.record_batch import iter_batches
from tests.unit.client.fake_broker import FakeBroker, wait_for


def produce_requests(broker: FakeBroker) -> list[ProduceRequest]:
    return [r for r in broker.requests if isinstance(r, ProduceRequest)]


TP = TopicPartition("t", 0)


def bootstrap(broker: FakeBroker) -> str:
    return f"127.0.0.1:{broker.port}"


def sent_headers(broker: FakeBroker) -> list[tuple[int, int, int, int]]:
    """(producer id, epoch, base sequence, count) of every batch sent, in order."""
    out = []
    for r in broker.requests:
        if isinstance(r, ProduceRequest):
            for t in r.topics:
                for p in t.partitions:
                    for _, h in iter_batches(p.records):
                        out.append((h.producer_id, h.producer_epoch, h.base_sequence,
                                    h.records_count))  # fmt: skip
    return out


class ScriptedFailpoints:
    """The client's Failpoints port for a test: per name, the value of each evaluation in
    turn (None: it does not fire), then `then` for every later one."""

    def __init__(self, scripts: dict[str, list[object]], then: object = None) -> None:
        self.scripts = {name: list(values) for name, values in scripts.items()}
        self.then = then
        self.evaluations = 0

    def eval(self, name: str) -> object:
        script = self.scripts.get(name)
        if script is None:
            return None
        self.evaluations += 1
        return script.pop(0) if script else self.then


async def release_one_answer(broker: FakeBroker) -> None:
    """Let the first held answer out and hold the next ones again (the fake broker's writer
    reads `held` afresh before each answer)."""
    held, broker.held = broker.held, trio.Event()
    assert held is not None
    held.set()


def accumulator(idem: IdempotenceManager) -> RecordAccumulator:
    acc = RecordAccumulator(batch_size=160, linger_ms=0, idempotence=idem)
    return acc


def fill(acc: RecordAccumulator, records: int) -> None:
    for _ in range(records):
        acc.append(TP, 0, None, b"x" * 30, (), 46, now_ms=0)


# -- pure -----------------------------------------------------------------------------------


def test_nothing_drains_before_the_producer_id() -> None:
    idem = IdempotenceManager()
    acc = accumulator(idem)
    fill(acc, 2)
    assert acc.ready(lambda t, p: 1, 10).ready_nodes == set()
    assert acc.drain(lambda t, p: 1, [1], 1 << 20, 10) == {}
    idem.set_producer_id(7, 0)
    assert acc.ready(lambda t, p: 1, 10).ready_nodes == {1}


def test_sequences_are_given_at_first_drain_and_kept_on_retry() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 3)
    acc = accumulator(idem)
    fill(acc, 5)  # 2 + 2 + 1 records per batch
    (a, b, c) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert [(x.producer_id, x.producer_epoch, x.base_sequence) for x in (a, b, c)] == [
        (7, 3, 0),
        (7, 3, 2),
        (7, 3, 4),
    ]
    assert idem.next_sequence(TP) == 5
    # a and b fail and come back (b first): a goes out alone, first, with its sequence
    acc.reenqueue(b, 0)
    acc.reenqueue(a, 0)
    (again,) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert again is a and a.base_sequence == 0
    # b waits while a is unanswered: it is not the first batch in flight
    assert acc.drain(lambda t, p: 1, [1], 1 << 20, 10) == {}
    idem.acknowledged(a)
    (again,) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert again is b and b.base_sequence == 2
    assert idem.next_sequence(TP) == 5


def test_next_expected_sequence_and_wrap_around() -> None:
    assert increment_sequence(SEQUENCE_MAX, 1) == 0
    assert increment_sequence(SEQUENCE_MAX - 1, 3) == 1
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = accumulator(idem)
    fill(acc, 4)
    a, b = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert idem.is_next_sequence(a) and not idem.is_next_sequence(b)
    idem.acknowledged(a)
    assert idem.is_next_sequence(b)


def test_reset_starts_sequences_over_and_never_restamps_old_batches() -> None:
    """A batch in flight under a dropped id is retried as it was (it may be in the log); its
    partition's new batches wait until it is resolved, then start at 0 under the new id
    (Kafka: no drain while the partition has in-flight batches of a stale id or epoch), so
    the new batch cannot land before the old one."""
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = accumulator(idem)
    fill(acc, 2)
    (old,) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    idem.reset_producer_id()
    assert idem.stale_partitions() == [TP]
    idem.set_producer_id(2, 0)
    fill(acc, 2)
    acc.reenqueue(old, 0)
    (old_again,) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]  # a retry goes alone
    assert (old_again.producer_id, old_again.base_sequence) == (1, 0)
    assert not idem.is_current(old_again)
    assert acc.drain(lambda t, p: 1, [1], 1 << 20, 10) == {}  # the new batch waits for it
    idem.acknowledged(old_again)  # the leader had it: answered with its original offset
    assert idem.stale_partitions() == []
    (new,) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert (new.producer_id, new.base_sequence) == (2, 0)


def test_a_reset_keeps_only_the_partitions_with_batches_in_flight() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = accumulator(idem)
    other = TopicPartition("t", 1)
    fill(acc, 2)
    acc.append(other, 0, None, b"y" * 30, (), 46, now_ms=0)
    a, b = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    idem.acknowledged(b)  # `other` has nothing in flight any more
    idem.reset_producer_id()
    assert idem.stale_partitions() == [TP] and idem.in_flight(other) == []
    idem.set_producer_id(2, 0)
    assert idem.next_sequence(TP) == 0  # the new id's sequences, whatever the old id's were
    idem.failed(a)  # failed for good (expired): the partition is resolved
    assert idem.stale_partitions() == []


def test_a_retried_batch_goes_out_alone_for_its_partition() -> None:
    """Kafka sends one batch per partition per Produce (RecordAccumulator.drain; the broker
    refuses more since v3), so a retry reaches the leader alone and is answered with its own
    original offsets. Sent with new batches behind it, a retry that another producer's writes
    follow in the log has no single base offset for the lot (the broker answers
    DUPLICATE_SEQUENCE_NUMBER, offset -1): so a retry is drained alone; new batches of the
    partition go in the next request, other partitions' batches in the same one."""
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    acc = accumulator(idem)
    other = TopicPartition("t", 1)
    fill(acc, 2)
    (a,) = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    fill(acc, 4)  # two new batches queue while `a` is in flight
    acc.append(other, 0, None, b"y" * 30, (), 46, now_ms=0)
    acc.reenqueue(a, 0)  # `a` failed on the way (its leader died): retried first
    retry = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert [(b.tp, b.base_sequence) for b in retry] == [(TP, 0), (other, 0)]
    assert retry[0] is a and a.attempts == 2
    # The new batches follow in their own request (pipelined behind the retry), in order.
    after = acc.drain(lambda t, p: 1, [1], 1 << 20, 10)[1]
    assert [(b.tp, b.base_sequence) for b in after] == [(TP, 2), (TP, 4)]


# -- the producer against the fake broker ---------------------------------------------------


async def test_the_producer_id_comes_before_the_first_send(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), enable_idempotence=True, linger_ms=0
    ) as producer:
        for i in range(3):
            await producer.send_and_wait("t", b"v%d" % i, partition=0)
    kinds = [type(r) for r in fake_broker.requests if isinstance(r, ProduceRequest | InitProducerIdRequest)]  # fmt: skip
    assert kinds[0] is InitProducerIdRequest and kinds.count(InitProducerIdRequest) == 1
    assert sent_headers(fake_broker) == [(1000, 0, 0, 1), (1000, 0, 1, 1), (1000, 0, 2, 1)]


async def test_retriable_init_producer_id_errors_are_retried(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), enable_idempotence=True, retry_backoff_ms=1
    ) as producer:
        md = await producer.send_and_wait("t", b"a")
    assert md.offset == 0
    inits = [r for r in fake_broker.requests if isinstance(r, InitProducerIdRequest)]
    assert len(inits) == 3


async def test_no_producer_id_fails_the_sends_with_a_clear_error(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.INVALID_REQUEST]
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), enable_idempotence=True
    ) as producer:
        future = await producer.send("t", b"a")
        with pytest.raises(KafkaError, match="could not get a producer id"):
            await future
        with pytest.raises(KafkaError, match=r"enable\.idempotence=false"):
            await producer.send("t", b"b")
    assert fake_broker.topics["t"][0].end == 0


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_retry_of_a_written_batch_is_no_duplicate(
    fake_broker: FakeBroker, idempotent: bool
) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_after_append = [ErrorCode.NETWORK_EXCEPTION]  # written, answer lost
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker),
        retry_backoff_ms=1,
        enable_idempotence=idempotent,
    ) as producer:
        md = await producer.send_and_wait("t", b"once", partition=0)
        md2 = await producer.send_and_wait("t", b"twice", partition=0)
    part = fake_broker.topics["t"][0]
    if idempotent:
        assert (md.offset, md2.offset, part.end) == (0, 1, 2)
        assert [h[2] for h in sent_headers(fake_broker)] == [0, 0, 1]
    else:
        assert (md.offset, md2.offset, part.end) == (1, 2, 3)  # the retry wrote it again
        assert {h[0] for h in sent_headers(fake_broker)} == {-1}


async def test_out_of_order_sequence_fails_the_batch_and_resets_the_id(
    fake_broker: FakeBroker,
) -> None:
    fake_broker.create("t", 1)
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), enable_idempotence=True, linger_ms=0
    ) as producer:
        await producer.send_and_wait("t", b"a", partition=0)
        fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
        with pytest.raises(OutOfOrderSequenceError, match="gap before sequence 1"):
            await producer.send_and_wait("t", b"b", partition=0)
        md = await producer.send_and_wait("t", b"c", partition=0)
    assert md.offset == 1
    assert [(h[0], h[2]) for h in sent_headers(fake_broker)] == [(1000, 0), (1000, 1), (1001, 0)]


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_EPOCH])
async def test_producer_state_errors_fail_the_batch_and_reset_the_id(
    fake_broker: FakeBroker, code: ErrorCode
) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.PRODUCE] = [code]
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), enable_idempotence=True, linger_ms=0
    ) as producer:
        with pytest.raises(KafkaError, match="takes a new producer id") as info:
            await producer.send_and_wait("t", b"a", partition=0)
        assert info.value.code is code
        await producer.send_and_wait("t", b"b", partition=0)
    assert [(h[0], h[2]) for h in sent_headers(fake_broker)] == [(1000, 0), (1001, 0)]


async def test_refused_batches_are_retried_one_at_a_time_oldest_first(
    fake_broker: FakeBroker,
) -> None:
    """Six batches of a partition refused together (retriable): each retry waits until the
    one before it is answered, so they land once each, in order, with their sequences."""
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), enable_idempotence=True, batch_size=60, linger_ms=60000,
        retry_backoff_ms=1,
    ) as producer:  # fmt: skip
        futures = [await producer.send("t", b"v%d" % i, partition=0) for i in range(6)]
        await producer.flush()
        offsets = [(await f).offset for f in futures]
    assert offsets == list(range(6))
    assert fake_broker.topics["t"][0].end == 6
    requests = [
        [
            h.base_sequence
            for t in r.topics
            for p in t.partitions
            for _, h in iter_batches(p.records)
        ]
        for r in fake_broker.requests
        if isinstance(r, ProduceRequest)
    ]
    assert requests == [[0, 1, 2, 3, 4, 5], [0], [1], [2], [3], [4], [5]]


async def test_out_of_order_behind_an_unresolved_batch_is_retried(fake_broker: FakeBroker) -> None:
    """The leader refuses batch 1 with OUT_OF_ORDER while batch 0 is unanswered (it failed on
    the way): not the next expected sequence, so batch 1 is retried, not failed."""
    fake_broker.create("t", 2)
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker),
        enable_idempotence=True,
        batch_size=60,
        linger_ms=0,
        retry_backoff_ms=1,
    ) as producer:
        await producer.send_and_wait("t", b"metadata and producer id", partition=1)
        fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
        fake_broker.held = trio.Event()  # both requests in flight before any answer
        first = await producer.send("t", b"a", partition=0)
        await wait_for(lambda: len(produce_requests(fake_broker)) == 2)
        second = await producer.send("t", b"b", partition=0)
        await wait_for(lambda: len(produce_requests(fake_broker)) == 3)
        fake_broker.held.set()
        fake_broker.held = None
        assert ((await first).offset, (await second).offset) == (0, 1)
    assert fake_broker.topics["t"][0].end == 2
    assert [h[2] for h in sent_headers(fake_broker)] == [0, 0, 1, 0, 1]


# -- a record whose outcome is unknown after a producer id reset (issue 17) -------------------


async def _reset_while_an_answer_is_lost(
    broker: FakeBroker, producer: Producer
) -> tuple[object, object]:
    """Batch A (t-0) and batch B (t-1) in flight under producer id 1000; A is refused for good
    (MESSAGE_TOO_LARGE), which resets the producer id; then B's answer, which comes after, is
    lost (the failpoint: B was written, its request "timed out"). Returns B's future once A
    failed and B's lost answer is delivered. The failpoint's first evaluation is the warm-up's
    answer (a record to topic w: metadata and the producer id come before any answer is
    held), its second A's, its third B's."""
    await producer.send_and_wait("w", b"warm-up")
    await producer.partitions_for("t")
    broker.held = trio.Event()  # both requests in flight before any answer
    broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.MESSAGE_TOO_LARGE]
    a = await producer.send("t", b"A", partition=0)
    await wait_for(lambda: len(produce_requests(broker)) == 2)
    b = await producer.send("t", b"B", partition=1)
    await wait_for(lambda: broker.topics["t"][1].end == 1)  # B is written; its answer held
    await release_one_answer(broker)  # A's answer only
    with pytest.raises(KafkaError) as refused:
        await a
    assert refused.value.code is ErrorCode.MESSAGE_TOO_LARGE
    assert producer._idempotence is not None and producer._idempotence.resets == 1
    assert broker.held is not None
    broker.held.set()  # B's answer, which the failpoint drops
    broker.held = None
    return a, b


async def test_a_lost_answer_after_a_reset_is_retried_as_it_was_not_out_of_order(
    fake_broker: FakeBroker,
) -> None:
    """Issue 17's race (a chaos run with delivery.timeout.ms=5000 found 37 of 74 records
    reported OUT_OF_ORDER_SEQUENCE_NUMBER that were in fact written): B's request got no answer
    after another batch had reset the producer id. Before, B failed at once with
    OutOfOrderSequenceError "not retried: ... was reset since" although the leader had it.
    Now B, whose outcome is unknown, is retried as it was (producer id 1000, sequence 0), as
    Kafka retries an in-flight batch of a stale epoch, and the leader answers the retry with
    B's original offset; C, the new id's first batch to t-1, waits until B is resolved."""
    fake_broker.create("t", 2)
    fake_broker.create("w", 1)
    failpoints = ScriptedFailpoints({LOSE_PRODUCE_RESPONSE: [None, None, True]})
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker),
        linger_ms=0,
        retry_backoff_ms=1,
        failpoints=failpoints,
    ) as producer:
        _, b = await _reset_while_an_answer_is_lost(fake_broker, producer)
        c = await producer.send("t", b"C", partition=1)
        assert (await b).offset == 0
        assert (await c).offset == 1
    assert fake_broker.topics["t"][1].end == 2  # B once, then C
    # The warm-up, A (seq 0 of t-0) and B (seq 0 of t-1) under id 1000, B's retry as it was,
    # then C under the new id.
    assert sent_headers(fake_broker) == [
        (1000, 0, 0, 1), (1000, 0, 0, 1), (1000, 0, 0, 1), (1000, 0, 0, 1), (1001, 0, 0, 1),
    ]  # fmt: skip
    assert failpoints.evaluations == 5


async def test_a_written_batch_whose_answers_keep_getting_lost_expires_as_a_timeout(
    autojump_clock: trio.testing.MockClock, virtual_ms: Callable[[], float]
) -> None:
    """The same race, and every later answer to B lost too (its leader unreachable, say) until
    delivery.timeout.ms (5,000 ms, as in the chaos run): B fails as Kafka reports it, a
    TimeoutException ("Expiring 1 record(s) for t-1:5000 ms has passed since batch creation")
    saying that the outcome is unknown; it was written. Before: OUT_OF_ORDER_SEQUENCE_NUMBER
    at the first lost answer."""
    fake_broker = FakeBroker()
    fake_broker.create("t", 2)
    fake_broker.create("w", 1)
    failpoints = ScriptedFailpoints({LOSE_PRODUCE_RESPONSE: [None, None]}, then=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(fake_broker.serve)
        async with Producer(
            bootstrap_servers=bootstrap(fake_broker),
            linger_ms=0,
            request_timeout_ms=3000,
            delivery_timeout_ms=5000,
            failpoints=failpoints,
        ) as producer:
            start = virtual_ms()  # B is created a few (simulated) ms later
            _, b = await _reset_while_an_answer_is_lost(fake_broker, producer)
            with pytest.raises(KafkaTimeoutError) as expired:
                await b
            assert 5000 <= virtual_ms() - start <= 5100
        error = expired.value
        assert error.code is ErrorCode.REQUEST_TIMED_OUT
        assert error.message.startswith("Expiring 1 record(s) for t-1:"), error.message
        assert "ms has passed since batch creation" in error.message
        assert "outcome unknown" in error.message
        assert fake_broker.topics["t"][1].end == 1  # it was written
        retries = sent_headers(fake_broker)[3:]
        assert len(retries) >= 3 and set(retries) == {(1000, 0, 0, 1)}  # as it was, each time
        nursery.cancel_scope.cancel()


async def test_out_of_order_for_a_batch_of_a_dropped_id_fails_only_when_nothing_is_before_it(
    fake_broker: FakeBroker,
) -> None:
    """Batches of a dropped id are still ordered by their sequences: OUT_OF_ORDER for one
    behind an unresolved batch of that id is retried; for the first one it is the leader's
    refusal (not written), and the batch fails with it, without another reset."""
    fake_broker.create("t", 2)
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), linger_ms=0, retry_backoff_ms=1
    ) as producer:
        await producer.send_and_wait("t", b"warm-up", partition=1)  # id 1000, t-1 seq 0
        fake_broker.held = trio.Event()
        fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.MESSAGE_TOO_LARGE]
        a = await producer.send("t", b"A", partition=0)
        await wait_for(lambda: len(produce_requests(fake_broker)) == 2)
        fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
        b = await producer.send("t", b"B", partition=1)  # t-1 seq 1
        await wait_for(lambda: len(produce_requests(fake_broker)) == 3)
        fake_broker.held.set()
        fake_broker.held = None
        with pytest.raises(KafkaError):
            await a
        with pytest.raises(OutOfOrderSequenceError, match="did not write the batch") as info:
            await b
        assert "had already taken a new producer id" in str(info.value)
        assert producer._idempotence is not None and producer._idempotence.resets == 1
        assert (await producer.send_and_wait("t", b"C", partition=1)).offset == 1
