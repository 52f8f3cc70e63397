"""Tests for testnet.sim.darknet: the darknet experiment's plumbing and its command line."""

from __future__ import annotations

import dataclasses
import json

import pytest

from keyspace.darknet import link_length_gmean
from testnet.sim.darknet import (
    DarknetExperiment,
    DarknetRun,
    checkpoints,
    main,
    run_darknet,
    verdict,
)

# Small enough to run in seconds, large enough that the starting locations route visibly
# worse than the ideal ones. Measured: plain greedy reaches the closest node from 5% of
# starts against 100%, the cores' searches root there 87% of the time against 100%.
SMALL = DarknetExperiment(
    nodes=300, degree=8, rounds=1, seed=3, samples=100, interval=10.0, swap=False
)


@pytest.fixture(scope="module")
def control() -> DarknetRun:
    return run_darknet(SMALL)


def test_live_swapping_shortens_links_and_helps_greedy_routing() -> None:
    """The cores swap (``overlay.core.swaps``): after 16 rounds the links are far shorter
    and plain greedy routing reaches the closest node far more often. Measured at this
    seed: link gmean 0.18 -> 0.078, greedy 5% -> 26%, 520 swaps of 4,516 attempts."""
    run = run_darknet(dataclasses.replace(SMALL, rounds=16, swap=True))
    first, last = run.rows[0], run.rows[-1]
    assert last["swaps"] > 100
    assert last["link_length_gmean"] < first["link_length_gmean"] / 2
    assert last["greedy_success_pct"] >= first["greedy_success_pct"] + 10
    assert last["astray"] <= 5  # (swaps half done at the checkpoint, not lost locations)


def test_checkpoints_halve_back_from_the_last_round() -> None:
    assert checkpoints(100) == [0, 12, 25, 50, 100]
    assert checkpoints(2) == [0, 1, 2]
    assert checkpoints(1) == [0, 1]
    assert checkpoints(0) == [0]


def test_without_swapping_every_checkpoint_measures_the_start(control: DarknetRun) -> None:
    assert [row["rounds"] for row in control.rows] == [0, 1]
    first = {key: value for key, value in control.rows[0].items() if key != "rounds"}
    for row in control.rows[1:]:
        assert {key: value for key, value in row.items() if key != "rounds"} == first
    assert control.rows[-1]["swaps"] == 0
    assert control.final == control.net.topology
    assert control.rows[-1]["astray"] == 0


def test_the_ideal_locations_route_at_least_as_well_as_the_start(control: DarknetRun) -> None:
    start, ideal = control.rows[0], control.ideal
    assert ideal["route_exact_pct"] >= start["route_exact_pct"]
    assert ideal["greedy_success_pct"] >= 99.0
    assert ideal["greedy_success_pct"] > start["greedy_success_pct"] + 50.0
    assert ideal["link_length_gmean"] < start["link_length_gmean"] / 3
    assert ideal["link_length_gmean"] == link_length_gmean(control.net.ideal)


def test_the_verdict_names_the_goal_and_the_figures(control: DarknetRun) -> None:
    line = verdict(control)
    assert line.startswith("goal met: " if control.goal_met else "goal not met: ")
    assert "after 1 round " in line and "goal >= 95%" in line and "2 x ideal" in line


def test_an_experiment_refuses_a_round_without_time() -> None:
    with pytest.raises(ValueError, match="interval must be a positive number of seconds"):
        DarknetExperiment(interval=0.0)


ARGV = ["--nodes", "150", "--degree", "8", "--rounds", "1", "--samples", "30", "--no-swap"]


def test_the_command_prints_its_table_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ARGV) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("darknet of 150 nodes, degree 8, seed 1: swapping off")
    assert lines[1].split() == [
        "rounds", "swaps", "attempts", "astray", "routed", "%", "hops", "greedy", "%", "steps",
        "link", "gmean",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[2:5]] == ["0", "1", "ideal"]
    assert lines[-1].startswith("goal ")


def test_the_command_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGV, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["rounds"] for row in report["checkpoints"]] == [0, 1]
    assert report["swap"] is False and report["goal_met"] in (True, False)
    assert set(report["ideal"]) >= {"route_exact_pct", "route_hops_mean", "greedy_success_pct"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--nodes", "0"], "argument --nodes: must be at least 1, got 0"),
        (["--rounds", "ten"], "argument --rounds: 'ten' is not a whole number"),
        (["--interval", "0"], "argument --interval: must be a positive number of seconds, got 0.0"),
        (
            ["--interval", "nan"],
            "argument --interval: must be a positive number of seconds, got nan",
        ),
        (["--plot", "/no/such/dir/p.png"], "--plot /no/such/dir/p.png: no directory /no/such/dir"),
    ],
)
def test_the_command_refuses_bad_arguments_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(says)


def test_streams_published_while_the_nodes_swap_lose_nothing_and_keep_one_tree() -> None:
    """Subscribers join and packets are published while the nodes swap every round, the
    trees' members too (only away from their keys): a root next to which a node moves hands
    its tree on, and every subscriber gets every packet once, in order, from one tree a
    stream."""
    run = run_darknet(
        DarknetExperiment(
            nodes=300, degree=8, rounds=12, seed=8, samples=10, streams=10, subscribers=10
        )
    )
    streams = run.streams
    assert streams is not None and run.rows[-1]["swaps"] > 50
    assert streams["packets_ordered"] == 10 * 20
    assert streams["deliveries"] == 10 * 10 * 20
    assert (streams["delivery_problem_count"], streams["duplicates"]) == (0, 0)
    assert streams["streams_one_tree"] == 10 and streams["violation_count"] == 0
