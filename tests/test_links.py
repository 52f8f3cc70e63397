"""A node's links as the tree sees them (``overlay.core.links``) built alone, without a
``Node``: a Hello adds a peer (a closer one restarts a root's stream), a peer back with a new
boot id or a link lost is forgotten as parent and child, and a peer's neighbours are kept."""

from __future__ import annotations

import pytest
from core_parts import TreeParts

from overlay.core.streams import State
from overlay.messages import Hello, Neighbours, SubscribeRestarted


def test_a_hello_adds_the_peer_and_starts_the_heartbeat_rounds() -> None:
    parts = TreeParts()
    assert not parts.liveness.beating
    parts.links.on_hello(1.0, b"A", Hello(0.2, 100))
    assert parts.peers.get(b"A") is not None
    assert parts.liveness.beating


def test_a_new_peer_closer_to_a_roots_key_restarts_its_stream_a_farther_one_does_not() -> None:
    parts = TreeParts()
    stream = parts.stream()
    parts.links.on_hello(1.0, b"F", Hello(0.2, 100))  # farther from 0.5 than us (0.45)
    assert stream.state is State.ROOT
    parts.links.on_hello(1.0, b"C", Hello(0.49, 100))
    assert stream.state is State.RESTARTING


def test_a_parent_back_with_a_new_boot_id_is_forgotten_and_its_child_restarts() -> None:
    parts = TreeParts()
    parts.links.on_hello(1.0, b"P", Hello(0.3, 100))
    parts.links.on_hello(1.0, b"C", Hello(0.2, 100))
    stream = parts.stream(state=State.JOINED, parent=b"P")
    stream.children[b"C"] = None
    parts.links.on_hello(2.0, b"P", Hello(0.3, 100))  # same boot: nothing changes
    assert stream.state is State.JOINED
    parts.sends()
    parts.links.on_hello(3.0, b"P", Hello(0.3, 101))
    assert stream.state is State.RESTARTING
    assert any(
        peer == b"C" and isinstance(message, SubscribeRestarted) for peer, message in parts.sends()
    )


def test_a_lost_link_forgets_the_peer_as_a_child_and_a_root_holds_for_it() -> None:
    parts = TreeParts()
    parts.links.on_hello(1.0, b"C", Hello(0.2, 100))
    parts.links.on_hello(1.0, b"D", Hello(0.3, 100))
    stream = parts.stream()
    stream.children[b"C"] = None
    stream.children[b"D"] = None
    parts.links.link_down(2.0, b"C")
    assert parts.peers.get(b"C") is None
    assert list(stream.children) == [b"D"]
    assert stream.root.look_due  # (``merges``: a root that lost a child looks, and holds)
    assert parts.probes.lost_a_link
    parts.links.link_down(2.0, b"C")  # a link already gone is nothing more
    assert list(stream.children) == [b"D"]


def test_a_peers_neighbours_are_kept_sorted_and_our_own_location_does_not_count() -> None:
    parts = TreeParts()
    parts.links.on_hello(1.0, b"A", Hello(0.2, 100))
    parts.links.on_neighbours(b"A", Neighbours((0.9, 0.45, 0.1)))
    record = parts.peers.get(b"A")
    assert record is not None and record.neighbours == (0.1, 0.45, 0.9)
    assert parts.peers.closest(0.46, ()) is record
    assert record.reach(0.46, own=0.45) == pytest.approx(0.26)  # 0.2 itself, not us
    parts.links.on_neighbours(b"gone", Neighbours((0.3,)))  # no record: nothing to keep
