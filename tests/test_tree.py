"""Assembling a stream's tree from nodes' describe() answers, and its views.

The broken trees here are built by hand as the nodes would describe them, so every kind of
problem ``overlay tree`` must report (two roots, a cycle, an orphan, a parent and child that
disagree) is shown in each view and makes the command exit 1.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from keyspace.stream_key import StreamKey
from testnet.survey import Answer
from testnet.tree import assemble
from testnet.tree_view import render_dot, render_json, render_text
from tools import cli, tree_cmd

STREAM = StreamKey.open("tree-test")
KEY = STREAM.key


def node_id(n: int) -> bytes:
    return bytes([n]) * 32


def answer(
    n: int,
    parent: int | None,
    children: list[int],
    state: str = "joined",
    clients: int = 0,
    carries: bool = True,
    kept: bool = False,
) -> Answer:
    streams = []
    if carries:
        streams.append(
            {
                "key": KEY,
                "target": STREAM.location,
                "state": state,
                "parent": None if parent is None else node_id(parent),
                "children": [node_id(c) for c in children],
                "clients": clients,
                "high": 7,
                "window": 8,
                "restart": None,
                "kept": kept,
            }
        )
    description: dict[str, Any] = {
        "id": node_id(n),
        "location": (STREAM.location + n / 100) % 1.0,  # node 1 the closest to the key
        "peers": [],
        "links": 0,
        "clients": clients,
        "streams": streams,
    }
    return Answer(f"127.0.0.1:{7000 + n}", description, None, n)


def healthy() -> list[Answer]:
    return [
        answer(1, None, [2, 3], "root"),
        answer(2, 1, [4], clients=1),
        answer(3, 1, [], clients=2),
        answer(4, 2, [], clients=1),
        answer(5, None, [], carries=False),
    ]


def test_healthy_tree_text_view() -> None:
    tree = assemble(STREAM, healthy())
    assert tree.check.ok
    assert tree.check.roots == [node_id(1)]
    assert tree.check.depth[node_id(4)] == 2
    text = render_text(tree)
    assert text.splitlines()[1].startswith(f"root node 1  @{(STREAM.location + 0.01) % 1:.6f}")
    assert "`-- node 4" in text
    assert "* 2 subscribers" in text
    assert "4 members; 1 root; depth 2; 4 subscribers on 3 nodes" in text
    assert "OK: one root, no cycles" in text


def test_a_kept_root_is_marked_and_healthy() -> None:
    tree = assemble(STREAM, [answer(1, None, [], "root", kept=True)])
    assert tree.check.ok
    assert f"root node 1  @{(STREAM.location + 0.01) % 1:.6f}  d=" in render_text(tree)
    assert "(kept: nobody in it)" in render_text(tree)
    assert json.loads(render_json(tree))["members"][0]["kept"] is True


def test_json_and_dot_views() -> None:
    tree = assemble(STREAM, healthy())
    data = json.loads(render_json(tree))
    assert data["ok"] and data["roots"] == [node_id(1).hex()] and data["height"] == 2
    assert {m["label"]: m["depth"] for m in data["members"]} == {
        "node 1": 0,
        "node 2": 1,
        "node 3": 1,
        "node 4": 2,
    }
    dot = render_dot(tree)
    assert dot.startswith("digraph tree {") and dot.rstrip().endswith("}")
    assert "doublecircle" in dot and "lightblue" in dot and "dashed" not in dot


@pytest.mark.parametrize(
    ("answers", "kind", "words"),
    [
        # a second root (a split tree)
        ([*healthy()[:4], answer(5, None, [], "root")], "roots", "2 roots (node 1, node 5)"),
        # 5 -> 6 -> 5: a cycle of parents beside the tree
        ([*healthy()[:4], answer(5, 6, [6]), answer(6, 5, [5])], "cycle", "parents go round"),
        # 4's parent 9 did not answer (killed)
        (
            [*healthy()[:3], answer(4, 9, []), Answer("127.0.0.1:7009", None, "refused", 9)],
            "orphan",
            "parent 09090909 did not answer",
        ),
        # 4 names 2 as parent, 2 does not list it
        (
            [answer(1, None, [2, 3], "root"), answer(2, 1, []), answer(3, 1, []), answer(4, 2, [])],
            "disagreement",
            "node 4 names node 2 as its parent, but node 2 does not list it",
        ),
    ],
)
def test_broken_trees_are_reported_in_every_view(
    answers: list[Answer], kind: str, words: str
) -> None:
    tree = assemble(STREAM, answers)
    assert not tree.check.ok
    assert kind in {p.kind for p in tree.check.problems}
    text = render_text(tree)
    assert "PROBLEMS" in text and words in text and "  !" in text
    data = json.loads(render_json(tree))
    assert not data["ok"] and kind in {p["kind"] for p in data["problems"]}
    assert "color=red" in render_dot(tree)


def test_tree_command_exits_1_on_a_broken_tree(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = [*healthy()[:4], answer(5, None, [], "root")]

    async def fake_survey(addresses: Any, stream: Any = None, **_: Any) -> list[Answer]:
        return broken

    monkeypatch.setattr(tree_cmd, "survey", fake_survey)
    assert cli.main(["tree", STREAM.address, "--nodes", "127.0.0.1:7001"]) == 1
    assert "2 roots" in capsys.readouterr().out
    monkeypatch.setattr(tree_cmd, "survey", lambda *a, **k: _coro(healthy()))
    assert cli.main(["tree", STREAM.address, "--nodes", "127.0.0.1:7001", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]


async def _coro(value: Any) -> Any:
    return value


def test_png_view(tmp_path: Path) -> None:
    from testnet.tree_plot import plot_png  # needs the viz extra, which the tests install

    out = tmp_path / "tree.png"
    plot_png(assemble(STREAM, [*healthy()[:4], answer(5, None, [], "root")]), out)
    assert out.read_bytes().startswith(b"\x89PNG")


def _drawn(tree: Any) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from testnet.tree_plot import draw

    fig, ax = plt.subplots(figsize=(9, 9))
    draw(ax, tree)
    plt.close(fig)
    return ax


def test_png_legend_names_what_is_drawn() -> None:
    broken = [answer(1, None, [2, 3], "root"), answer(2, 1, [], clients=1), answer(3, None, [])]
    ax = _drawn(assemble(STREAM, [*broken, answer(5, None, [], carries=False)]))
    legend = ax.get_legend()
    assert legend is not None
    names = [t.get_text() for t in legend.get_texts()]
    for name in ("root", "member", "member with subscribers", "node not in the tree"):
        assert name in names
    assert "parent -> child link" in names
    assert "link only the parent lists" in names  # node 3 names no parent
    assert any(n.startswith("stream key @") for n in names)


def test_png_marks_location_zero_at_the_top() -> None:
    ax = _drawn(assemble(STREAM, healthy()))
    ticks = {t.get_text(): t.get_position() for t in ax.texts}
    x, y = ticks["0"]
    assert abs(x) < 1e-9 and 0 < y < 1  # inside the circle, straight above the centre
    assert {"0.25", "0.5", "0.75"} <= set(ticks)


def test_png_labels_crowded_nodes_once_the_root_first() -> None:
    """Members closer together than a label's height: the root's label is drawn, its
    neighbours' are left out, and a member far away keeps its own."""
    crowded = [answer(1, None, [2, 3], "root"), answer(2, 1, [], clients=1), answer(3, 1, [4])]
    far = answer(4, 3, [])
    tree = assemble(STREAM, [*crowded, far])
    for n in (2, 3):  # within a third of LABEL_GAP of the root
        member = tree.members[node_id(n)]
        tree.members[node_id(n)] = replace(
            member, location=tree.members[node_id(1)].location + n * 0.001
        )
    tree.members[node_id(4)] = replace(
        tree.members[node_id(4)], location=(tree.location + 0.5) % 1.0
    )
    labels = {t.get_text() for t in _drawn(tree).texts}
    assert tree.label(node_id(1)) in labels
    assert tree.label(node_id(4)) in labels
    assert tree.label(node_id(2)) not in labels
    assert tree.label(node_id(3)) not in labels


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["tree", "x", "--manifest", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no testnet running" in err
    assert cli.main(["tree", "x", "--nodes", "nohost:notaport"]) == 2
    assert "bad node address" in capsys.readouterr().err
    assert cli.main(["tree", "ovl:", "--nodes", "127.0.0.1:1"]) == 2


async def test_live_tree_over_client_ports_and_after_the_root_is_killed() -> None:
    """Real nodes: the tree assembled from their describe() answers has one root, no
    cycles, every subscriber in it; after the root is killed it has one new root."""
    import trio

    from overlay.core.streams import State
    from testnet.demo import index_of, tree_of
    from testnet.handle import local_testnet
    from testnet.traffic import Recorder

    with trio.fail_after(60):
        async with local_testnet(20, seed=4) as net, trio.open_nursery() as nursery:
            recorders = [Recorder(i, net.client(i)) for i in (2, 9, 15)]
            for r in recorders:
                await nursery.start(r.run, STREAM.address)
            tree = await tree_of(net, STREAM)
            assert tree.check.ok and len(tree.check.roots) == 1
            assert {2, 9, 15} <= {index_of(tree, n) for n in tree.check.depth}
            assert "one root, no cycles" in render_text(tree)  # whole (a far root is a warning)
            root = index_of(tree, tree.check.roots[0])
            # Seed 4 places the root away from the subscribers, so killing it leaves them all.
            assert root not in (2, 9, 15)
            dead = net.net.node(root).identity.public
            await net.kill(root)

            hosts = [net.net.node(i).host for i in range(len(net)) if net.alive(i)]

            def settled() -> bool:
                # Every carrier is the one root or joined below a live parent, no look or
                # restart is under way, and each parent and child agree: what the survey
                # would show once the messages of the repair are all delivered.
                streams = {host.core.id: host.core.streams.get(KEY) for host in hosts}
                roots = 0
                for me, stream in streams.items():
                    if stream is None:
                        continue
                    if stream.root.looking is not None or stream.restart_uid is not None:
                        return False
                    roots += stream.state is State.ROOT
                    if stream.state is State.JOINED:
                        parent = streams.get(stream.parent or b"")
                        if stream.parent == dead or parent is None or me not in parent.children:
                            return False
                    elif stream.state is not State.ROOT:
                        return False
                    for child in stream.children:
                        below = streams.get(child)
                        if below is None or below.parent != me:
                            return False
                return roots == 1

            # Re-checked whenever one of the hosts handles an input (its heartbeats at least).
            for host in hosts:
                await host.wait_until(settled)
            repaired = await tree_of(net, STREAM)
            assert repaired.check.ok, repaired.check.problems
            assert index_of(repaired, repaired.check.roots[0]) != root
            assert {2, 9, 15} <= {index_of(repaired, n) for n in repaired.check.depth}
            nursery.cancel_scope.cancel()
