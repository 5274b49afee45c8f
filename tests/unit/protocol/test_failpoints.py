"""protocol.failpoints: the TRIOKA_FAILPOINTS grammar, evaluation, the one-time log event."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog

from protocol import failpoints
from tests.support.broker_process import REPO_ROOT

FREEZE = "replica.follower.freeze_hw"
SKIP = "replica.fetcher.skip_source"
ZOMBIE = "controller.zk.ignore_session_loss"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    failpoints.reset()
    yield
    failpoints.reset()


def evals(name: str, n: int) -> list[object | None]:
    return [failpoints.eval(name) for _ in range(n)]


def test_off_by_default_and_unknown_names_are_none() -> None:
    assert failpoints.active() == {}
    assert failpoints.eval(FREEZE) is None
    assert failpoints.eval("not.a.failpoint") is None


def test_return_and_return_with_a_value() -> None:
    failpoints.configure(f"{FREEZE}=return; {SKIP}=return(2); {ZOMBIE}=return(zombie)")
    assert evals(FREEZE, 3) == [True, True, True]
    assert failpoints.eval(SKIP) == 2  # ints come back as ints
    assert failpoints.eval(ZOMBIE) == "zombie"
    assert failpoints.active() == {FREEZE: "return", SKIP: "return(2)", ZOMBIE: "return(zombie)"}


def test_counts_and_chains() -> None:
    failpoints.configure(f"{FREEZE}=2*return(1)->1*off->return(3); {SKIP}=2*return")
    assert evals(FREEZE, 6) == [1, 1, None, 3, 3, 3]
    # A chain that runs out is off.
    assert evals(SKIP, 4) == [True, True, None, None]


def test_off_never_fires() -> None:
    failpoints.configure(f"{FREEZE}=off")
    assert evals(FREEZE, 3) == [None, None, None]


def test_percentages() -> None:
    failpoints.configure(f"{FREEZE}=100%return; {SKIP}=0%return")
    assert evals(FREEZE, 20) == [True] * 20
    assert evals(SKIP, 20) == [None] * 20
    failpoints.configure(f"{FREEZE}=50%3*return->return(9)")
    # Three evaluations count whether they fire or not; then the next term.
    first = evals(FREEZE, 3)
    assert set(first) <= {True, None}
    assert evals(FREEZE, 2) == [9, 9]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (f"{FREEZE}", "expected NAME=TERM"),
        (f"{FREEZE}=", "expected NAME=TERM"),
        ("=return", "expected NAME=TERM"),
        (f"{FREEZE}=sleep(10)", "bad failpoint term 'sleep(10)'"),
        (f"{FREEZE}=return(", "bad failpoint term 'return('"),
        (f"{FREEZE}=return()", "empty value"),
        (f"{FREEZE}=off(1)", "'off' takes no value"),
        (f"{FREEZE}=0*return", "at least 1"),
        (f"{FREEZE}=101%return", "over 100%"),
        (f"{FREEZE}=return->", "bad failpoint term ''"),
        (f"{FREEZE}=return;{FREEZE}=off", "given twice"),
        ("replica.follower.freez_hw=return", "unknown failpoint 'replica.follower.freez_hw'"),
        ("Bad Name=return", "bad failpoint name 'BadName'"),
    ],
)
def test_bad_input_names_the_problem(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match="failpoint") as info:
        failpoints.configure(spec)
    assert message in str(info.value)
    assert failpoints.active() == {}  # nothing half-configured


def test_a_switched_on_failpoint_logs_once() -> None:
    failpoints.configure(f"{FREEZE}=return")
    with structlog.testing.capture_logs() as logs:
        evals(FREEZE, 3)
        failpoints.eval(SKIP)  # off: nothing logged
    enabled = [e for e in logs if e["event"] == "failpoint enabled"]
    assert enabled == [
        {
            "event": "failpoint enabled",
            "failpoint": FREEZE,
            "spec": "return",
            "log_level": "warning",
        }
    ]


def test_every_documented_failpoint_is_in_the_table_of_the_docstring() -> None:
    doc = failpoints.__doc__ or ""
    for name in failpoints.FAILPOINTS:
        assert f"`{name}`" in doc


def test_a_process_reads_the_environment_and_refuses_a_bad_one() -> None:
    code = "from protocol import failpoints; print(failpoints.active())"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), failpoints.ENV_VAR: f"{SKIP}=return(3)"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr({SKIP: "return(3)"})
    env[failpoints.ENV_VAR] = f"{SKIP}=retrun"
    bad = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0
    assert "bad failpoint term 'retrun'" in bad.stderr
