"""Refills (``overlay.core.refills``) at a root: what it tells a resubscriber in its
takeover grace, what it owes one it told a head below its own (``joining.owed_after``), and
whom it asks for what its waiters lack. Split from ``test_node_refills`` (its scenes: N
became root through C's resubscribe, having seen up to 2, and holds nothing of the tree's
past; or N, root past its grace, never had 19)."""

from __future__ import annotations

from nodes import MAX_HTL, meet
from refills import (
    ASK_19,
    KEY,
    A,
    C,
    W,
    data,
    push,
    root_that_lacks_19,
    rooted_by_a_resubscribe,
    to,
)

from overlay.messages import (
    Committed,
    FillRequest,
    PastQuery,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeSucceeded,
)

Y = b"Y"


def test_a_root_in_its_grace_tells_a_resubscriber_where_its_gap_starts() -> None:
    # W has seen 2 as well, so it needs nothing from N; but N holds nothing of 0..2, and
    # told "2" W would push nothing up (chaos: the only holder of 0..2 kept them, and a
    # subtree merging later was told they were missed).
    node = rooted_by_a_resubscribe()
    effects = node.receive(0.1, W, ResubscribeRequest(2, KEY, MAX_HTL, 0.4, 0.4, 2))
    # (Each is told how far it may show too: a root just made shows all it has processed.)
    assert to(effects, W) == [SubscribeSucceeded(2, KEY, None), Committed(KEY, 2)]
    node.receive(0.2, C, push(0))
    meet(node, b"Y", 0.35)
    effects = node.receive(0.3, b"Y", ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 2))
    # Told a head below its own, Y resumes there and is owed what lies between
    # (``joining.owed_after``): its catch-up and its mark wait for the pushes, as a
    # search's would (chaos: otherwise what came up went down to nobody).
    assert to(effects, b"Y") == [SubscribeSucceeded(3, KEY, 0), PastQuery(KEY, 1, 2, 32)]
    # A fresh child is told the head as ever: it wants what comes next, not the past.
    meet(node, b"F", 0.2)
    effects = node.receive(0.3, b"F", SubscribeRequest(4, KEY, MAX_HTL, 0.2, None))
    assert to(effects, b"F") == [SubscribeSucceeded(4, KEY, 2), Committed(KEY, 2)]


def test_a_child_told_a_head_below_its_own_gets_what_is_pushed_up_after_it() -> None:
    # Y relays a resubscribe that claims 2 but holds nothing: told "0", it resumes after 0.
    # What C pushes up next is a past every other child is beyond (``Ordering._backfill``), but not
    # Y: it gets 1 and 2, then how far it may show (chaos: a root in its grace told
    # a relay its head was 0, and 1..12, pushed up 12 ms later, went down to nobody).
    node = rooted_by_a_resubscribe()
    node.receive(0.2, C, push(0))
    meet(node, Y, 0.35)
    effects = node.receive(0.3, Y, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 2))
    assert to(effects, Y) == [SubscribeSucceeded(3, KEY, 0), PastQuery(KEY, 1, 2, 32)]
    assert to(node.receive(0.4, C, push(1)), Y) == []  # (2 is still to come)
    assert to(node.receive(0.4, C, push(2)), Y) == [data(1), data(2), Committed(KEY, 2)]


def test_a_child_waiting_already_is_asked_for_what_a_subtree_it_brings_may_hold() -> None:
    # A waits at N for 19 (its own FillRequest), then relays the resubscribe of a subtree
    # new below it that has seen up to 21: that subtree was not asked, and is, though the
    # wait it joins is A's own (only the wait just made for a newcomer asked it already).
    node, now = root_that_lacks_19()
    assert to(node.receive(now, A, FillRequest(KEY, 19, 19)), A) == [ASK_19]
    effects = node.receive(now + 1, A, ResubscribeRequest(7, KEY, MAX_HTL, 0.2, 0.2, 21))
    assert ASK_19 in to(effects, A)
