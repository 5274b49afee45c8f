"""The report job's arguments and time window (no Spark needed for the arguments)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "pyspark", reason="analytics.job imports pyspark: pip install 'trioka[analytics]'"
)

from analytics.job import in_window, parse_args, parse_time


def test_times_are_iso_8601_or_epoch_ms_and_utc_by_default() -> None:
    utc = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    assert parse_time("2026-11-26T10:00:00Z") == utc
    assert parse_time("2026-11-26T10:00:00") == utc
    assert parse_time("2026-11-26T11:00:00+01:00") == utc
    assert parse_time(str(int(utc.timestamp() * 1000))) == utc


def test_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path)
    args = parse_args(["--bootstrap-server", "h:1", "--out", str(tmp_path), "--from",
                       "2026-11-26T10:00:00Z", "--spool", "a", "--spool", "b"])  # fmt: skip
    assert (args.bootstrap_server, args.out, args.spools) == (
        "h:1",
        tmp_path,
        (Path("a"), Path("b")),
    )
    assert args.start == datetime(2026, 11, 26, 10, tzinfo=UTC) and args.end is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--out", "x"], "give --bootstrap-server, --spool DIR, or both"),
        (["--out", "x", "-b", "h:1", "--from", "yesterday"], "'yesterday' is not a time"),
        (["--out", "x", "-b", "h:1", "--from", "2000", "--to", "1000"], "is not before --to"),
        (["-b", "h:1"], "the following arguments are required: --out"),
        (["--out", "x", "--spool", "/nonexistent"], "--spool '/nonexistent' does not exist"),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_window_keeps_start_inclusive_end_exclusive(spark: Any) -> None:
    df = spark.createDataFrame(
        [(datetime(2026, 1, 1, h, tzinfo=UTC),) for h in range(5)], "ts timestamp"
    )
    kept = in_window(df, datetime(2026, 1, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 3, tzinfo=UTC))
    assert sorted(r.ts.hour for r in kept.collect()) == [1, 2]
    assert in_window(df, None, None).count() == 5
