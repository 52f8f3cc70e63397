"""Leaving a tree (``overlay.core.leaving``): Unsubscribe prunes leaves, keeps relays and
drops an empty root; a root with a local client stays; a node leaves its parent only when
nobody needs it, and while a search of ours waits on a peer the Unsubscribe is held back."""

from __future__ import annotations

from test_node import (
    KEY,
    KEY2,
    chain,
    joined_node,
    look_sent,
    make,
    meet,
    root_with_children,
    sends,
)

from overlay.core.streams import State
from overlay.messages import DataNotFound, SubscribeRequest, Unsubscribe


def test_unsubscribe_prunes_leaves_keeps_relays_and_drops_an_empty_root() -> None:
    net = chain()
    net.add(b"D", 0.2)
    net.connect(b"D", b"B")
    net.subscribe(b"A", KEY)
    net.subscribe(b"D", KEY)
    net.trace.clear()
    net.unsubscribe(b"A", KEY)
    # A leaf with nobody left leaves its parent; B still relays for D.
    assert net.flow() == [(b"A", b"B", Unsubscribe)]
    assert net.state(b"A", KEY) is None
    b = net.stream(b"B", KEY)
    assert b is not None and list(b.children) == [b"D"]
    assert net.state(b"C", KEY) is State.ROOT
    net.trace.clear()
    net.unsubscribe(b"D", KEY)
    assert net.flow() == [(b"D", b"B", Unsubscribe), (b"B", b"C", Unsubscribe)]
    assert all(net.state(n, KEY) is None for n in net.nodes)  # the root went too


def test_root_with_a_local_client_stays_when_its_last_child_leaves() -> None:
    node = root_with_children(b"C1")
    assert node.receive(1.0, b"C1", Unsubscribe(KEY)) == []
    assert node.streams[KEY].children == {}
    assert node.streams[KEY].state is State.ROOT
    assert node.unsubscribe(1.0, KEY, 1) == []
    assert node.streams == {}


def test_unsubscribe_from_a_non_child_or_unknown_client_changes_nothing() -> None:
    node = root_with_children(b"C1")
    meet(node, b"X", 0.3)
    assert node.receive(1.0, b"X", Unsubscribe(KEY)) == []
    assert node.unsubscribe(1.0, KEY, 99) == []
    assert node.unsubscribe(1.0, KEY2, 1) == []
    assert list(node.streams[KEY].children) == [b"C1"] and list(node.streams[KEY].local) == [1]


def test_relay_keeps_the_stream_while_it_has_children() -> None:
    node = joined_node()
    assert node.unsubscribe(1.0, KEY, 1) == []
    assert node.streams[KEY].state is State.JOINED
    assert sends(node.receive(1.0, b"C", Unsubscribe(KEY))) == [(b"P", Unsubscribe(KEY))]
    assert node.streams == {}


def test_an_unsubscribe_to_a_peer_a_search_of_ours_waits_on_is_sent_once_it_answers() -> None:
    # N must tell P it is not P's child while its own join still waits on P: sent now, the
    # Unsubscribe could reach P after P adopted N and undo that. It is held until the
    # search stops waiting on P, and sent then only if N is still not P's child.
    node = make()
    meet(node, b"P", 0.49)
    meet(node, b"Q", 0.4)
    [(peer, request)] = sends(node.subscribe(0.0, KEY, 1))
    assert peer == b"P" and isinstance(request, SubscribeRequest)
    node._leave(b"P", KEY)
    assert node._unsettled == {(b"P", KEY)}  # nothing sent yet
    effects = node.receive(1.0, b"P", DataNotFound(request.uid, KEY, 0))
    # N is root now, and its look (``merges``) waits on P in turn: still held.
    look = look_sent(effects, b"P", node.location)
    effects = node.receive(1.5, b"P", DataNotFound(look.uid, KEY, 0))
    assert (b"P", Unsubscribe(KEY)) in sends(effects)
    assert node._unsettled == set()
