"""A root in its takeover grace asking its subtree for what it never had
(``overlay.core.gathering``): the spans a root asks for, what a member pushes up and passes
down, the hop budget, and a query from a peer that is not our parent.

The tests at the end build ``Gathering`` alone, without a Node (``flowkit``): a root's questions
down, and a member's answer to one.
"""

from __future__ import annotations

from flowkit import Calls, Kit, store
from nodes import KEY, MAX_HTL, joined_node, make, meet, root_with_children, sends

from overlay.core.config import NodeConfig
from overlay.core.effects import Effect
from overlay.core.gathering import Gathering
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    PacketKind,
    PacketsMissed,
    PastQuery,
    PublishData,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRestarted,
    SubscribeSucceeded,
    Unsubscribe,
)

UID = 7000
DATA = PacketKind.DATA
WINDOW = NodeConfig().window_packets
GRACE = NodeConfig().takeover_grace


def packet(number: int) -> SubscribeData:
    return SubscribeData(
        KEY, number, b"p%d" % number, None, PacketKind.DATA, None, None, UID + number
    )


def member_holding(*numbers: int) -> Node:
    """N in KEY's tree under P, with child C, holding ``numbers`` (each with its uid)."""
    node = joined_node()
    for number in numbers:
        node.receive(0.5, b"P", packet(number))
    return node


def pushed(effects: list[Effect], to: bytes = b"P") -> list[tuple[int, int | None]]:
    return [
        (m.uid, m.packet) for peer, m in sends(effects) if peer == to and isinstance(m, PublishData)
    ]


def queries(effects: list[Effect], to: bytes = b"C") -> list[tuple[int, int, int]]:
    return [
        (m.first, m.last, m.htl)
        for peer, m in sends(effects)
        if peer == to and isinstance(m, PastQuery)
    ]


def test_a_member_pushes_up_what_it_holds_of_the_span_and_asks_its_children_for_the_rest() -> None:
    node = member_holding(0, 1, 2, 3, 4, 5)
    effects = node.receive(1.0, b"P", PastQuery(KEY, 2, 9, MAX_WIRE_HTL))
    assert pushed(effects) == [(UID + n, n) for n in (2, 3, 4, 5)]
    assert queries(effects) == [(6, 9, MAX_WIRE_HTL - 1)]
    assert node.stats.pushed_up == 4 and node.stats.past_queries == 1


def test_a_member_that_holds_the_whole_span_asks_nobody_below() -> None:
    node = member_holding(0, 1, 2, 3)
    effects = node.receive(1.0, b"P", PastQuery(KEY, 1, 2, MAX_WIRE_HTL))
    assert pushed(effects) == [(UID + 1, 1), (UID + 2, 2)]
    assert queries(effects) == []


def test_a_member_holding_none_of_the_span_passes_it_down_whole() -> None:
    node = member_holding(0, 1)
    effects = node.receive(1.0, b"P", PastQuery(KEY, 5, 7, 9))
    assert pushed(effects) == []
    assert queries(effects) == [(5, 7, 8)]


def test_the_hop_budget_stops_the_query_going_further_down() -> None:
    # A passing cycle in the tree carries a query at most MAX_WIRE_HTL times.
    node = member_holding(0, 1)
    effects = node.receive(1.0, b"P", PastQuery(KEY, 1, 7, 1))
    assert pushed(effects) == [(UID + 1, 1)]
    assert queries(effects) == []


def test_a_query_from_a_peer_that_is_not_our_parent_pushes_nothing() -> None:
    node = member_holding(0, 1, 2)
    effects = node.receive(1.0, b"Q", PastQuery(KEY, 0, 2, MAX_WIRE_HTL))
    assert pushed(effects, to=b"Q") == [] and pushed(effects) == []
    assert sends(effects) == [(b"Q", Unsubscribe(KEY))]  # it thinks we are its child: not so


def test_a_query_whose_span_runs_backwards_is_ignored() -> None:
    node = member_holding(0, 1, 2)
    ignored = node.stats.ignored
    assert sends(node.receive(1.0, b"P", PastQuery(KEY, 2, 1, MAX_WIRE_HTL))) == []
    assert node.stats.ignored == ignored + 1


def test_a_root_whose_head_a_claim_moves_asks_every_child_for_what_it_lacks() -> None:
    # The root holds 0..1 and never had 2; a new child has seen up to 6. It asks both its
    # children for 2..6, and the new one once more as it adopts it (its subtree may hold
    # what it does not), each with the window beyond 6 (packets, or claims, past its head).
    node = root_with_children(b"C1", b"C2")
    for n in range(2):
        node.publish(0.1, KEY, 1, UID + n, b"p%d" % n)
    meet(node, b"W", 0.3)
    effects = node.receive(1.0, b"W", ResubscribeRequest(900, KEY, 5, 0.3, 0.3, 6))
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and (stream.next_in, stream.high) == (2, 6)
    for child in (b"C1", b"C2", b"W"):
        assert queries(effects, to=child) == [(2, 6 + WINDOW, MAX_WIRE_HTL)], child
    assert node.stats.past_queries == 3


def test_halfway_through_its_grace_a_root_asks_again_for_what_it_still_lacks() -> None:
    # A question has no answer of its own where the member holds nothing of it, so a lost
    # one goes unnoticed: the claims below it would never come up. Asked again halfway,
    # for the window beyond the head and what is still lacking (2 and 3 came up meanwhile).
    node = root_with_children(b"C1", b"C2")
    for n in range(2):
        node.publish(0.1, KEY, 1, UID + n, b"p%d" % n)
    meet(node, b"W", 0.3)
    node.receive(1.0, b"W", ResubscribeRequest(900, KEY, 5, 0.3, 0.3, 6))
    for n in (2, 3):
        data = PublishData(UID + n, KEY, n, 0.5, MAX_WIRE_HTL, b"p%d" % n, None, DATA, None, True)
        node.receive(1.1, b"W", data)
    stream = node.streams[KEY]
    until = stream.root.recover_until
    assert stream.next_in == 4 and until == 1.0 + GRACE
    assert [
        m for _, m in sends(node.handle_timer(1.0 + GRACE / 2 - 0.01)) if isinstance(m, PastQuery)
    ] == []
    effects = node.handle_timer(1.0 + GRACE / 2)
    for child in (b"C1", b"C2", b"W"):
        assert queries(effects, to=child) == [(4, 6 + WINDOW, MAX_WIRE_HTL)], child
    assert stream.root.recover_until == until and stream.next_in == 4  # the grace goes on


def test_a_root_with_nothing_to_ask_for_sends_no_query() -> None:
    node = root_with_children(b"C1")
    for n in range(3):
        node.publish(0.1, KEY, 1, UID + n, b"p%d" % n)
    meet(node, b"W", 0.3)
    effects = node.receive(1.0, b"W", ResubscribeRequest(900, KEY, 5, 0.3, 0.3, 2))
    assert [m for _, m in sends(effects) if isinstance(m, PastQuery)] == []


def test_a_push_that_waited_past_a_hole_is_taken_once_the_hole_fills_before_the_grace_ends() -> (
    None
):
    # Pushes came up out of order: 3..5 (from the claimant) waited for 0..2, which a deeper
    # holder brought. The grace's end took only what lay *beyond* the head by then, so 3,
    # now next in line, was announced missed and its push answered with a collision.
    node = root_with_children(b"C1")
    meet(node, b"W", 0.3)
    node.receive(1.0, b"W", ResubscribeRequest(900, KEY, 5, 0.3, 0.3, 5))
    for n in (3, 4, 5, 0, 1, 2):
        data = PublishData(UID + n, KEY, n, 0.5, MAX_WIRE_HTL, b"p%d" % n, None, DATA, None)
        node.receive(1.1, b"W", data)
    stream = node.streams[KEY]
    assert stream.next_in == 3 and stream.root.recover_until is not None
    effects = node.handle_timer(stream.root.recover_until)
    down = [m for peer, m in sends(effects) if peer == b"C1"]
    assert [m.packet for m in down if isinstance(m, SubscribeData)] == [3, 4, 5]
    assert not any(isinstance(m, PacketsMissed) for m in down)
    assert stream.next_in == 6


def test_a_relay_that_reattaches_asks_its_subtree_for_what_its_claim_holds_beyond_it() -> None:
    """N, at 2, lost its parent; its child C confirmed the restart having seen 20. N
    reattaches under Q, whose head is 2 as well (a new root that never had 3..20): C is
    asked for 3..20, and its pushes go on up to Q, marked, so the root takes the claim.
    Without the question nothing carries it up, and that root would number 3 on again: a
    subscriber below C could be shown packets 3..5 that the root gave to other publishes."""
    node = member_holding(0, 1, 2)
    [(_, restarted)] = sends(node.link_down(1.0, b"P"))
    assert isinstance(restarted, SubscribeRestarted)
    [(asked, search)] = sends(node.receive(1.0, b"C", RestartConfirmed(restarted.uid, KEY, 20)))
    assert asked == b"Q" and isinstance(search, ResubscribeRequest) and search.last_seen == 2
    effects = node.receive(1.1, b"Q", SubscribeSucceeded(search.uid, KEY, 2))
    assert node.streams[KEY].parent == b"Q"
    assert queries(effects) == [(3, 20, MAX_WIRE_HTL)]
    push = PublishData(UID + 3, KEY, 3, 0.5, MAX_WIRE_HTL, b"p3", None, DATA, None, True)
    [(to, up)] = sends(node.receive(1.2, b"C", push))
    assert to == b"Q" and isinstance(up, PublishData) and (up.packet, up.pushed) == (3, True)


def test_a_relay_that_holds_nothing_of_its_head_asks_its_subtree_for_it() -> None:
    """N joined the tree relaying C's resubscribe (seen up to 12), so it counts 0..12 as
    processed but holds none of them. It lost its parent and reattached under Q, whose
    tree has numbered nothing: only C's subtree has 0..12, and only its pushes tell Q's
    root so. Without the question that root would number 0 and 1 again: two publishes
    acknowledged as packet 0, and a subscriber shown the other one."""
    node = make(0.45)
    for peer, location in ((b"P", 0.49), (b"Q", 0.47), (b"C", 0.2)):
        meet(node, peer, location)
    node.receive(0.0, b"C", ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 12))
    node.receive(0.0, b"P", SubscribeSucceeded(1, KEY, 12))
    stream = node.streams[KEY]
    assert (stream.next_in, list(stream.window.packets)) == (13, [])
    [(_, restarted)] = sends(node.link_down(1.0, b"P"))
    assert isinstance(restarted, SubscribeRestarted)
    [(asked, search)] = sends(node.receive(1.0, b"C", RestartConfirmed(restarted.uid, KEY, 12)))
    assert asked == b"Q" and isinstance(search, ResubscribeRequest)
    effects = node.receive(1.1, b"Q", SubscribeSucceeded(search.uid, KEY, None))
    assert stream.parent == b"Q"
    assert queries(effects) == [(0, 12, MAX_WIRE_HTL)]


def test_a_relay_whose_subtree_claims_nothing_beyond_it_asks_nothing() -> None:
    node = member_holding(0, 1, 2)
    [(_, restarted)] = sends(node.link_down(1.0, b"P"))
    [(_, search)] = sends(node.receive(1.0, b"C", RestartConfirmed(restarted.uid, KEY, 2)))
    assert isinstance(search, ResubscribeRequest)
    assert queries(node.receive(1.1, b"Q", SubscribeSucceeded(search.uid, KEY, 2))) == []


# --- ``Gathering`` built alone --------------------------------------------------------------------


def gathering(kit: Kit) -> tuple[Gathering, Calls, Calls]:
    push_one, push_claims = Calls(), Calls()
    return Gathering(kit.config, kit.stats, kit.out, push_one, push_claims), push_one, push_claims


def test_spans_asked_are_merged_and_go_to_every_child() -> None:
    kit = Kit()
    part, _, _ = gathering(kit)
    stream = kit.stream(State.ROOT, children=(b"A", b"B"))
    part.ask_spans(stream, [(5, 6), (1, 2), (3, 4)])
    assert kit.sent() == [
        (b"A", PastQuery(KEY, 1, 6, MAX_WIRE_HTL)),
        (b"B", PastQuery(KEY, 1, 6, MAX_WIRE_HTL)),
    ]


def test_a_root_in_its_grace_asks_for_its_holes_and_the_window_beyond() -> None:
    kit = Kit()
    part, _, _ = gathering(kit)
    stream = kit.stream(State.ROOT, children=(b"A",))
    store(stream, 0, 3)  # 1 and 2 never came
    part.ask_down(stream)
    spans = [(m.first, m.last) for _, m in kit.sent()]
    assert spans[0] == (1, 2) and spans[-1] == (4, 3 + kit.config.window_packets)


def test_a_member_pushes_what_it_holds_and_asks_its_children_for_the_rest() -> None:
    kit = Kit()
    part, push_one, push_claims = gathering(kit)
    stream = kit.stream(State.JOINED, parent=b"P", children=(b"C",))
    store(stream, 0, 2)
    part.on_past_query(stream, PastQuery(KEY, 0, 4, 3))
    assert push_one.calls == [(stream, b"P", 0), (stream, b"P", 2)]
    assert push_claims.calls == [(stream, 2, 4)]
    assert kit.sent() == [(b"C", PastQuery(KEY, 1, 1, 2)), (b"C", PastQuery(KEY, 3, 4, 2))]
