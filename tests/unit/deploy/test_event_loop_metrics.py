"""deploy.telemetry.event_loop: the share of wall time trio's run loop waits for I/O, exported as
Kafka's RequestHandlerAvgIdlePercent and NetworkProcessorAvgIdlePercent (one figure, two names):
the instrument's arithmetic on a clock the test moves, the window between scrapes, and a real
trio run that sleeps and then keeps the loop busy."""

from __future__ import annotations

import time

import trio
from prometheus_client import CollectorRegistry

from deploy.telemetry.event_loop import (
    MARK_EVERY_MS,
    WINDOW_MS,
    EventLoopMetrics,
    LoopIdleInstrument,
    watch_event_loop,
)
from protocol import metric_names as names
from protocol.clock import SYSTEM_CLOCK

IDLE_NAMES = (names.REQUEST_HANDLER_AVG_IDLE_PERCENT, names.NETWORK_PROCESSOR_AVG_IDLE_PERCENT)


class Clock:
    def __init__(self) -> None:
        self.now = 5_000

    def wall_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.now


def wait(instrument: LoopIdleInstrument, clock: Clock, ms: int, timeout: float = 1.0) -> None:
    """One pass of the run loop through its I/O wait, `ms` long."""
    instrument.before_io_wait(timeout)
    clock.now += ms
    instrument.after_io_wait(timeout)


def test_the_instrument_adds_up_the_waits_that_could_block() -> None:
    clock = Clock()
    instrument = LoopIdleInstrument(clock)
    wait(instrument, clock, 300)
    clock.now += 100  # tasks ran
    wait(instrument, clock, 50, timeout=0)  # a poll with runnable tasks: busy, not idle
    wait(instrument, clock, 550)
    assert instrument.idle_ms(clock.now) == 850
    assert instrument.idle_fraction() == 850 / 1000
    # A wait in progress counts up to the scrape (an idle loop is idle, not silent).
    instrument.before_io_wait(30.0)
    clock.now += 1000
    assert instrument.idle_ms(clock.now) == 1850


def test_the_window_is_the_last_scrape_at_least_window_ms_ago() -> None:
    clock = Clock()
    instrument = LoopIdleInstrument(clock)
    assert instrument.idle_fraction() is None  # no time yet
    wait(instrument, clock, WINDOW_MS)  # all idle
    assert instrument.idle_fraction() == 1.0
    clock.now += WINDOW_MS  # then all busy: the window is that, not the average since start
    assert instrument.idle_fraction() == 0.0
    # A second scraper close behind does not shrink the window below WINDOW_MS.
    clock.now += MARK_EVERY_MS
    wait(instrument, clock, MARK_EVERY_MS)
    expected = MARK_EVERY_MS / (WINDOW_MS + 2 * MARK_EVERY_MS)
    assert instrument.idle_fraction() == expected


def test_both_names_give_the_bound_loops_figure_and_nothing_unbound() -> None:
    registry = CollectorRegistry()
    metrics = EventLoopMetrics(registry)
    assert all(registry.get_sample_value(n) is None for n in IDLE_NAMES)
    clock = Clock()
    instrument = LoopIdleInstrument(clock)
    metrics.bind(instrument, instrument)
    wait(instrument, clock, 250)
    clock.now += 750
    assert [registry.get_sample_value(n) for n in IDLE_NAMES] == [0.25, 0.25]
    metrics.unbind(instrument)
    assert all(registry.get_sample_value(n) is None for n in IDLE_NAMES)


def test_a_real_loop_reads_idle_while_sleeping_and_busy_while_computing() -> None:
    registry = CollectorRegistry()
    metrics = EventLoopMetrics(registry)
    name = names.REQUEST_HANDLER_AVG_IDLE_PERCENT
    figures = []

    async def main() -> None:
        with watch_event_loop(SYSTEM_CLOCK, metrics):
            await trio.sleep(0.4)  # waits in epoll: idle
            figures.append(registry.get_sample_value(name))
            busy_until = time.monotonic() + 0.4
            while time.monotonic() < busy_until:  # the loop never reaches its I/O wait
                pass
            figures.append(registry.get_sample_value(name))
        figures.append(registry.get_sample_value(name))

    trio.run(main)
    slept, half, unwatched = figures
    assert slept is not None and slept > 0.9
    assert half is not None and 0.3 < half < 0.7  # since the start: 0.4 s of 0.8 s idle
    assert unwatched is None
