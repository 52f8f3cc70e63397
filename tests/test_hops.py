"""Moving a search hop to hop (``overlay.core.searches``): here, where a member of a tree sends
a resubscribe it may not accept, and a search of our own that has no peer to go to. The
greedy rules themselves (closest untried peer, backtracking, timeouts) are tested with the
rest of the node in ``test_node``."""

from __future__ import annotations

from nodes import KEY, MAX_HTL, joined_node, look_sent, make, meet, proto, sends

from overlay.core.effects import Deliver, Effect
from overlay.core.events import Subscribed
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    Accepted,
    DataNotFound,
    Hello,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeRestarted,
)

UID = 900


def forwarded_to(effects: list[Effect]) -> list[bytes]:
    return [peer for peer, m in sends(effects) if isinstance(m, ResubscribeRequest)]


def test_a_member_sends_a_resubscribe_it_may_not_accept_up_its_tree_first() -> None:
    # N (0.45) is a member below P (0.49); Z (0.499) is closer to the key than P, so greedy
    # routing would go there. Up the tree the search reaches N's root, which takes any.
    node = joined_node()
    meet(node, b"Z", 0.499)
    request = ResubscribeRequest(UID, KEY, MAX_HTL, 0.3, 0.47, None)
    effects = node.receive(1.0, b"Q", request)
    assert sends(effects)[0] == (b"Q", Accepted(UID))
    assert forwarded_to(effects) == [b"P"]


def test_a_member_sends_its_own_ancestors_resubscribe_on_greedily() -> None:
    # The restart is labelled from above: up the tree is back to the one searching.
    node = joined_node()
    meet(node, b"Z", 0.499)
    node.receive(1.0, b"P", SubscribeRestarted(UID, KEY, 0.49))
    effects = node.receive(1.1, b"Q", ResubscribeRequest(UID, KEY, MAX_HTL, 0.3, 0.49, None))
    assert forwarded_to(effects) == [b"Z"]


def test_after_its_parent_failed_the_member_goes_on_greedily() -> None:
    node = joined_node()
    meet(node, b"Z", 0.499)
    effects = node.receive(1.0, b"Q", ResubscribeRequest(UID, KEY, MAX_HTL, 0.3, 0.47, None))
    assert forwarded_to(effects) == [b"P"]
    effects = node.receive(1.1, b"P", DataNotFound(UID, KEY, 5))
    assert forwarded_to(effects) == [b"Z"]


# --- a search whose next hop drops its link ---------------------------------------------


def test_a_search_lost_beyond_a_broken_link_says_so_when_it_comes_back() -> None:
    # Q took the search and dropped its link before answering: it may have found the
    # stream beyond, and the answer died with the link. N backtracks as always, and the
    # DataNotFound it sends back says the search was lost on the way. (U's search has seen
    # a node closer than N, so N does not become the root where it ends.)
    node = make(0.45)
    for peer, location in ((b"U", 0.1), (b"Q", 0.49), (b"P", 0.3)):
        meet(node, peer, location)
    effects = node.receive(1.0, b"U", SubscribeRequest(UID, KEY, MAX_HTL, 0.499, None))
    assert [p for p, m in sends(effects) if isinstance(m, SubscribeRequest)] == [b"Q"]
    node.receive(1.1, b"Q", Accepted(UID))
    effects = node.link_down(1.2, b"Q")
    assert [p for p, m in sends(effects) if isinstance(m, SubscribeRequest)] == [b"P"]
    effects = node.receive(1.3, b"P", DataNotFound(UID, KEY, 5))
    assert sends(effects) == [(b"U", DataNotFound(UID, KEY, 5, lost=True))]


def test_a_relay_passes_on_that_a_search_was_lost_further_down() -> None:
    node = make(0.45)
    for peer, location in ((b"U", 0.1), (b"Q", 0.49)):
        meet(node, peer, location)
    node.receive(1.0, b"U", SubscribeRequest(UID, KEY, MAX_HTL, 0.499, None))
    effects = node.receive(1.1, b"Q", DataNotFound(UID, KEY, 4, lost=True))
    assert sends(effects) == [(b"U", DataNotFound(UID, KEY, 4, lost=True))]
    # Without a broken link on the way, a failure is a plain one.
    node.receive(2.0, b"U", SubscribeRequest(UID + 1, KEY, MAX_HTL, 0.499, None))
    effects = node.receive(2.1, b"Q", DataNotFound(UID + 1, KEY, 4))
    assert sends(effects) == [(b"U", DataNotFound(UID + 1, KEY, 4))]


# --- a search of our own with no peer at all ------------------------------------------------


def first_peer_up(node: Node, peer: bytes, location: float) -> list[Effect]:
    node.link_up(5.0, peer)
    return node.receive(5.0, peer, Hello(location, 77))


def test_a_node_that_dials_peers_holds_its_join_until_one_is_up() -> None:
    # Ended at once, the search would make N the root of a tree of one, numbering its
    # client's publishes beside the real tree (a restarted node before its links are up).
    node = make(wait_for_peers=True)
    assert proto(node.subscribe(0.0, KEY, 1)) == []
    assert node.streams[KEY].state is State.JOINING
    assert not node.busy()  # a peer may never come: a driver waiting for quiet must not hang
    [(peer, request)] = sends(first_peer_up(node, b"P", 0.3))
    assert peer == b"P" and isinstance(request, SubscribeRequest)
    assert (request.key, request.htl, request.best_loc) == (KEY, MAX_HTL, 0.45)
    assert node.busy()


def test_a_node_whose_peers_all_went_holds_its_join_whatever_its_config_says() -> None:
    node = make()  # wait_for_peers off: it was started alone, but then had a peer
    meet(node, b"P", 0.3)
    node.link_down(1.0, b"P")
    assert proto(node.subscribe(2.0, KEY, 1)) == []
    assert node.streams[KEY].state is State.JOINING and node.stats.roots == 0
    [(peer, request)] = sends(first_peer_up(node, b"Q", 0.2))
    assert peer == b"Q" and isinstance(request, SubscribeRequest)


def test_a_held_join_ends_as_root_where_the_first_peer_finds_nothing() -> None:
    node = make(wait_for_peers=True)
    node.subscribe(0.0, KEY, 1)
    [(_, request)] = sends(first_peer_up(node, b"P", 0.3))
    assert isinstance(request, SubscribeRequest)
    effects = node.receive(5.1, b"P", DataNotFound(request.uid, KEY, 0))
    assert proto(effects)[0] == Deliver(1, Subscribed(KEY, root=True))
    look_sent(effects, b"P", node.location)
    assert node.streams[KEY].state is State.ROOT


def test_a_member_cut_off_from_every_peer_stays_restarting_until_one_is_up() -> None:
    node = joined_node()  # parent P, child C, spare peer Q
    for peer in (b"Q", b"C", b"P"):
        node.link_down(1.0, peer)
    stream = node.streams[KEY]
    assert stream.state is State.RESTARTING and node.stats.roots == 0
    [(peer, request)] = sends(first_peer_up(node, b"Z", 0.499))
    assert peer == b"Z" and isinstance(request, ResubscribeRequest)
    assert request.must_beat == 0.45 and stream.state is State.RESTARTING


def test_a_held_join_goes_with_the_client_that_wanted_it() -> None:
    node = make(wait_for_peers=True)
    node.subscribe(0.0, KEY, 1)
    assert node.routes  # held, waiting for a peer
    node.unsubscribe(1.0, KEY, 1)
    assert KEY not in node.streams and not node.routes
    assert not [
        m for _, m in sends(first_peer_up(node, b"P", 0.3)) if isinstance(m, SubscribeRequest)
    ]


def test_a_search_whose_stream_went_meanwhile_is_not_held_for_a_peer() -> None:
    # The stream was pruned while its search ran; then every peer went. Held, the search
    # would wait for ever on a node cut off for good (a relay whose neighbours all died),
    # and the network would never count as quiet.
    node = make()
    meet(node, b"P", 0.3)
    [(peer, request)] = sends(node.subscribe(1.0, KEY, 1))
    assert peer == b"P" and isinstance(request, SubscribeRequest)
    node.unsubscribe(1.5, KEY, 1)
    assert KEY not in node.streams and node.routes  # the search itself runs on
    node.link_down(2.0, b"P")
    assert not node.routes
