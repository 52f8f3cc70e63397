"""Leaving a tree (``overlay.core.leaving``): Unsubscribe prunes leaves, keeps relays and
drops an empty root; a root with a local client stays; a node leaves its parent only when
nobody needs it, and while a search of ours waits on a peer the Unsubscribe is held back; a
node whose last child died lingers a while if it holds packets."""

from __future__ import annotations

from core_parts import Parts
from nodes import KEY, KEY2, chain, joined_node, look_sent, make, meet, root_with_children, sends

from overlay.core.node import Node
from overlay.core.routing import Route
from overlay.core.streams import State
from overlay.messages import (
    DataNotFound,
    PacketKind,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    Unsubscribe,
)


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
    node.leaving.leave(b"P", KEY)
    assert node.leaving.unsettled == {(b"P", KEY)}  # nothing sent yet
    effects = node.receive(1.0, b"P", DataNotFound(request.uid, KEY, 0))
    # N is root now, and its look (``merges``) waits on P in turn: still held.
    look = look_sent(effects, b"P", node.location)
    effects = node.receive(1.5, b"P", DataNotFound(look.uid, KEY, 0))
    assert (b"P", Unsubscribe(KEY)) in sends(effects)
    assert node.leaving.unsettled == set()


def relay_holding_packets() -> Node:
    """N relays packets 0 and 1 from P to C, with no client of its own."""
    node = joined_node()
    node.unsubscribe(0.0, KEY, 1)
    for number in (0, 1):
        packet = SubscribeData(KEY, number, b"p", None, PacketKind.DATA, None, None, number)
        assert sends(node.receive(0.5, b"P", packet)) == [(b"C", packet)]
    return node


def test_a_relay_whose_last_child_died_lingers_then_leaves() -> None:
    # Its window may be the last copy of packets 0 and 1 if P dies next: a relay that left
    # at once could take them out of every subscriber's reach.
    node = relay_holding_packets()
    linger = node.config.linger
    assert sends(node.link_down(1.0, b"C")) == []  # no Unsubscribe to P yet
    assert node.streams[KEY].state is State.JOINED and node.leaving.linger_keys  # (counts as busy)
    assert sends(node.handle_timer(1.0 + linger - 0.1)) == []
    assert sends(node.handle_timer(1.0 + linger)) == [(b"P", Unsubscribe(KEY))]
    assert node.streams == {} and not node.leaving.linger_keys


def test_a_lingering_relay_whose_parent_dies_resubscribes_with_what_it_holds() -> None:
    node = relay_holding_packets()
    node.link_down(1.0, b"C")
    effects = node.link_down(2.0, b"P")
    [search] = [m for _, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    assert search.last_seen == 1
    assert node.streams[KEY].state is State.RESTARTING


def test_a_lingering_relay_that_gets_a_child_again_stays() -> None:
    node = relay_holding_packets()
    node.link_down(1.0, b"C")
    meet(node, b"D", 0.3)
    node.receive(2.0, b"D", SubscribeRequest(501, KEY, 10, 0.3, None))
    assert list(node.streams[KEY].children) == [b"D"]
    assert sends(node.handle_timer(1.0 + node.config.linger)) == []
    assert node.streams[KEY].state is State.JOINED


def test_a_relay_leaves_at_once_when_its_last_child_unsubscribes_or_it_holds_nothing() -> None:
    node = relay_holding_packets()
    assert sends(node.receive(1.0, b"C", Unsubscribe(KEY))) == [(b"P", Unsubscribe(KEY))]
    node = joined_node()
    node.unsubscribe(0.0, KEY, 1)
    assert sends(node.link_down(1.0, b"C")) == [(b"P", Unsubscribe(KEY))]
    assert node.streams == {}


# --- the component alone ------------------------------------------------------------------


def test_an_unsubscribe_waits_while_a_search_of_ours_waits_on_that_peer() -> None:
    parts = Parts()
    parts.meet(b"P", 0.49)
    parts.stream(KEY, State.JOINING)
    parts.searches.start_route(1.0, Route(6, KEY, 0.5, None, 10, 0.45, True, None, None))
    parts.sends()
    parts.leaving.leave(b"P", KEY)
    assert parts.sends() == [] and parts.leaving.unsettled == {(b"P", KEY)}
    parts.leaving.settle(b"P", KEY)  # still waiting on it: nothing yet
    assert parts.sends() == []
    parts.searches.on_failure(1.5, b"P", DataNotFound(6, KEY, 0))  # settles, then ends
    assert parts.sends() == [(b"P", Unsubscribe(KEY))] and parts.leaving.unsettled == set()


def test_a_relay_whose_last_child_died_lingers_then_leaves_its_parent() -> None:
    parts = Parts(linger=5.0)
    parts.meet(b"P", 0.49)
    stream = parts.stream(KEY, State.JOINED, parent=b"P")
    parts.leaving.linger(1.0, stream)
    assert stream.linger is None and parts.leaving.linger_keys == {}  # holds no packets
    stream.window.add(SubscribeData(KEY, 0, b"p", None, PacketKind.DATA, None, None, 0))
    parts.leaving.linger(1.0, stream)
    assert parts.leaving.linger_keys == {stream.linger: KEY}
    parts.leaving.prune(2.0, stream)  # lingering: not idle
    assert parts.streams == {KEY: stream}
    parts.run(6.0)
    assert parts.streams == {} and parts.sends() == [(b"P", Unsubscribe(KEY))]


def test_forgetting_a_stream_drops_our_own_search_parked_for_it() -> None:
    parts = Parts(wait_for_peers=True)
    stream = parts.stream(KEY, State.JOINING)
    parts.searches.start_route(1.0, Route(6, KEY, 0.5, None, 10, 0.45, True, None, None))
    assert parts.searches.parked == {6: None}
    parts.leaving.prune(2.0, stream)
    assert parts.streams == {} and parts.searches.routes == {} and parts.searches.parked == {}


def test_an_unsubscribe_from_a_child_is_the_childs_leaving() -> None:
    parts = Parts()
    stream = parts.stream(KEY)
    stream.children[b"C"] = None
    parts.leaving.on_unsubscribe(1.0, b"D", KEY)  # not a child
    parts.leaving.on_unsubscribe(1.0, b"C", KEY)
    assert parts.calls == [("child_gone", KEY, b"C")]
