"""`make demo` runs scripts/demo.sh after setup: a Raft-mode cluster (3 controllers, 3 brokers)
under `trioka cluster`, the quorum shown, a consumer group reading and resuming at its commits, a
leader SIGKILLed mid-demo, everything consumed;
`make demo-zk` runs `scripts/demo.sh zk`, the same on ZooKeeper and 3 brokers. Both must work from
a clone and leave no process behind."""

from __future__ import annotations

import os
import re
import subprocess

from tests.support.broker_process import REPO_ROOT


def test_raft_demo_shows_the_quorum_survives_a_leader_kill_and_cleans_up() -> None:
    result = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    # The quorum: --status names the leader among the voters, --replication lists every node.
    assert re.search(r"LeaderId:\s+300[123]", out), out
    assert re.search(r"CurrentVoters:\s+\[3001, 3002, 3003\]", out), out
    assert re.search(r"300[123]\s.*\sLeader", out), out
    assert "Produced 5 records to demo-events." in out
    assert "Produced 3 records to demo-events." in out
    assert "Processed a total of 8 messages." in out
    _assert_group_story(out)
    assert re.search(r"SIGKILLed broker \d \(leader of partition 0\)", out), out
    assert "8 of 8 records were consumed back" in " ".join(out.split())
    assert "active controller" in out and "standby" in out  # cluster status's quorum roles
    # `trioka cluster down` named every process it stopped: none of them is left.
    stopped = [int(pid) for pid in re.findall(r"\(pid (\d+)\): (?:stopped|killed)", out)]
    assert len(stopped) == 5, out  # the two live brokers and the three controllers
    for pid in stopped:
        assert not _alive(pid), f"pid {pid} is still running after the demo"


def test_zk_demo_script_survives_a_leader_kill_and_cleans_up() -> None:
    result = subprocess.run(
        ["bash", "scripts/demo.sh", "zk"], cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Produced 5 records to demo-events." in out
    assert "Produced 3 records to demo-events." in out
    assert "Processed a total of 8 messages." in out
    _assert_group_story(out)
    assert re.search(r"SIGKILLed broker \d \(leader of partition 0\)", out), out
    assert "8 of 8 records were consumed back" in " ".join(out.split())
    # `trioka cluster down` named every process it stopped: none of them is left.
    stopped = [int(pid) for pid in re.findall(r"\(pid (\d+)\): (?:stopped|killed)", out)]
    assert len(stopped) == 3, out  # ZooKeeper and the two live brokers
    for pid in stopped:
        assert not _alive(pid), f"pid {pid} is still running after the demo"


def _assert_group_story(out: str) -> None:
    """The group read the first 5 records, then resumed at its commits for the 3 new ones, and
    `trioka group describe` shows every partition committed to its log end (lag 0)."""
    first, second = (
        out.index("Processed a total of 5 messages."),
        out.index("Processed a total of 3 messages."),
    )
    assert first < second, out
    rows = re.findall(r"^demo-readers\s+demo-events\s+(\d)\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)
    assert sorted(int(p) for p, *_ in rows) == [0, 1, 2], out
    assert sum(int(end) for _, _, end, _ in rows) == 8, out
    assert all(current == end and lag == "0" for _, current, end, lag in rows), out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X") and os.path.exists(f"/proc/{pid}")
