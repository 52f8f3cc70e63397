"""Refills (``overlay.core.refills``) at a root in its takeover grace: the tree's past comes
from below. N became root through C's resubscribe, having seen up to 2, and holds nothing of
the tree's past (``refills.rooted_by_a_resubscribe``): it tells resubscribers where its gap
starts, owes one it told a head below its own what is pushed up after it
(``joining.owed_after``), takes the pushed-up past with its uids, and reports missed only
what nobody pushed up within the grace."""

from __future__ import annotations

from nodes import MAX_HTL, make, meet, sends
from refills import (
    GRACE,
    KEY,
    A,
    C,
    P,
    W,
    data,
    push,
    rooted_by_a_resubscribe,
    settle,
    to,
)

from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    Committed,
    DataNotFound,
    PacketKind,
    PacketsMissed,
    PastQuery,
    PublishCollision,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
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
    # What C pushes up next is a past every other child is beyond (``Ordering._backfill``),
    # but not Y: it gets 1 and 2, then how far it may show. Otherwise a relay told a head
    # below its own during the grace would never get the packets pushed up after it.
    node = rooted_by_a_resubscribe()
    node.receive(0.2, C, push(0))
    meet(node, Y, 0.35)
    effects = node.receive(0.3, Y, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 2))
    assert to(effects, Y) == [SubscribeSucceeded(3, KEY, 0), PastQuery(KEY, 1, 2, 32)]
    assert to(node.receive(0.4, C, push(1)), Y) == []  # (2 is still to come)
    assert to(node.receive(0.4, C, push(2)), Y) == [data(1), data(2), Committed(KEY, 2)]


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
