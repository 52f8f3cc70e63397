"""Refills (``overlay.core.refills``) at a root: a root that lacks what a resubscriber or
a child needs asks its subtree (PastQuery), including subtrees that attach while the waiter
waits; what nobody brings it records lost and reports missed to every asker, until a
resubscriber that saw past it may bring it. The scene is ``refills.root_that_lacks_19``:
N, root past its grace, never had 19."""

from __future__ import annotations

from nodes import MAX_HTL, sends
from refills import (
    ASK_19,
    FILL,
    KEY,
    A,
    B,
    C,
    D,
    b_resubscribes,
    data,
    push,
    root_that_lacks_19,
    served,
    settle,
    to,
)

from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    Committed,
    FillRequest,
    Hello,
    PacketsMissed,
    PastQuery,
    PublishCollision,
    PublishSucceeded,
    ResubscribeRequest,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)


def test_a_root_asks_its_subtree_for_what_a_resubscriber_lacks() -> None:
    # A branch of the tree may hold what the root never had (a root that forgot the
    # stream, say): not asking it, the root would tell a late resubscriber that packets
    # another branch holds were missed.
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
    # A root may record numbers lost just before a branch that holds them attaches; not
    # asking that branch again, it would tell subscribers that rejoin after a partition
    # that those were missed.
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
    # A search makes N root while another, coalesced there, waits for a packet; N has no
    # child to ask then, so the subtree of the search that made it root, which may hold
    # the packet, must be asked once it hangs below N.
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


def test_a_root_with_no_child_has_nobody_to_ask_and_reports_the_gap_at_once() -> None:
    node, now = root_that_lacks_19(local=True)
    node.link_down(now, A)
    settle(node)  # losing a child holds the root's numbering a grace too
    assert not node.streams[KEY].children
    effects = b_resubscribes(node, now * 2)
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]


def test_a_subtree_that_attaches_while_a_waiter_waits_is_asked_too() -> None:
    # A subtree that holds a waited-for packet may attach below the root while its waiters
    # wait: unasked, it would leave them told the packet was missed, and the first waiter's
    # timeout would record it lost for good although a later waiter still waits for it.
    node, now = root_that_lacks_19()
    for peer, location in ((C, 0.35), (D, 0.36)):
        node.link_up(now, peer)  # (a root that lost a link probes on a new one: not asserted)
        node.receive(now, peer, Hello(location, 100))
    node.receive(now, A, FillRequest(KEY, 19, 19))  # the first waiter: A is asked for 19
    # C's subtree, which has seen up to 21, attaches: it may hold 19, so it is asked too.
    effects = node.receive(now + 1, C, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 21))
    assert to(effects, C) == [SubscribeSucceeded(3, KEY, 21), Committed(KEY, 21), ASK_19]
    # D needs 19 too: it waits, and nothing is asked again.
    effects = node.receive(now + 2, D, ResubscribeRequest(4, KEY, MAX_HTL, 0.36, 0.36, 18))
    assert sends(effects) == [(D, Accepted(4))]
    # A's wait ends, but D's search still waits for 19, so 19 is not lost yet, and A is
    # not told it was missed either: A's branch would record 19 lost and tell every later
    # asker so, the root's own waiters too once it rejoins a tree through that branch (a root
    # cut off by a partition would tell a relay packet 0 was missed while a subscriber's
    # search still waited for it; after the heal the root would join another tree through
    # that relay's old branch, which would answer its ask with "missed").
    # A waits with D.
    effects = node.handle_timer(now + FILL / 2)
    assert to(effects, A) == []
    assert to(effects, D) == []
    effects = node.receive(now + FILL / 2 + 0.5, C, push(19))
    assert to(effects, C) == [PublishSucceeded(19, KEY, 19)]
    assert to(effects, A) == [data(19)]
    assert to(effects, D) == served(4)


def test_a_childs_fill_that_came_first_waits_as_long_as_a_later_search_for_the_same() -> None:
    # A's FillRequest came first, and D's search for 19 late
    # in A's wait; A must not be told 19 was missed while D's search still waits for it.
    node, now = root_that_lacks_19()
    node.link_up(now, D)
    node.receive(now, D, Hello(0.36, 100))
    node.receive(now, A, FillRequest(KEY, 19, 19))
    patience = (node.config.request_timeout - node.config.fill_timeout) / 2
    late = now + patience - 1.0
    effects = node.receive(late, D, ResubscribeRequest(4, KEY, MAX_HTL, 0.36, 0.36, 18))
    assert sends(effects) == [(D, Accepted(4))]
    at = late
    while at < late + 2 * patience:
        at += 0.5
        effects = node.handle_timer(at)
        assert to(effects, A) == []  # never while D's search waits
        if to(effects, D):
            break  # D's search gave up (told 19 missed): A's ends at its next round
    assert PacketsMissed(KEY, 19, 19) in to(effects, D)
    ended = at
    while not to(effects, A) and at < ended + FILL:
        at += 0.5
        effects = node.handle_timer(at)
    assert to(effects, A) == [PacketsMissed(KEY, 19, 19)] and at > ended


def test_a_child_waiting_already_is_asked_for_what_a_subtree_it_brings_may_hold() -> None:
    # A waits at N for 19 (its own FillRequest), then relays the resubscribe of a subtree
    # new below it that has seen up to 21: that subtree was not asked, and is, though the
    # wait it joins is A's own (only the wait just made for a newcomer asked it already).
    node, now = root_that_lacks_19()
    assert to(node.receive(now, A, FillRequest(KEY, 19, 19)), A) == [ASK_19]
    effects = node.receive(now + 1, A, ResubscribeRequest(7, KEY, MAX_HTL, 0.2, 0.2, 21))
    assert ASK_19 in to(effects, A)
