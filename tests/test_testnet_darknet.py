"""``overlay testnet up --darknet`` and ``overlay testnet routing`` through the real command
line: worker processes whose nodes swap locations over real links, and the command that
shows the routing improve. Each command is a subprocess, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_processes import overlay

from overlay.runtime.identity import node_id_text
from testnet.manifest import Manifest, NodeEntry, read_manifest
from testnet.routing import graph
from testnet.survey import Answer


@pytest.mark.slow
def test_a_darknet_testnet_swaps_and_routing_shows_it(testnet_dir: Path) -> None:
    d = ["--dir", str(testnet_dir)]
    up = overlay("testnet", "up", "--nodes", "60", "--darknet", "--swap-interval", "0.2", *d)
    assert up.returncode == 0, up.stderr
    assert "a darknet swapping every 0.2 s" in up.stdout
    launched = read_manifest(testnet_dir)

    routing = overlay("testnet", "routing", "--every", "2", "--count", "3", "--json", *d)
    assert routing.returncode == 0, routing.stderr
    first, *looks = [json.loads(line) for line in routing.stdout.splitlines()]
    assert first["launched"] and first["swaps"] == 0 and first["nodes"] == 60
    assert all(not look["launched"] and look["nodes"] == 60 for look in looks)
    last = looks[-1]
    # The nodes swapped over their real links, and their links got shorter for it.
    assert last["swaps"] > 20 and last["swap_attempts"] > last["swaps"]
    assert last["link_gmean"] < 0.8 * first["link_gmean"]

    # Nodes moved, each to a location launched with some node: swaps only trade them.
    status = overlay("testnet", "status", "--json", *d)
    assert status.returncode == 0, status.stderr
    now = {n["index"]: n["location"] for n in json.loads(status.stdout)["nodes"]}
    assert set(now.values()) <= {n.location for n in launched.nodes}
    assert sum(now[n.index] != n.location for n in launched.nodes) > 20

    # A node that swapped keeps where it stands beside its state file, for its restarts
    # (``overlay/runtime/location_file.py``; a restart is tested in test_location_file.py).
    moved = next(n.index for n in launched.nodes if now[n.index] != n.location)
    assert overlay("testnet", "kill", str(moved), *d).returncode == 0
    kept = (testnet_dir / "state" / f"node-{moved}.state.location").read_text()
    assert float(kept) in {n.location for n in launched.nodes}
    png = testnet_dir / "ring.png"
    text = overlay("testnet", "routing", "--png", str(png), *d)
    assert text.stdout.splitlines()[0].startswith("launched  60 nodes  swaps 0")
    assert text.stdout.splitlines()[-1] == f"wrote {png}"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["up", "--darknet", "--swap-interval", "0"], "positive number of seconds, got 0.0"),
        (["routing", "--count", "0"], "argument --count: must be at least 1, got 0"),
        (["up", "--swap-interval", "5"], "overlay testnet up: --swap-interval needs --darknet"),
        (["routing", "--every", "soon"], "argument --every: 'soon' is not a number"),
    ],
)
def test_bad_darknet_options_are_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    result = overlay("testnet", *args, "--dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith(says), result.stderr


def test_a_ring_picture_that_cannot_be_written_is_refused_before_the_looks(
    testnet_dir: Path,
) -> None:
    d = ["--dir", str(testnet_dir)]
    assert overlay("testnet", "up", "--nodes", "4", *d).returncode == 0
    result = overlay("testnet", "routing", "--png", "/no/such/dir/r.png", *d)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "overlay testnet routing: --png /no/such/dir/r.png: no directory /no/such/dir\n"
    )


def test_routing_without_a_testnet_says_so_in_one_line(tmp_path: Path) -> None:
    result = overlay("testnet", "routing", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no testnet running" in result.stderr


def test_the_routing_graph_keeps_only_links_both_ends_report() -> None:
    """Answers come moments apart: a link one end reports and the other does not (it came
    or went in between) is left out, and so is a link to a node that did not answer."""
    ids = [node_id_text(bytes([i]) * 32) for i in range(3)]
    entries = tuple(
        NodeEntry(i, ids[i], 0.1 * (i + 1), "127.0.0.1:1", "127.0.0.1:2", 0, ()) for i in range(3)
    )
    manifest = Manifest(0, 2, "testnet", entries, (), 0.0, 0.0)

    def said(i: int, peers: list[int]) -> Answer:
        described = {"location": 0.5 + 0.1 * i, "peers": [{"id": bytes([j]) * 32} for j in peers]}
        return Answer(f"node {i}", described, None, i)

    answers = [said(0, [1, 2]), said(1, [0]), Answer("node 2", None, "gone", 2)]
    topology = graph(manifest, answers)
    assert topology.locations == (0.5, 0.6)
    assert topology.neighbours == ((1,), (0,))
