"""``python -m testnet.sim.cost``: one workload on networks of several sizes, as real
processes, with its table, its JSON and its plot; and the simulator's memory figures."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testnet.sim import cost

WORKLOAD = ["--streams", "2", "--subscribers", "5", "--packets", "2"]


def _cost(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testnet.sim.cost", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_each_size_is_measured_and_drawn(tmp_path: Path) -> None:
    plot = tmp_path / "cost.png"
    done = _cost("--sizes", "120,60", *WORKLOAD, "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    head, *rows = done.stdout.splitlines()[1:]
    assert head.split()[:3] == ["nodes", "msgs/sub", "hops/sub"]
    assert [row.split()[0] for row in rows] == ["60", "120"]  # smallest first
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_json_has_every_figure_of_every_size() -> None:
    done = _cost("--sizes", "60,90", *WORKLOAD, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [row["nodes"] for row in rows] == [60, 90]
    for row in rows:
        assert not row["failed"]
        # Ten subscriptions cost messages; four packets reach five subscribers each.
        assert row["messages_per_join"] > 1 and row["search_hops_per_join"] >= 1
        assert row["messages_per_delivery"] == row["messages_per_packet"] / 5
        assert 1_000 < row["bytes_per_node"] < 1_000_000


def test_the_graph_s_proximity_reaches_each_run() -> None:
    """Each size runs the simulator with the graph asked for, so one figure measured on
    graphs without proximity can be compared with the default's."""
    plain, near = (
        json.loads(_cost("--sizes", "80", *WORKLOAD, "--proximity", p, "--json").stdout)
        for p in ("1", "16")
    )
    assert plain[0]["messages_per_join"] != near[0]["messages_per_join"]
    done = _cost("--sizes", "80", "--proximity", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--proximity must be at least 1")


def test_a_bad_size_list_is_one_line_naming_it() -> None:
    done = _cost("--sizes", "100,many")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("'100,many' is not a comma list of sizes")


def test_the_simulator_reports_its_peak_memory_a_node() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testnet.sim", "--nodes", "100", *WORKLOAD],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "peak memory" in line]
    assert "MiB in all" in line and "bytes a node" in line


def test_a_plot_that_cannot_be_written_is_refused_before_any_run(tmp_path: Path) -> None:
    done = _cost("--sizes", "60", *WORKLOAD, "--plot", str(tmp_path / "missing" / "c.png"))
    assert done.returncode == 2
    assert "no directory" in done.stderr.strip().splitlines()[-1]


def test_a_size_without_a_report_is_named_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 90-node run's process dies (as one killed for want of memory would): the
    60-node row is still printed, the 90-node failure is named, and the status is 1."""
    real = cost.measure

    def measure(size: int, args: argparse.Namespace) -> dict[str, Any] | str:
        return "killed by signal 9: no message" if size == 90 else real(size, args)

    monkeypatch.setattr(cost, "measure", measure)
    assert cost.main(["--sizes", "60,90", *WORKLOAD]) == 1
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["60"]
    assert "90 nodes: no report (killed by signal 9" in err
