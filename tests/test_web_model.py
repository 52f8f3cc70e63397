"""The web view's model of a testnet (``testnet.web.model``), driven by hand-made watch
diffs with explicit times: what it records, what it tells in words, what it refuses."""

from __future__ import annotations

import pytest

from keyspace.location import key_location
from overlay.runtime.identity import Identity, node_id_text
from testnet.manifest import Manifest, NodeEntry, WorkerEntry
from testnet.watch import short_id
from testnet.web.model import LiveView

IDS = [Identity.generate().public for _ in range(4)]
KEY = "ab" * 32


def _view() -> LiveView:
    nodes = tuple(
        NodeEntry(i, node_id_text(IDS[i]), i / 4, "127.0.0.1:1", "127.0.0.1:2", 0, ())
        for i in range(4)
    )
    worker = WorkerEntry(0, 1, "127.0.0.1:3", "log", (0, 4))
    return LiveView(Manifest(0, 2, "testnet", nodes, (worker,), 0.0, 0.0))


def _node(i: int, streams: dict[str, tuple[str, int | None]] | None = None) -> dict[str, object]:
    return {
        "node": i,
        "alive": True,
        "id": short_id(IDS[i]),
        "location": i / 4,
        "peers": [short_id(IDS[j]) for j in range(4) if j != i],
        "streams": {
            key: {
                "state": state,
                "parent": None if parent is None else short_id(IDS[parent]),
                "children": 0,
            }
            for key, (state, parent) in (streams or {}).items()
        },
    }


def _said(events: list[dict[str, object]]) -> list[str]:
    return [str(e["text"]) for e in events if e["type"] == "log"]


def test_ids_become_indices_and_a_new_stream_is_announced_with_its_location() -> None:
    view = _view()
    events = view.apply(
        1.0, {"nodes": [_node(0, {KEY: ("root", None)}), _node(1, {KEY: ("joined", 0)})]}
    )
    assert view.nodes[1]["peers"] == [0, 2, 3]
    assert view.nodes[1]["streams"][KEY]["parent"] == 0
    streams = [e for e in events if e["type"] == "stream"]
    assert streams == [
        {"type": "stream", "key": KEY, "location": key_location(bytes.fromhex(KEY)), "name": None}
    ]
    assert _said(events) == [
        f"node 0 became the root of stream {KEY[:8]}",
        f"node 1 joined stream {KEY[:8]}",
    ]


def test_a_root_killed_and_replaced_in_one_look_is_told_as_a_takeover() -> None:
    """The worker's look saw root 0 die and node 1 become root at once: the view applies the
    death first, so node 1 is told as the root, not as a second root beside a dead one."""
    view = _view()
    view.name(KEY, "demo")
    view.apply(
        1.0,
        {
            "nodes": [
                _node(0, {KEY: ("root", None)}),
                _node(1, {KEY: ("joined", 0)}),
                _node(2, {KEY: ("joined", 1)}),
            ]
        },
    )
    events = view.apply(
        2.0, {"nodes": [_node(1, {KEY: ("root", None)}), {"node": 0, "alive": False}]}
    )
    assert _said(events) == ["node 0 died", "node 1 became the root of 'demo'"]
    assert view.nodes[0]["alive"] is False and view.nodes[0]["streams"] == {}


def test_two_roots_are_told_and_their_merge_too() -> None:
    view = _view()
    view.apply(1.0, {"nodes": [_node(0, {KEY: ("root", None)})]})
    events = view.apply(2.0, {"nodes": [_node(3, {KEY: ("root", None)})]})
    assert _said(events) == [f"node 3 became a root of stream {KEY[:8]} beside node 0"]
    events = view.apply(3.0, {"nodes": [_node(3, {KEY: ("joined", 0)})]})
    assert _said(events) == [f"root 3 of stream {KEY[:8]} joined the tree under node 0"]


def test_reattaching_leaving_and_restarting_are_told() -> None:
    view = _view()
    view.apply(
        1.0,
        {
            "nodes": [
                _node(0, {KEY: ("root", None)}),
                _node(1, {KEY: ("joined", 0)}),
                _node(2, {KEY: ("joined", 1)}),
            ]
        },
    )
    events = view.apply(2.0, {"nodes": [_node(2, {KEY: ("joined", 0)}), _node(1)]})
    assert _said(events) == [
        f"node 2 re-attached to node 0 in stream {KEY[:8]}",
        f"node 1 left stream {KEY[:8]}",
    ]
    view.apply(3.0, {"nodes": [{"node": 1, "alive": False}]})
    assert _said(view.apply(4.0, {"nodes": [_node(1)]})) == ["node 1 is back"]
    assert [e["text"] for e in view.snapshot()["log"]][-2:] == ["node 1 died", "node 1 is back"]


def test_publish_rate_is_the_head_over_the_window() -> None:
    view = _view()
    view.apply(0.0, {"nodes": [_node(0, {KEY: ("root", None)})], "highs": {"0": {KEY: 10}}})
    view.apply(1.0, {"highs": {"0": {KEY: 30}}})
    view.apply(2.0, {"highs": {"0": {KEY: 50}}})
    assert view.rates(2.0) == [{"type": "rates", "rates": {KEY: 20.0}}]
    # Heard a while after the last head (a worker reports up to a quarter second late): the
    # rate is still the heads', not diluted by the wait.
    assert view.rates(2.2) == [{"type": "rates", "rates": {KEY: 20.0}}]
    # Past the window the oldest head is forgotten: a stream that stopped shows 0.
    assert view.rates(10.0) == [{"type": "rates", "rates": {KEY: 0.0}}]


def test_a_stream_no_node_carries_is_forgotten_once_quiet() -> None:
    """Node 0 leaves the stream: while its last packet is recent the stream is kept, then
    it is forgotten and the pages told, so the streams kept are bounded by what nodes
    carry (a named stream, one the page made, is kept)."""
    view = _view()
    view.name("cd" * 32, "named")
    view.apply(0.0, {"nodes": [_node(0, {KEY: ("root", None)})], "highs": {"0": {KEY: 5}}})
    view.apply(1.0, {"nodes": [_node(0)]})
    assert KEY in view.locations and view.rates(1.5)[1:] == []
    assert view.rates(3.0)[1:] == [{"type": "stream", "key": KEY, "gone": True}]
    assert KEY not in view.locations and "cd" * 32 in view.locations
    assert [s["key"] for s in view.snapshot()["streams"]] == ["cd" * 32]


@pytest.mark.parametrize(
    "bad",
    [
        None,
        {"nodes": {}},
        {"nodes": [{"alive": True}]},
        {"nodes": [{**_node(0), "location": 1.5}]},
        {"nodes": [{**_node(0), "peers": [1]}]},
        {"nodes": [_node(0, {"not-hex": ("root", None)})]},
        {"nodes": [{**_node(0), "streams": {KEY: {"state": "root", "parent": 5, "children": 0}}}]},
        {"highs": {"zero": {KEY: 1}}},
        {"highs": {"0": {KEY: "1"}}},
        {"highs": {"\u00b2": {KEY: 1}}},
        {"nodes": [_node(0)], "highs": {"9" * 5000: {KEY: 1}}},
    ],
)
def test_a_malformed_watch_line_is_refused_and_changes_nothing(bad: object) -> None:
    view = _view()
    before = view.snapshot()
    with pytest.raises(ValueError, match="a watch line with"):
        view.apply(1.0, bad)
    assert view.snapshot() == before


def test_nodes_of_another_testnet_are_ignored() -> None:
    view = _view()
    assert view.apply(1.0, {"nodes": [{**_node(0), "node": 99}]}) == []
    assert 99 not in view.nodes


def test_a_lost_worker_shows_its_nodes_dead_without_a_line_for_each() -> None:
    """The view lost the worker, not the nodes: their records go dead, and the caller says
    so once; no "node i died" line is made up for each."""
    view = _view()
    view.apply(1.0, {"nodes": [_node(i) for i in range(4)]})
    events = view.mark_dead(2.0, range(0, 4))
    assert [e["node"] for e in events if e["type"] == "node"] == [0, 1, 2, 3]
    assert _said(events) == [] and not any(r["alive"] for r in view.nodes.values())


def test_a_stream_left_takes_its_packet_number_with_it() -> None:
    view = _view()
    view.apply(1.0, {"nodes": [_node(0, {KEY: ("root", None)})], "highs": {"0": {KEY: 7}}})
    assert view.snapshot()["highs"] == {"0": {KEY: 7}}
    view.apply(2.0, {"nodes": [_node(0)]})
    assert view.snapshot()["highs"] == {"0": {}}
