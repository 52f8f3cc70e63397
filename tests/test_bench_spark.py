"""The Spark publishing benchmark's exactly-once check finds every kind of fault on hand-built
packets, and the multi-node harness runs end to end at a tiny size with the report's shape.
The harness test checks the report's consistency, not that no row was lost: the benchmark
reports what the sink does, and the check itself is tested here on known faults."""

from __future__ import annotations

import struct

import pytest

from overlay.spark.rows import HEADER, MAGIC
from testnet.bench import spark_publish
from testnet.bench.row_check import check_rows, row_value

ROW_BYTES = 20


def packet(rows: range | list[int], row_bytes: int = ROW_BYTES) -> bytes:
    """A packet of rows in the sink's framing (``overlay.spark.rows``), built by hand."""
    values = [row_value(i, row_bytes) for i in rows]
    lengths = struct.pack(f"<{len(values)}i", *map(len, values))
    return HEADER.pack(MAGIC, 0, len(values)) + lengths + b"".join(values)


def test_every_row_once_passes() -> None:
    check = check_rows([(7, packet(range(0, 5))), (8, packet(range(5, 10)))], 10, ROW_BYTES)
    assert check.exactly_once
    assert (check.packets, check.rows, check.lost, check.duplicated) == (2, 10, 0, 0)
    assert check.packet_gaps == check.packet_repeats == check.foreign == 0


def test_a_duplicate_and_a_gap_are_counted() -> None:
    # Packet 1 is delivered twice; packet 2 never, so rows 6..8 are lost with a number gap.
    twice = (1, packet(range(3, 6)))
    packets = [(0, packet(range(0, 3))), twice, twice, (3, packet(range(9, 12)))]
    check = check_rows(packets, 12, ROW_BYTES)
    assert not check.exactly_once
    assert check.lost == 3 and check.lost_examples == (6, 7, 8)
    assert check.duplicated == 3 and check.duplicated_examples == (3, 4, 5)
    assert check.packet_gaps == 1 and check.packet_repeats == 1
    assert check.rows == 12


def test_rows_lost_without_a_packet_gap_point_at_the_publisher() -> None:
    # A short packet stored in place of a full one: every number arrives, rows do not.
    check = check_rows([(0, packet(range(0, 4))), (1, packet(range(4, 6)))], 8, ROW_BYTES)
    assert check.lost == 2 and check.lost_examples == (6, 7)
    assert check.packet_gaps == 0 and not check.exactly_once


def test_foreign_rows_missed_packets_and_non_row_packets_fail_the_check() -> None:
    wrong_filler = HEADER.pack(MAGIC, 0, 1) + struct.pack("<i", ROW_BYTES)
    wrong_filler += row_value(1, ROW_BYTES)[:-1] + b"y"
    beyond = packet([3])  # row 3 of a write of 3 rows
    check = check_rows(
        [(0, packet([0, 2])), (1, wrong_filler), (2, beyond), (3, b"")], 3, ROW_BYTES, missed=1
    )
    assert check.foreign == 3  # the wrong row, the row beyond, the empty packet
    assert check.lost == 1 and check.missed == 1 and not check.exactly_once
    assert check_rows([(0, packet([0, 1, 2]))], 3, ROW_BYTES, missed=1).exactly_once is False


def test_multi_node_refuses_too_few_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        spark_publish.main(["--multi-node", "--nodes", "4"])
    assert "--nodes must be at least 5" in capsys.readouterr().err


@pytest.mark.slow
def test_multi_node_harness_reports_every_subscriber_and_the_injected_failures() -> None:
    pytest.importorskip("pyspark")
    from testnet.bench import spark_multinode

    rows = 4000
    result = spark_multinode.run(rows=rows, row_bytes=100, partitions=2, repeats=1)
    roles = result["roles"]
    assert result["nodes"] == 5 and result["master"] == "local[2,3]"
    assert roles["root"] not in roles["publishers"] and len(roles["publishers"]) == 2
    assert len(roles["subscribers"]) >= 2
    assert not set(roles["subscribers"]) & {roles["root"], *roles["publishers"]}
    assert result["tree"]["before"][roles["root"]]["state"] == "root"
    for node in roles["subscribers"]:
        assert result["tree"]["before"][node]["clients"] == 1
    (entry,) = result["rounds"]
    for sink in ("overlay", "plain"):
        assert entry[sink]["injected_failures"] == 2, entry
        assert entry[sink]["error"] is None, entry
        assert entry[sink]["rows_per_s"] > 0
    assert sorted(entry["subscribers"]) == sorted(map(str, roles["subscribers"]))
    for check in entry["subscribers"].values():
        assert check["expected"] == rows and check["foreign"] == 0
        # Every row written is received, lost, or received again: the counts add up.
        assert check["rows"] - check["duplicated"] + check["lost"] == rows
    assert result["ratio"] == pytest.approx(
        result["overlay_median"] / result["plain_median"], rel=1e-3
    )
    assert result["lost"] == sum(c["lost"] for c in entry["subscribers"].values())
    assert isinstance(result["exactly_once"], bool)
    assert len(result["load_average"]["before"]) == 3
    report = spark_multinode.format_report(result)
    assert "exactly once:" in report and "load average" in report
