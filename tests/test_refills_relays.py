"""Refills (``overlay.core.refills``) at a relay: a node that lacks packets a child needs
from before it joined asks its parent for them and holds the child, instead of telling it
they were missed.

The scene (``refills.joined_late``): N (0.45) has nothing of the stream. A's resubscribe,
having seen up to packet 19, goes through N to P (0.49), which has the stream, so N joins
expecting 20. Then B's resubscribe coalesces at N having seen only up to 18: N never had 19,
but P holds it.
"""

from __future__ import annotations

from corenet import key_at
from nodes import MAX_HTL, make, meet, sends
from refills import (
    FILL,
    KEY,
    A,
    B,
    C,
    D,
    P,
    b_resubscribes,
    data,
    joined_late,
    to,
)

from overlay.core.fills import gaps, outside
from overlay.core.node import Node
from overlay.core.refills import MAX_FILLS
from overlay.core.streams import State
from overlay.core.window import Window
from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    FillRequest,
    PacketsMissed,
    PastQuery,
    RejectedLoop,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)


def test_a_late_joiner_asks_its_parent_for_what_a_child_needs_and_waits() -> None:
    node = joined_late()
    effects = b_resubscribes(node)
    # B is not adopted yet: live packets before 19 would make it take 19 for lost.
    assert sends(effects) == [(B, Accepted(2)), (P, FillRequest(KEY, 19, 19))]
    assert B not in node.streams[KEY].children and node.busy() and node.refills.waiting
    assert sends(node.receive(1.5, P, data(22))) == [(A, data(22))]  # live traffic goes on
    effects = node.receive(1.5, P, data(19))
    # 19 went to nobody else (A had it); B gets it first, then everything after, in order.
    assert to(effects, A) == []
    assert to(effects, B) == [
        SubscribeSucceeded(2, KEY, 22),
        data(19),
        data(20),
        data(21),
        data(22),
    ]
    assert list(node.streams[KEY].children) == [A, B] and not node.refills.waiting
    assert node.stats.filled == 1


def test_before_refills_the_child_was_told_a_held_packet_was_missed() -> None:
    """Adopted without waiting (``wait=False``), B's catch-up says 19 was missed although
    P holds it: what a relay that does not ask its parent tells a child."""
    node = joined_late()
    stream = node.streams[KEY]
    node.membership.adopt(1.0, stream, B, 2, False, 18, 0.3, wait=False)
    effects = node._flush(1.0)
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]


def test_what_the_parent_lacks_too_is_reported_missed_then() -> None:
    node = joined_late()
    b_resubscribes(node)
    effects = node.receive(1.5, P, PacketsMissed(KEY, 19, 19))
    assert to(effects, A) == []  # A is past 19: nothing to tell it
    assert to(effects, B) == [
        SubscribeSucceeded(2, KEY, 21),
        PacketsMissed(KEY, 19, 19),
        data(20),
        data(21),
    ]


def test_a_silent_parent_costs_the_child_fill_timeout_not_its_subscription() -> None:
    node = joined_late()
    b_resubscribes(node)
    assert to(node.handle_timer(1.0 + FILL - 0.1), B) == []
    effects = node.handle_timer(1.0 + FILL)
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]
    assert B in node.streams[KEY].children and not node.refills.waiting


def test_a_search_that_may_no_longer_end_here_is_sent_on() -> None:
    """N restarted while B waited, under a label whose origin (0.2) is farther from the key
    than B's must-beat (0.3): adopting B now could close a cycle, so B backtracks."""
    node = joined_late()
    b_resubscribes(node)
    node.receive(1.2, P, SubscribeRestarted(77, KEY, 0.2))
    effects = node.receive(1.5, P, data(19))
    assert (B, RejectedLoop(2)) in sends(effects)
    assert B not in node.streams[KEY].children


def test_a_search_the_tree_took_beyond_us_is_answered_once_the_packets_came() -> None:
    """B's resubscribe must beat 0.47, which N (0.45) does not: N sends it up to P, whose
    tree takes it, and N, relaying that success, first fetches the 19 that B lacks. Then
    it adopts B: that N could not have accepted B's search itself does not matter. A relay
    that refused a look its own root had taken would leave two roots numbering side by
    side."""
    node = joined_late()
    effects = node.receive(1.0, B, ResubscribeRequest(2, KEY, MAX_HTL, 0.47, 0.47, 18))
    assert to(effects, P) == [ResubscribeRequest(2, KEY, MAX_HTL - 1, 0.47, 0.47, 18)]
    effects = node.receive(1.1, P, SubscribeSucceeded(2, KEY, 21))
    assert to(effects, P) == [FillRequest(KEY, 19, 19)] and to(effects, B) == [Accepted(2)]
    effects = node.receive(1.5, P, data(19))
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), data(19)]
    assert B in node.streams[KEY].children


def test_a_relay_lacking_the_packets_too_asks_on_and_answers_only_the_asker() -> None:
    node = joined_late()  # N lacks 19; now its child A asks N for 19 (A joined late too)
    effects = node.receive(1.0, A, FillRequest(KEY, 19, 19))
    assert sends(effects) == [(P, FillRequest(KEY, 19, 19))]
    effects = node.receive(1.5, P, data(19))
    assert sends(effects) == [(A, data(19))]


def test_a_waiter_is_not_served_by_the_answer_to_a_narrower_ask_made_before_its_own() -> None:
    """B (seen 18) makes N ask P for 19, then C (seen 16) for 17..19. P answers the first
    ask with 19: that serves B, not C, which still lacks 17 and 18. Told they were missed
    just before P's answer to C's own ask brings them, C's subscriber would never have
    them."""
    node = joined_late()
    C = b"C"
    meet(node, C, 0.35)
    assert to(b_resubscribes(node), P) == [FillRequest(KEY, 19, 19)]
    effects = node.receive(1.1, C, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 16))
    assert to(effects, P) == [FillRequest(KEY, 17, 19)]
    effects = node.receive(1.5, P, data(19))
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), data(19)]
    assert to(effects, C) == [] and C not in node.streams[KEY].children
    node.receive(1.6, P, data(17))
    effects = node.receive(1.6, P, data(18))
    assert to(effects, C) == [
        SubscribeSucceeded(3, KEY, 21),
        data(17),
        data(18),
        data(19),
        data(20),
        data(21),
    ]


def test_a_fill_request_is_answered_from_the_window_in_order() -> None:
    node = joined_late()
    node.receive(1.0, B, ResubscribeRequest(2, KEY, MAX_HTL, 0.3, 0.3, 20))  # no gap: adopted
    node.receive(1.0, P, PacketsMissed(KEY, 22, 22))
    node.receive(1.0, P, data(23))
    # Up to the head only; a hole the parent reported is passed on, not asked for again.
    effects = node.receive(1.5, B, FillRequest(KEY, 20, 30))
    assert sends(effects) == [
        (B, data(20)),
        (B, data(21)),
        (B, PacketsMissed(KEY, 22, 22)),
        (B, data(23)),
    ]


def test_fill_requests_from_strangers_or_malformed_ones_change_nothing() -> None:
    node = joined_late()
    assert sends(node.receive(1.0, B, FillRequest(KEY, 19, 19))) == []  # B is not a child
    assert sends(node.receive(1.0, A, FillRequest(KEY, 21, 19))) == []  # first > last
    assert sends(node.receive(1.0, A, FillRequest(key_at(0.1), 1, 2))) == []  # not carried
    assert node.streams[KEY].fills is None and not node.refills.waiting


def test_waiters_are_bounded() -> None:
    node = joined_late()
    for _ in range(MAX_FILLS + 3):
        node.receive(1.0, A, FillRequest(KEY, 19, 19))
    fills = node.streams[KEY].fills
    assert fills is not None and len(fills) == MAX_FILLS
    # Past the bound the child is answered at once, with what the node has.
    assert sends(node.receive(1.0, A, FillRequest(KEY, 19, 20))) == [
        (A, PacketsMissed(KEY, 19, 19)),
        (A, data(20)),
    ]


def test_a_relay_asks_a_subtree_that_attaches_while_its_waiter_waits() -> None:
    node = joined_late()
    meet(node, C, 0.35)
    b_resubscribes(node)  # B waits for 19, asked of P
    effects = node.receive(1.1, C, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 21))
    # What C's subtree holds of it is pushed up through us to the root, which asked for it.
    assert to(effects, C) == [SubscribeSucceeded(3, KEY, 21), PastQuery(KEY, 19, 19, MAX_WIRE_HTL)]
    # A resubscriber that has not seen 19 itself is not asked for it.
    meet(node, D, 0.36)
    effects = node.receive(1.2, D, ResubscribeRequest(4, KEY, MAX_HTL, 0.36, 0.36, 18))
    assert sends(effects) == [(D, Accepted(4))]


X = b"X"


def made_a_new_root() -> Node:
    """N (joined late: never had 19) is below P, which restarts; B, in P's subtree, routes
    P's resubscribe (having seen 18) through N, and it makes X a new root: N hangs from X
    and answers B naming no head, since X holds none of the tree's past."""
    node = joined_late()
    meet(node, X, 0.47)
    node.receive(1.0, P, SubscribeRestarted(70, KEY, 0.49))
    node.receive(1.0, A, RestartConfirmed(70, KEY))
    node.receive(1.1, B, ResubscribeRequest(70, KEY, MAX_HTL, 0.3, 0.49, 18))
    node.receive(1.2, P, RejectedLoop(70))  # P is the origin: on to X
    effects = node.receive(1.3, X, SubscribeSucceededNewRoot(70, KEY))
    # B is adopted at once (its subtree is what brings X the past), but its catch-up waits
    # for 19, which N never had: N asks X rather than tell B that 19 was missed.
    assert to(effects, B) == [SubscribeSucceeded(70, KEY, None)]
    assert FillRequest(KEY, 19, 19) in to(effects, X)
    stream = node.streams[KEY]
    assert (stream.parent, list(stream.children)) == (X, [A, B])
    return node


def test_a_child_whose_search_made_a_new_root_is_caught_up_once_the_root_has_it() -> None:
    # Told a packet the new root lacks was missed, such a child's subscriber would lose it,
    # and N would drop it as old when X, having gathered it from a subtree, sends it down.
    node = made_a_new_root()
    # A live packet meanwhile goes to A; B gets it only after what comes before it.
    assert sends(node.receive(1.4, X, data(22))) == [(A, data(22))]
    effects = node.receive(1.5, X, data(19))
    assert sends(effects) == [(B, data(19)), (B, data(20)), (B, data(21)), (B, data(22))]
    assert sends(node.receive(1.6, X, data(23))) == [(A, data(23)), (B, data(23))]


def test_a_held_back_catch_up_is_sent_when_its_wait_ends() -> None:
    node = made_a_new_root()
    node.receive(1.4, X, data(22))
    assert to(node.handle_timer(1.3 + FILL - 0.01), B) == []
    effects = node.handle_timer(1.3 + FILL)
    assert to(effects, B) == [PacketsMissed(KEY, 19, 19), data(20), data(21), data(22)]
    assert sends(node.receive(FILL + 2, X, data(23))) == [(A, data(23)), (B, data(23))]


def test_a_relay_never_claims_more_than_its_parent_has() -> None:
    """A's resubscribe has seen up to 19; P, where it coalesces, only up to 18. N, joining
    as its relay, must tell A the tree has 18, so A pushes 19 up to the root (were N to claim
    19, A would push nothing, and a new root would give 19 to another publish)."""
    node = make(0.45)
    meet(node, P, 0.49)
    meet(node, A, 0.2)
    node.receive(0.0, A, ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 19))
    effects = node.receive(0.0, P, SubscribeSucceeded(1, KEY, 18))
    assert sends(effects) == [(A, SubscribeSucceeded(1, KEY, 18))]
    assert node.streams[KEY].next_in == 19
    # The pushed-up 19 comes back down from the root: N takes it and passes it on.
    assert sends(node.receive(1.0, P, data(19))) == [(A, data(19))]


def test_a_fresh_relay_with_no_packet_yet_asks_for_what_a_resubscriber_lacks() -> None:
    # N relayed X's fresh subscribe to P, whose head was 2: N is placed at 3 and no packet
    # has come. B resubscribes having seen nothing (-1): N never had 0..2 but P has them
    # (not asking, N would tell B that 0..2 were missed).
    node = make(0.45)
    meet(node, P, 0.49)
    meet(node, b"X", 0.3)
    meet(node, B, 0.2)
    node.receive(0.0, b"X", SubscribeRequest(1, KEY, MAX_HTL, 0.3, None))
    node.receive(0.0, P, SubscribeSucceeded(1, KEY, 2))
    stream = node.streams[KEY]
    assert (stream.state, stream.next_in, stream.start) == (State.JOINED, None, 3)
    effects = node.receive(1.0, B, ResubscribeRequest(2, KEY, MAX_HTL, 0.2, 0.2, -1))
    assert sends(effects) == [(B, Accepted(2)), (P, FillRequest(KEY, 0, 2))]
    effects = [e for n in range(3) for e in node.receive(1.1, P, data(n))]
    assert to(effects, B) == [SubscribeSucceeded(2, KEY, 2), data(0), data(1), data(2)]


def test_a_fresh_relay_with_no_packet_yet_asks_on_for_its_childs_fill_request() -> None:
    # As above, but the one asking is a child's FillRequest (its own waiter's): N asks on
    # though no packet has come yet; ignored, the child would, after fill_timeout, tell its
    # resubscriber that packet 0 was missed, which P held.
    node = make(0.45)
    meet(node, P, 0.49)
    meet(node, b"X", 0.3)
    node.receive(0.0, b"X", SubscribeRequest(1, KEY, MAX_HTL, 0.3, None))
    node.receive(0.0, P, SubscribeSucceeded(1, KEY, 0))
    effects = node.receive(1.0, b"X", FillRequest(KEY, 0, 0))
    assert sends(effects) == [(P, FillRequest(KEY, 0, 0))]
    assert to(node.receive(1.1, P, data(0)), b"X") == [data(0)]
    # Numbers at or past its start it has not got either: they come down anyway.
    assert sends(node.receive(1.2, b"X", FillRequest(KEY, 3, 4))) == []


def test_outside_is_what_no_span_covers() -> None:
    assert outside(0, 9, []) == [(0, 9)]
    assert outside(0, 9, [(3, 4), (8, 20)]) == [(0, 2), (5, 7)]
    assert outside(5, 6, [(0, 5), (6, 6)]) == []


def test_gaps_are_what_was_never_held_nor_reported_missed() -> None:
    window = Window(100, 10**6)
    for n in (3, 4, 9):
        window.add(data(n))
    window.mark_missing(6, 7)
    assert gaps(window, 0, 10) == [(0, 2), (5, 5), (8, 8), (10, 10)]
    assert gaps(window, 3, 4) == []
