"""The quorum-state file: Kafka's JSON, atomic replacement, clear errors for torn or bad files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import storage.files
from raft.core.types import QuorumStateData
from raft.quorum_state import (
    QUORUM_STATE_FILE,
    FileQuorumStateStore,
    QuorumStateError,
    StoredQuorumState,
    decode_quorum_state,
    encode_quorum_state,
)


def store(tmp_path: Path, **kw: object) -> FileQuorumStateStore:
    return FileQuorumStateStore(tmp_path / "__cluster_metadata-0", **kw)  # type: ignore[arg-type]


def test_no_file_means_no_state(tmp_path: Path) -> None:
    s = store(tmp_path)
    assert s.read() is None and s.read_stored() is None
    assert s.path == str(tmp_path / "__cluster_metadata-0" / QUORUM_STATE_FILE)


def test_write_then_read_round_trips_the_core_state(tmp_path: Path) -> None:
    s = store(tmp_path, voters=(3, 1, 2), cluster_id="q1Sh-9_ISia_zwGINzRvyQ")
    for state in (
        QuorumStateData(epoch=1, voted_for=2),
        QuorumStateData(epoch=1, voted_for=2, leader_id=2),
        QuorumStateData(epoch=4, leader_id=1),
        QuorumStateData(),
    ):
        s.write(state)
        assert s.read() == state
    assert not os.path.exists(s.path + ".tmp")


def test_file_is_kafkas_v0_json(tmp_path: Path) -> None:
    s = store(tmp_path, voters=(3, 1, 2))
    s.write(QuorumStateData(epoch=5, voted_for=-1, leader_id=1))
    doc = json.loads(Path(s.path).read_text())
    assert doc == {
        "clusterId": "",
        "leaderId": 1,
        "leaderEpoch": 5,
        "votedId": -1,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    stored = s.read_stored()
    assert stored == StoredQuorumState(
        leader_epoch=5, leader_id=1, voted_id=-1, current_voters=(1, 2, 3)
    )


def test_reads_kafkas_own_files(tmp_path: Path) -> None:
    """Files as Kafka writes them, v0 (3.x) and v1 (KIP-853, with a directory id)."""
    v0 = b'{"clusterId":"","leaderId":-1,"leaderEpoch":7,"votedId":2,"appliedOffset":0,"currentVoters":null,"data_version":0}'
    assert decode_quorum_state("f", v0).to_core() == QuorumStateData(epoch=7, voted_for=2)
    v1 = b'{"leaderId":3,"leaderEpoch":9,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    assert decode_quorum_state("f", v1) == StoredQuorumState(leader_epoch=9, leader_id=3)


def test_every_torn_prefix_of_the_file_is_refused_naming_path_and_problem(tmp_path: Path) -> None:
    """A torn write (any prefix of a good file) must never read as some other state."""
    s = store(tmp_path, voters=(1, 2, 3))
    s.write(QuorumStateData(epoch=12, voted_for=3))
    good = Path(s.path).read_bytes()
    for cut in range(len(good)):
        Path(s.path).write_bytes(good[:cut])
        with pytest.raises(QuorumStateError) as info:
            s.read()
        assert info.value.path == s.path
        assert s.path in str(info.value)
        assert ("empty" if cut == 0 else "not valid JSON") in str(info.value)
    Path(s.path).write_bytes(good)
    assert s.read() == QuorumStateData(epoch=12, voted_for=3)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\xff\xfe{", "not UTF-8"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b'{"leaderEpoch": 1}', "field 'data_version' is missing"),
        (b'{"leaderEpoch": 1, "data_version": 2}', "data_version 2 is not supported"),
        (b'{"leaderEpoch": "1", "data_version": 0}', "field 'leaderEpoch' must be an integer"),
        (b'{"leaderEpoch": true, "data_version": 0}', "field 'leaderEpoch' must be an integer"),
        (b'{"leaderEpoch": 1, "votedId": -2, "data_version": 0}', "'votedId' must be >= -1"),
        (b'{"leaderEpoch": -1, "votedId": 2, "data_version": 0}', "but no leaderEpoch"),
        (b'{"leaderEpoch": 1, "clusterId": 5, "data_version": 0}', "'clusterId' must be a string"),
        (b'{"leaderEpoch": 1, "currentVoters": 3, "data_version": 0}', "list or null"),
        (
            b'{"leaderEpoch": 1, "currentVoters": [{"voterId": "a"}], "data_version": 0}',
            "'currentVoters' entries",
        ),
    ],
)
def test_corrupt_files_are_refused_with_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(QuorumStateError) as info:
        decode_quorum_state("/x/quorum-state", data)
    assert problem in str(info.value)
    assert str(info.value).startswith("quorum-state file /x/quorum-state: ")


def test_a_crash_before_the_rename_keeps_the_old_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write tmp, fsync, rename: killed before the rename, the old file is still whole."""
    s = store(tmp_path)
    s.write(QuorumStateData(epoch=3, voted_for=1))

    def crash(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(storage.files.os, "replace", crash)
    with pytest.raises(QuorumStateError) as info:
        s.write(QuorumStateData(epoch=4, voted_for=2))
    assert "cannot write it" in str(info.value) and info.value.os_error is not None
    monkeypatch.undo()
    assert s.read() == QuorumStateData(epoch=3, voted_for=1)
    # A left-over half-written tmp file (a kill mid-write) is ignored and then replaced.
    Path(s.path + ".tmp").write_bytes(b'{"leaderEpoch": 9, "vot')
    assert s.read() == QuorumStateData(epoch=3, voted_for=1)
    s.write(QuorumStateData(epoch=4, voted_for=2))
    assert s.read() == QuorumStateData(epoch=4, voted_for=2)
    assert not os.path.exists(s.path + ".tmp")


def test_write_is_fsynced_file_then_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(storage.files.os, "fsync", spy)
    s = store(tmp_path)
    s.write(QuorumStateData(epoch=1, voted_for=1))
    assert synced == [s.path + ".tmp", os.path.dirname(s.path)]


def test_unreadable_file_names_the_os_error(tmp_path: Path) -> None:
    s = store(tmp_path)
    os.makedirs(s.path)  # a directory where the file should be
    with pytest.raises(QuorumStateError) as info:
        s.read()
    assert "cannot read it" in str(info.value) and info.value.os_error is not None


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        (StoredQuorumState(leader_epoch=-2), "leader_epoch must be an integer >= -1"),
        (StoredQuorumState(leader_epoch=-1, voted_id=3), "without an epoch"),
        (StoredQuorumState(leader_epoch=1, current_voters=(1, -1)), "voter ids"),
    ],
)
def test_invalid_state_is_not_written(state: StoredQuorumState, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        encode_quorum_state(state)


def test_clear_removes_file_and_tmp(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(QuorumStateData(epoch=1))
    Path(s.path + ".tmp").write_bytes(b"x")
    s.clear()
    assert s.read() is None and not os.path.exists(s.path + ".tmp")
    s.clear()  # nothing there: fine
