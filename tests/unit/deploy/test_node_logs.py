"""deploy.cluster.node_logs: the tail of a log file and the lines appended after it."""

from __future__ import annotations

from pathlib import Path

from deploy.cluster.node_logs import follow, tail_lines


def test_tail_lines_reads_the_last_lines_across_blocks(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    lines = [f"line {i} ".encode() + b"x" * 1000 + b"\n" for i in range(300)]
    path.write_bytes(b"".join(lines))
    tail, end = tail_lines(path, 100)
    assert tail == lines[-100:] and end == path.stat().st_size
    assert tail_lines(path, 0)[0] == []
    assert tail_lines(path, None)[0] == lines
    assert tail_lines(path, 1000)[0] == lines


def test_tail_lines_keeps_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"a\nb\nc")
    assert tail_lines(path, 2)[0] == [b"b\n", b"c"]


def test_follow_yields_complete_appended_lines_and_rereads_a_truncated_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"old\n")
    lines = follow(path, path.stat().st_size, poll_s=0.001)
    with path.open("ab") as f:
        f.write(b"new 1\nnew")
    assert next(lines) == b"new 1\n"
    with path.open("ab") as f:
        f.write(b" 2\n")
    assert next(lines) == b"new 2\n"
    path.write_bytes(b"r\n")  # replaced by a shorter file: read from its start
    assert next(lines) == b"r\n"
