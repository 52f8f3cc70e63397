"""Refills (``overlay.core.refills``): a node that joined a tree late asks its parent for the
packets a child needs from before it joined, instead of telling the child they were missed.

The scene (the chaos run's seeds 1 and 12): N (0.45) has nothing of the stream. A's
resubscribe, having seen up to packet 19, goes through N to P (0.49), which has the stream, so
N joins expecting 20. Then B's resubscribe coalesces at N having seen only up to 18: N never
had 19, but P holds it.
"""

from __future__ import annotations

from corenet import key_at
from nodes import MAX_HTL, make, meet, sends
from refills import (
    ASK_19,
    FILL,
    GRACE,
    KEY,
    A,
    B,
    C,
    D,
    P,
    W,
    b_resubscribes,
    data,
    joined_late,
    push,
    restart,
    root_that_lacks_19,
    rooted_by_a_resubscribe,
    served,
    settle,
    to,
)

from overlay.core.node import Node
from overlay.core.refills import MAX_FILLS, MAX_HOLDS, gaps, outside
from overlay.core.streams import State
from overlay.core.window import Window
from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    Committed,
    DataNotFound,
    FillRequest,
    Hello,
    PacketKind,
    PacketsMissed,
    PastQuery,
    PublishCollision,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
    RejectedLoop,
    RestartConfirmed,
    RestartEnded,
    ResubscribeRequest,
    SubscribeData,
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
    """The bug itself, pinned: without waiting (``wait=False``) the catch-up says 19 missed."""
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
    it adopts B: that N could not have accepted B's search itself does not matter (chaos:
    a relay refused a look its own root had taken, and two roots numbered 14)."""
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


Q = b"Q"


def detached_with_a_waiter() -> tuple[Node, ResubscribeRequest]:
    """A waits on N for 19 (asked at 1.0); P dies at 2.0 and N's resubscribe goes to Q."""
    node = joined_late()
    meet(node, Q, 0.48)
    node.receive(1.0, A, FillRequest(KEY, 19, 19))
    [search] = to(restart(node, 2.0), Q)
    assert isinstance(search, ResubscribeRequest)
    return node, search


def test_a_waiter_of_a_relay_that_reattaches_waits_anew_for_the_new_parent() -> None:
    # N's parent dies while A waits for 19; N is back in the tree 6 s later, under Q, and
    # asks Q. The 10 s A had ran mostly while nobody could answer: measured from the new
    # ask, Q's answer is in time (chaos: seven packets reported missed that Q brought).
    node, search = detached_with_a_waiter()
    effects = node.receive(7.0, Q, SubscribeSucceeded(search.uid, KEY, 21))
    assert (Q, FillRequest(KEY, 19, 19)) in sends(effects)
    assert to(node.handle_timer(1.0 + FILL), A) == []
    assert to(node.receive(1.0 + FILL + 1.0, Q, data(19)), A) == [data(19)]


def test_a_detached_relay_keeps_its_waiter_past_the_timeout_until_it_can_ask() -> None:
    # N restarts and is detached longer than fill_timeout: telling A that 19 was missed
    # then would lose what the tree may well hold (chaos: six packets reported missed that
    # the restarting relay's own subtree held).
    node, search = detached_with_a_waiter()
    node.receive(2.1, Q, Accepted(search.uid))  # Q's answer takes long (request_timeout)
    assert to(node.handle_timer(1.0 + FILL), A) == []
    assert node.streams[KEY].fills
    later = 1.0 + 1.5 * FILL
    effects = node.receive(later, Q, SubscribeSucceeded(search.uid, KEY, 21))
    assert (Q, FillRequest(KEY, 19, 19)) in sends(effects)
    assert to(node.handle_timer(later + FILL - 0.1), A) == []
    assert to(node.receive(later + 1.0, Q, data(19)), A) == [data(19)]


def below_a_restart() -> Node:
    """B waits on N for 19 (asked of P at 1.0); at 1.2 P's own parent dies, and P's restart
    (origin 0.49, closer to the key than B's must-beat) labels N's subtree."""
    node = joined_late()
    b_resubscribes(node)
    assert sends(node.receive(1.2, P, SubscribeRestarted(77, KEY, 0.49))) == [
        (A, SubscribeRestarted(77, KEY, 0.49))
    ]
    return node


def test_a_waiter_below_a_restarting_ancestor_waits_until_the_origin_is_back() -> None:
    # P holds N's ask and asks again once it is back in the tree, which may hold 19 (chaos:
    # a relay told a resubscriber packet 6 was missed 0.2 s before the restart's origin, the
    # new root, fetched 6 from a branch that held it).
    node = below_a_restart()
    assert to(node.handle_timer(1.0 + FILL), B) == []
    assert node.streams[KEY].fills
    back = 1.0 + FILL + 0.5
    assert sends(node.receive(back, P, RestartEnded(77, KEY))) == [(A, RestartEnded(77, KEY))]
    # The wait starts again when the label ends, without a second ask.
    assert to(node.handle_timer(back + FILL - 0.1), B) == []
    effects = node.receive(back + 1.0, P, data(19))
    assert to(effects, B) == [SubscribeSucceeded(2, KEY, 21), data(19), data(20), data(21)]
    assert B in node.streams[KEY].children and not node.refills.waiting


def test_a_label_that_never_ends_holds_a_waiter_only_so_long() -> None:
    node = below_a_restart()
    for timeout in range(1, MAX_HOLDS + 1):
        assert to(node.handle_timer(1.0 + timeout * FILL), B) == []
    effects = node.handle_timer(1.0 + (MAX_HOLDS + 1) * FILL)
    assert to(effects, B)[:2] == [
        SubscribeSucceeded(2, KEY, 21, restart=77, origin=0.49),
        PacketsMissed(KEY, 19, 19),
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


def test_a_root_asks_its_subtree_for_what_a_resubscriber_lacks() -> None:
    # A branch of the tree may hold what the root never had (chaos: a root that had
    # forgotten the stream told a late resubscriber 1..3 were missed, which three nodes of
    # another branch held).
    node, now = root_that_lacks_19()
    assert sends(b_resubscribes(node, now)) == [
        (B, Accepted(2)),
        (A, PastQuery(KEY, 19, 19, MAX_WIRE_HTL)),
    ]
    effects = node.receive(now, A, push(19))
    assert to(effects, A) == [PublishSucceeded(19, KEY, 19)]
    assert to(effects, B) == served(2)
    assert node.stats.backfilled == 1 and node.stats.published == 0


def test_what_the_subtree_does_not_bring_the_root_reports_missed_to_every_asker() -> None:
    node, now = root_that_lacks_19()
    node.receive(now, A, FillRequest(KEY, 19, 19))  # (a search is held longer)
    # The root answers a child's ask in half the fill timeout: its answer must reach the
    # waiters below it before their own fill timeout runs out.
    assert to(node.handle_timer(now + FILL / 2 - 0.01), A) == []
    effects = node.handle_timer(now + FILL / 2)
    assert to(effects, A) == [PacketsMissed(KEY, 19, 19)]
    # Lost for good: a later asker is told at once, and a late push of it is refused.
    later = now + FILL
    assert sends(node.receive(later, A, FillRequest(KEY, 19, 19))) == [
        (A, PacketsMissed(KEY, 19, 19))
    ]
    assert to(node.receive(later, A, push(19)), A) == [PublishCollision(19, KEY, 19, 22)]


def test_a_number_recorded_lost_is_asked_again_of_a_resubscriber_that_saw_past_it() -> None:
    # Chaos: a root recorded 5..15 lost at the end of its look, 0.2 s before a restarting
    # branch that held them attached; subscribers rejoining after a partition were then
    # told they were missed.
    node, now = root_that_lacks_19()
    node.receive(now, A, FillRequest(KEY, 19, 19))
    node.handle_timer(now + FILL / 2)  # 19 is lost for good
    later = now + FILL
    for peer, location in ((C, 0.35), (D, 0.36)):
        node.link_up(later, peer)
        node.receive(later, peer, Hello(location, 100))
    # D has not seen 19: nothing to ask it, and 19 stays lost.
    effects = node.receive(later, D, ResubscribeRequest(4, KEY, MAX_HTL, 0.36, 0.36, 18))
    assert to(effects, D)[:2] == [SubscribeSucceeded(4, KEY, 21), PacketsMissed(KEY, 19, 19)]
    # C's subtree has seen up to 21: it may hold 19, so it is asked for it again ...
    effects = node.receive(later, C, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 21))
    assert to(effects, C) == [SubscribeSucceeded(3, KEY, 21), Committed(KEY, 21), ASK_19]
    # ... and what it brings is taken in: a later asker gets the packet itself.
    assert to(node.receive(later, C, push(19)), C) == [PublishSucceeded(19, KEY, 19)]
    assert sends(node.receive(later, A, FillRequest(KEY, 19, 19))) == [(A, data(19))]


def test_the_search_that_made_a_root_is_asked_for_what_its_waiters_lack() -> None:
    # Chaos: a search made N root while another, coalesced there, waited for packet 0; N
    # had no child to ask then, and the subtree of the search that made it root, which held
    # 0, was never asked either.
    node, now = root_that_lacks_19()
    node.link_up(now, C)
    node.receive(now, C, Hello(0.35, 100))
    b_resubscribes(node, now)
    node.membership.adopt(now + 1, node.streams[KEY], C, 3, True, 21)
    assert to(node._flush(now + 1), C) == [
        SubscribeSucceededNewRoot(3, KEY, 21),
        Committed(KEY, 21),
        ASK_19,
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
    # Chaos: told 25 was missed, such a child's subscriber lost it, and N dropped 25 as old
    # when X, having gathered it from B's subtree 0.3 s later, sent it down.
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


def test_a_root_with_no_child_has_nobody_to_ask_and_reports_the_gap_at_once() -> None:
    node, now = root_that_lacks_19(local=True)
    node.link_down(now, A)
    settle(node)  # losing a child holds the root's numbering a grace too
    assert not node.streams[KEY].children
    effects = b_resubscribes(node, now * 2)
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]


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


def test_a_relay_never_claims_more_than_its_parent_has() -> None:
    """A's resubscribe has seen up to 19; P, where it coalesces, only up to 18. N, joining
    as its relay, must tell A the tree has 18, so A pushes 19 up to the root (the 1000-node
    chaos run: N claimed 19, A pushed nothing, and the new root gave 19 to another publish)."""
    node = make(0.45)
    meet(node, P, 0.49)
    meet(node, A, 0.2)
    node.receive(0.0, A, ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 19))
    effects = node.receive(0.0, P, SubscribeSucceeded(1, KEY, 18))
    assert sends(effects) == [(A, SubscribeSucceeded(1, KEY, 18))]
    assert node.streams[KEY].next_in == 19
    # The pushed-up 19 comes back down from the root: N takes it and passes it on.
    assert sends(node.receive(1.0, P, data(19))) == [(A, data(19))]


# --- a root in its takeover grace: the past comes from below ------------------------------------


def test_a_root_in_its_grace_waits_for_the_past_to_be_pushed_up_and_serves_it() -> None:
    node = rooted_by_a_resubscribe()
    # Not "1..2 missed": C holds them and is about to push them up. The root asks its
    # subtree again for them: one that attached below since its grace began was not asked.
    assert sends(node.receive(0.1, W, ResubscribeRequest(2, KEY, MAX_HTL, 0.4, 0.4, 0))) == [
        (W, Accepted(2)),
        (C, PastQuery(KEY, 1, 2, MAX_WIRE_HTL)),
    ]
    assert to(node.receive(0.2, C, push(0)), W) == []
    assert to(node.receive(0.2, C, push(1)), W) == []
    effects = node.receive(0.2, C, push(2))
    assert to(effects, C) == [PublishSucceeded(2, KEY, 2)]
    assert to(effects, W) == [SubscribeSucceeded(2, KEY, 2), data(1), data(2), Committed(KEY, 2)]
    assert node.stats.backfilled == 3 and node.stats.published == 0
    # The uids came with them: a publisher's retry of one gets its original number.
    uids = node.streams[KEY].uids
    assert uids is not None and uids.numbers() == {0: 0, 1: 1, 2: 2}


def test_a_publisher_naming_a_number_before_a_roots_head_is_not_taken_as_the_past() -> None:
    # In its grace N takes packets before its head when members push them up. A publisher
    # that names such a number guesses: it was stored as that packet, though another
    # publish may have it, and acknowledged. Now it waits for the grace to end (a member
    # may push that packet up yet), then collides, and nothing is stored.
    node = rooted_by_a_resubscribe()
    guess = PublishData(9, KEY, 1, 0.3, MAX_HTL, b"guess", None, PacketKind.DATA, None)
    assert to(node.receive(0.1, C, guess), C) == []
    assert PublishCollision(9, KEY, 1, 3) in to(settle(node), C)
    assert len(node.streams[KEY].window) == 0 and node.stats.backfilled == 0


def test_a_publisher_retrying_a_packet_a_member_pushes_up_in_the_grace_is_told_its_number() -> None:
    # A signed publisher retries packet 1 (uid 1), whose acknowledgement it lost, while N
    # is in its grace; C then pushes 1 up. The retry waited, so it is acknowledged as 1,
    # not refused as a guess.
    node = rooted_by_a_resubscribe()
    retry = PublishData(1, KEY, 1, 0.3, MAX_HTL, b"p1", None, PacketKind.DATA, None)
    assert to(node.receive(0.1, C, retry), C) == []
    node.receive(0.2, C, push(1))
    effects = settle(node)
    assert to(effects, C).count(PublishSucceeded(1, KEY, 1)) >= 1
    assert not [m for m in to(effects, C) if isinstance(m, PublishCollision)]


def test_a_push_beyond_the_head_is_taken_before_a_publish_that_waited_in_the_grace() -> None:
    # N holds nothing, continues after 2 and numbers nothing in its grace. A new publish
    # waits; then C pushes up 5, which the tree had. 5 is taken as 5 when the grace ends,
    # after 3..4 are reported missed, and the publish is numbered 6. Claimed only up to 4,
    # 5 stayed queued behind the publish, which was numbered 5 first.
    node = rooted_by_a_resubscribe()
    fresh = PublishData(9, KEY, None, 0.3, MAX_HTL, b"new", None, PacketKind.DATA, None)
    assert to(node.receive(0.1, C, fresh), C) == []  # waits for the grace to end
    answers = (PublishSucceeded, PublishCollision)
    assert not [m for m in to(node.receive(0.2, C, push(5)), C) if isinstance(m, answers)]
    effects = settle(node)
    assert PublishSucceeded(5, KEY, 5) in to(effects, C)
    assert PublishNumbered(9, KEY, 6) in to(effects, C)  # (sent down once C confirms)


def test_what_nobody_pushes_up_within_the_grace_is_reported_missed_then() -> None:
    node = rooted_by_a_resubscribe()
    node.receive(0.1, W, ResubscribeRequest(2, KEY, MAX_HTL, 0.4, 0.4, 0))
    assert to(node.handle_timer(GRACE - 0.01), W) == []
    served = [
        m
        for m in to(settle(node), W)
        if isinstance(m, SubscribeSucceeded | SubscribeData | PacketsMissed)
    ]
    assert [type(m) for m in served] == [SubscribeSucceeded, PacketsMissed]
    assert served[1] == PacketsMissed(KEY, 1, 2)


def test_after_its_grace_a_root_takes_an_old_packet_only_when_it_asked_for_it() -> None:
    node = rooted_by_a_resubscribe()
    settle(node)
    now = GRACE * 10
    assert to(node.receive(now, C, push(1)), C) == [PublishCollision(1, KEY, 1, 3)]
    assert len(node.streams[KEY].window) == 0
    effects = node.receive(now, W, ResubscribeRequest(2, KEY, MAX_HTL, 0.4, 0.4, 0))
    assert sends(effects) == [(W, Accepted(2)), (C, PastQuery(KEY, 1, 2, MAX_WIRE_HTL))]
    node.receive(now, C, push(1))
    effects = node.receive(now, C, push(2))
    assert to(effects, W) == [SubscribeSucceeded(2, KEY, 2), data(1), data(2), Committed(KEY, 2)]


def test_a_relay_on_a_new_roots_path_that_becomes_root_numbers_after_the_trees_head() -> None:
    # N relayed A's resubscribe (seen up to 2) to P, which became root through it: N starts
    # at 3 and holds nothing. P dies; N, root of A's subtree now, must go on at 3, not at 0
    # (chaos: packets 0..2 acknowledged twice, for different publishes).
    node = make(0.45)
    meet(node, P, 0.49)
    meet(node, A, 0.2)
    node.receive(0.0, A, ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 2))
    node.receive(0.0, P, SubscribeSucceededNewRoot(1, KEY))
    stream = node.streams[KEY]
    assert (stream.state, stream.parent, stream.next_in, stream.high) == (State.JOINED, P, 3, 2)
    [restarted] = to(node.link_down(1.0, P), A)
    assert isinstance(restarted, SubscribeRestarted)
    [search] = to(node.receive(1.0, A, RestartConfirmed(restarted.uid, KEY)), A)
    assert isinstance(search, ResubscribeRequest)  # through its child: the only peer left
    node.receive(1.0, A, DataNotFound(search.uid, KEY, 0))
    assert stream.state is State.ROOT
    node.receive(
        1.0, A, PublishData(77, KEY, None, 0.5, MAX_HTL, b"new", None, PacketKind.DATA, None)
    )
    answers = to(settle(node), A)
    # With confirmation (the default) the number goes first to A's node to be confirmed.
    assert PublishNumbered(77, KEY, 3) in answers


def test_a_fresh_relay_with_no_packet_yet_asks_for_what_a_resubscriber_lacks() -> None:
    # N relayed X's fresh subscribe to P, whose head was 2: N is placed at 3 and no packet
    # has come. B resubscribes having seen nothing (-1): N never had 0..2 but P has them
    # (chaos: B was told 0..2 were missed).
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
    # As above, but the one asking is a child's FillRequest (its own waiter's): N used to
    # ignore it while no packet had come, and the child, after fill_timeout, told its
    # resubscriber that packet 0 was missed, which P held (chaos seed 16851).
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
