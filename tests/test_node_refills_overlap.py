"""Refills at a root whose waiters ask for the same numbers (``overlay.core.refills``): a
subtree that attaches meanwhile is asked too, and a child's FillRequest waits as long as a
search held at the root for the same numbers. The scene is ``test_node_refills``'s root
that lacks 19."""

from __future__ import annotations

from nodes import MAX_HTL, sends
from refills import ASK_19, FILL, KEY, A, C, D, data, push, root_that_lacks_19, served, to

from overlay.messages import (
    Accepted,
    Committed,
    FillRequest,
    Hello,
    PacketsMissed,
    PublishSucceeded,
    ResubscribeRequest,
    SubscribeSucceeded,
)


def test_a_subtree_that_attaches_while_a_waiter_waits_is_asked_too() -> None:
    # Chaos: a root told its waiters packet 0 was missed 0.2 s after a subtree holding 0
    # attached below; the subtree was never asked, and the first waiter's timeout made the
    # root record 0 lost for good although a later waiter still waited for it.
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
    # asker so, the root's own waiters too once it rejoins a tree through that branch (hunt
    # seed 8080 with peer witnesses: a root cut off by a partition told a relay packet 0 was
    # missed while a subscriber's search still waited for it; after the heal the root joined
    # another tree through that relay's old branch, which answered its ask with "missed").
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
