"""deploy.node.failpoints: the TRIOKA_FAILPOINTS grammar, evaluation, the one-time log event, and
the registry a node process builds from its environment at start (never at import)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from deploy.node import failpoints
from deploy.node.failpoints import Failpoints
from deploy.node.runtime import NodeRuntime
from protocol.config_defs import ConfigError
from tests.support.broker_process import REPO_ROOT

FREEZE = "replica.follower.freeze_hw"
SKIP = "replica.fetcher.skip_source"
ZOMBIE = "controller.zk.ignore_session_loss"


def evals(points: Failpoints, name: str, n: int) -> list[object | None]:
    return [points.eval(name) for _ in range(n)]


def test_off_by_default_and_unknown_names_are_none() -> None:
    points = Failpoints()
    assert points.active() == {}
    assert points.eval(FREEZE) is None
    assert points.eval("not.a.failpoint") is None


def test_return_and_return_with_a_value() -> None:
    points = Failpoints(f"{FREEZE}=return; {SKIP}=return(2); {ZOMBIE}=return(zombie)")
    assert evals(points, FREEZE, 3) == [True, True, True]
    assert points.eval(SKIP) == 2  # ints come back as ints
    assert points.eval(ZOMBIE) == "zombie"
    assert points.active() == {FREEZE: "return", SKIP: "return(2)", ZOMBIE: "return(zombie)"}


def test_counts_and_chains() -> None:
    points = Failpoints(f"{FREEZE}=2*return(1)->1*off->return(3); {SKIP}=2*return")
    assert evals(points, FREEZE, 6) == [1, 1, None, 3, 3, 3]
    # A chain that runs out is off.
    assert evals(points, SKIP, 4) == [True, True, None, None]


def test_off_never_fires() -> None:
    points = Failpoints(f"{FREEZE}=off")
    assert evals(points, FREEZE, 3) == [None, None, None]


def test_percentages() -> None:
    points = Failpoints(f"{FREEZE}=100%return; {SKIP}=0%return")
    assert evals(points, FREEZE, 20) == [True] * 20
    assert evals(points, SKIP, 20) == [None] * 20
    points = Failpoints(f"{FREEZE}=50%3*return->return(9)")
    # Three evaluations count whether they fire or not; then the next term.
    first = evals(points, FREEZE, 3)
    assert set(first) <= {True, None}
    assert evals(points, FREEZE, 2) == [9, 9]


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
        Failpoints(spec)
    assert message in str(info.value)


def test_a_switched_on_failpoint_logs_once() -> None:
    points = Failpoints(f"{FREEZE}=return")
    with structlog.testing.capture_logs() as logs:
        evals(points, FREEZE, 3)
        points.eval(SKIP)  # off: nothing logged
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


def test_percentages_follow_the_seed_of_the_environment() -> None:
    env = {failpoints.ENV_VAR: f"{FREEZE}=50%return", failpoints.SEED_ENV_VAR: "7"}
    first = evals(Failpoints.from_environ(env), FREEZE, 40)
    assert first == evals(Failpoints.from_environ(env), FREEZE, 40)
    assert first == evals(Failpoints(f"{FREEZE}=50%return", rng=random.Random(7)), FREEZE, 40)
    assert {True, None} == set(first)


def test_the_runtime_reads_the_environment_and_names_it_when_bad() -> None:
    runtime = NodeRuntime.from_environ({failpoints.ENV_VAR: f"{SKIP}=return(3)"})
    assert runtime.failpoints.active() == {SKIP: "return(3)"}
    assert NodeRuntime.from_environ({}).failpoints.active() == {}
    with pytest.raises(ConfigError, match="TRIOKA_FAILPOINTS: bad failpoint term 'retrun'"):
        NodeRuntime.from_environ({failpoints.ENV_VAR: f"{SKIP}=retrun"})


def test_nothing_is_read_at_import_and_a_process_refuses_a_bad_spec_in_one_line(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), failpoints.ENV_VAR: f"{SKIP}=retrun"}
    imported = subprocess.run(
        [sys.executable, "-c", "import deploy.node.broker, deploy.node.failpoints"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    started = subprocess.run(
        [sys.executable, "-m", "deploy.node.broker", "--override", f"log.dirs={tmp_path}"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 1
    assert started.stderr.strip().splitlines() == [
        "error: TRIOKA_FAILPOINTS: bad failpoint term 'retrun' in failpoint entry "
        f"'{SKIP}=retrun': expected [P%][N*]off|return|return(VALUE)"
    ]
