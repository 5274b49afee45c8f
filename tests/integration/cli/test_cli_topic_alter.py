"""`trioka topic alter --topic T --partitions N` (kafka-topics.sh --alter) against a single-node
broker process (KRaft combined, the default): its own controller adds partitions too (CreatePartitions), the new ones
take records, and refusals are one `error:` line."""

from __future__ import annotations

from tests.integration.cli.test_cli_commands import one_error_line, trioka
from tests.support.broker_process import BrokerProcess


def test_topic_alter_adds_partitions_on_a_single_node_broker(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert trioka("topic", "create", "grow", "-b", b, "-p", "1").returncode == 0
    checked = trioka("topic", "alter", "--topic", "grow", "-b", b, "--partitions", "4",
                     "--validate-only")  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert b"Validated topic grow: 4 partitions." in checked.stderr
    assert "PartitionCount: 1" in trioka("topic", "describe", "grow", "-b", b).stdout.decode()

    altered = trioka("topic", "alter", "-t", "grow", "-b", b, "-p", "3")
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == b""
    assert b"Altered topic grow: 3 partitions." in altered.stderr
    described = trioka("topic", "describe", "grow", "-b", b).stdout.decode()
    assert "PartitionCount: 3" in described, described
    produced = trioka("produce", "grow", "-b", b, "--partition", "2", "--acks", "1", stdin="x\ny\n")
    assert produced.returncode == 0, produced.stderr
    consumed = trioka("consume", "grow", "-b", b, "--partition", "2", "--offset", "0")
    assert consumed.stdout == b"x\ny\n", consumed.stderr

    # A manual assignment for the one new partition (this broker is node 1).
    manual = trioka("topic", "alter", "-t", "grow", "-b", b, "-p", "4",
                    "--replica-assignment", str(broker.node_id))  # fmt: skip
    assert manual.returncode == 0, manual.stderr
    assert "PartitionCount: 4" in trioka("topic", "describe", "grow", "-b", b).stdout.decode()

    shrink = one_error_line(trioka("topic", "alter", "-t", "grow", "-b", b, "-p", "2"))
    assert (
        shrink == "error: The topic grow currently has 4 partition(s); 2 would not be an increase."
    )
    missing = one_error_line(trioka("topic", "alter", "-t", "nope", "-b", b, "-p", "2"))
    assert "'nope'" in missing, missing
    wrong = one_error_line(trioka("topic", "alter", "-t", "grow", "-b", b, "-p", "6",
                                  "--replica-assignment", str(broker.node_id)))  # fmt: skip
    assert wrong == (
        "error: grow: Attempted to add 2 additional partition(s), but only 1 assignment(s) were "
        "specified."
    )


def test_topic_alter_usage_errors() -> None:
    bad = trioka("topic", "alter", "-t", "grow", "-b", "127.0.0.1:1", "-p", "3",
                 "--replica-assignment", "1:x")  # fmt: skip
    assert bad.returncode == 2
    assert "--replica-assignment '1:x': partition 0 ('1:x') is not broker ids joined by ':'" in (
        bad.stderr.decode()
    )
    twice = trioka("topic", "alter", "-t", "grow", "-b", "127.0.0.1:1", "-p", "3",
                   "--replica-assignment", "1:1")  # fmt: skip
    assert twice.returncode == 2 and "partition 0 names a broker twice" in twice.stderr.decode()
    no_count = trioka("topic", "alter", "-t", "grow")
    assert no_count.returncode == 2 and "--partitions" in no_count.stderr.decode()
