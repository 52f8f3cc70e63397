"""A root's answer to a child's claim of what it has seen (``Takeover.reported``): how far a
claim moves the root's head, a merging tree's past taken as holes to fill, and the claims
a detached node keeps for the case its search makes it root.

The constants are ``takeovers``'. N (0.45) is the root of KEY for its local client 1
(``root_with_packets``); U (0.2) is a peer about to join. In the later tests N is a relay
that lost its parent P (``detached_holding_nothing``).
"""

from __future__ import annotations

from nodes import make, meet, sends
from takeovers import GRACE, KEY, MAX_HTL, OLD, UID, C

from overlay.codec import encode
from overlay.core.effects import Deliver, Send
from overlay.core.events import Missed, Packet, PublishAcked, PublishCollided
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    MAX_PACKET,
    DataNotFound,
    Held,
    HeldQuery,
    Message,
    PacketKind,
    PacketsMissed,
    PublishCollision,
    PublishData,
    PublishSucceeded,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
)

P, A, D, E = b"P", b"A", b"D", b"E"  # a parent, a child and resubscribers of N


def root_with_packets(count: int, window: int = 8) -> Node:
    """N (0.45), root of KEY for local client 1, has ordered packets 0..count-1; U (0.2) is
    a peer about to subscribe."""
    node = make(window_packets=window)
    node.subscribe(0.0, KEY, 1)
    for n in range(count):
        node.publish(0.0, KEY, 1, UID + n, b"p%d" % n)
    meet(node, b"U", 0.2)
    return node


def test_claim_far_beyond_the_head_moves_it_by_at_most_one_window() -> None:
    node = root_with_packets(3)
    node.receive(1.0, b"U", SubscribeRequest(9, KEY, 5, 0.2, 10**12))
    stream = node.streams[KEY]
    assert (stream.high, stream.next_in, stream.root.recover_until) == (2 + 8, 3, 1.0 + GRACE)
    node.handle_timer(1.0 + GRACE)
    effects = node.publish(1.0 + GRACE, KEY, 1, 999, b"next")
    assert Send(b"U", PacketsMissed(KEY, 3, 10)) in effects  # told before 11 comes
    assert Deliver(1, Missed(KEY, 3, 10)) in effects
    assert Send(b"U", HeldQuery(KEY, 11)) in effects  # acked once its child holds it
    effects = node.receive(1.0 + GRACE, b"U", Held(KEY, 11))
    assert Deliver(1, PublishAcked(KEY, 999, 11)) in effects


def test_repeated_claims_from_one_child_move_the_head_by_at_most_one_window() -> None:
    node = root_with_packets(3)
    for i in range(50):
        node.receive(1.0 + i, b"U", SubscribeRequest(900 + i, KEY, 5, 0.2, 10**12))
    high = node.streams[KEY].high
    assert high is not None and high <= 2 + 8


def test_claim_at_an_empty_root_never_numbers_past_the_wire_limit() -> None:
    """An empty root must believe a resubscriber's last_seen (a handed-over tree goes on
    from there), but never beyond the numbers a packet can carry."""
    node = root_with_packets(0)
    node.receive(1.0, b"U", SubscribeRequest(9, KEY, 5, 0.2, MAX_PACKET))
    node.handle_timer(1.0 + GRACE)
    effects = node.publish(1.0 + GRACE, KEY, 1, 999, b"next")
    for effect in effects:
        if isinstance(effect, Send):
            encode(effect.message)  # every message a core builds must be valid on the wire
    acks = [e.event for e in effects if isinstance(e, Deliver)]
    assert all(a.number <= MAX_PACKET for a in acks if isinstance(a, PublishAcked))


def test_root_whose_tree_had_nothing_sends_a_merging_trees_past_down_every_branch() -> None:
    """A merge after a split: our tree had no packet while U's side numbered 0..2. U's push
    fills those numbers here in order, and they go down our other branch too: otherwise a
    side that was cut off never gets what the other side published meanwhile."""
    node = root_with_packets(0)
    meet(node, C, 0.3)
    node.receive(0.0, C, SubscribeRequest(8, KEY, 5, 0.3, None))
    node.receive(0.0, b"U", SubscribeRequest(9, KEY, 5, 0.2, 2))
    stream = node.streams[KEY]
    assert (stream.high, stream.next_in) == (2, 0)
    for n in range(3):
        pushed = PublishData(UID + n, KEY, n, 0.5, 10, OLD[n], None, PacketKind.DATA, None, True)
        effects = node.receive(0.1, b"U", pushed)
        packet = SubscribeData(KEY, n, OLD[n], None, PacketKind.DATA, None, None, UID + n)
        assert Send(C, packet) in effects
    assert node.stats.refilled == 3 and node.stats.published == 0
    # Both children hold them (``commits``): U pushed them, C was sent them.
    effects = node.receive(0.2, C, Held(KEY, 2)) + node.receive(0.2, b"U", Held(KEY, 2))
    delivered = [e.event for e in effects if isinstance(e, Deliver)]
    assert [(p.number, p.data) for p in delivered if isinstance(p, Packet)] == list(
        (n, OLD[n]) for n in range(3)
    )
    effects = node.handle_timer(GRACE)
    assert not [e for e in effects if isinstance(e, Send) and isinstance(e.message, PacketsMissed)]
    effects = node.publish(GRACE, KEY, 1, 999, b"next")
    assert Send(C, HeldQuery(KEY, 3)) in effects  # numbering goes on after the merged past


def test_pushed_packet_whose_uid_has_another_number_here_still_fills_its_place() -> None:
    """Two roots numbered one publish apart: uid 999 is packet 0 here, packet 1 on U's side.
    U's push of 1 fills our hole at 1 (its branch delivered it as 1) instead of being
    answered "0" and leaving 1 a hole that every branch of ours is told was missed."""
    node = root_with_packets(0)
    node.publish(0.0, KEY, 1, 999, b"same")
    node.receive(0.0, b"U", SubscribeRequest(9, KEY, 5, 0.2, 1))
    stream = node.streams[KEY]
    assert (stream.high, stream.next_in) == (1, 1)
    pushed = PublishData(999, KEY, 1, 0.5, 10, b"same", None, PacketKind.DATA, None, True)
    node.receive(0.1, b"U", pushed)
    assert stream.next_in == 2 and stream.window.get(1) is not None
    assert node.stats.refilled == 1


def test_claim_below_where_a_root_joined_the_tree_leaves_its_numbering_alone() -> None:
    """N joined the tree at 12 (it relayed A's resubscribe, seen up to 11, and the parent
    had nothing yet) and holds none of it, so it knows no head, only ``next_in`` 12. It
    becomes root; C, the root of a tree that numbered 0..1 apart, merges in claiming 1.
    Numbering goes on at 12; going back to 2 would acknowledge numbers the tree already
    gave twice, for different publishes."""
    node = make()
    B = b"B"
    for peer, location in ((P, 0.49), (A, 0.2), (B, 0.3), (C, 0.4)):
        meet(node, peer, location)
    node.receive(0.0, A, ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 11))
    node.receive(0.0, P, SubscribeSucceeded(1, KEY, None))
    node.receive(0.5, B, ResubscribeRequest(2, KEY, MAX_HTL, 0.3, 0.3, -1))  # waits
    stream = node.streams[KEY]
    assert (stream.next_in, stream.high) == (12, None)
    [(_, restarted)] = sends(node.link_down(1.0, P))
    assert isinstance(restarted, SubscribeRestarted)
    [(asked, search)] = sends(node.receive(1.0, A, RestartConfirmed(restarted.uid, KEY)))
    assert isinstance(search, ResubscribeRequest)
    node.receive(1.1, asked, DataNotFound(search.uid, KEY, 0))
    assert stream.state is State.ROOT and stream.root.recover_until is not None
    node.receive(1.2, C, ResubscribeRequest(9, KEY, MAX_HTL, 0.4, 0.4, 1))
    # The grace ends in a look, which finds nothing (no peer answers); B's wait is held
    # through it (``refills``), then B and C are served.
    effects = []
    while (at := node.next_deadline()) is not None and at < 100.0:
        effects += node.handle_timer(at)
    assert (C, PacketsMissed(KEY, 2, 11)) in sends(effects)  # C was served, and told
    assert C in stream.children
    assert stream.next_in == 12


def detached_holding_nothing() -> tuple[Node, bytes, ResubscribeRequest]:
    """N joined as A's relay under P, which had nothing yet; P dies, and N's own search
    goes to the peer returned."""
    node = make()
    for peer, location in ((P, 0.49), (A, 0.2), (D, 0.3)):
        meet(node, peer, location)
    node.receive(0.0, A, SubscribeRequest(1, KEY, MAX_HTL, 0.2, None))
    node.receive(0.0, P, SubscribeSucceeded(1, KEY, None))
    [(_, restarted)] = sends(node.link_down(1.0, P))
    assert isinstance(restarted, SubscribeRestarted)
    [(asked, search)] = sends(node.receive(1.0, A, RestartConfirmed(restarted.uid, KEY)))
    assert isinstance(search, ResubscribeRequest)
    assert node.streams[KEY].state is State.RESTARTING
    return node, asked, search


def test_claim_adopted_while_detached_is_numbered_above_once_we_become_root() -> None:
    """N, holding nothing of the stream, loses its parent; while its own search is out it
    adopts D, whose resubscribe has seen up to 19. The search finds nobody closer, so N
    becomes root: 0..19 are holes for D's subtree to fill, and numbering goes on at 20.
    Starting at 0 would acknowledge one number for two different publishes."""
    node, asked, search = detached_holding_nothing()
    stream = node.streams[KEY]
    node.receive(1.1, D, ResubscribeRequest(9, KEY, MAX_HTL, 0.3, 0.3, 19))
    assert stream.state is State.RESTARTING and D in stream.children
    node.receive(1.2, asked, DataNotFound(search.uid, KEY, 0))
    assert stream.state is State.ROOT and (stream.next_in, stream.high) == (0, 19)
    # The grace ends with the look for another tree (nobody else answers); then a publish
    # is numbered 20, what D's subtree did not bring announced missed first.
    assert stream.root.recover_until is not None
    effects = node.handle_timer(stream.root.recover_until)
    [label] = {m for _, m in sends(effects) if isinstance(m, SubscribeRestarted)}
    node.receive(2.0, A, RestartConfirmed(label.uid, KEY))
    [(asked, look)] = sends(node.receive(2.0, D, RestartConfirmed(label.uid, KEY)))
    assert isinstance(look, ResubscribeRequest)
    node.receive(2.1, asked, DataNotFound(look.uid, KEY, 0))
    effects = node.publish(2.2, KEY, 1, 999, b"new")
    assert (A, PacketsMissed(KEY, 0, 19)) in sends(effects)
    assert (A, HeldQuery(KEY, 20)) in sends(effects)  # the new packet is 20


def test_packet_pushed_up_while_detached_is_numbered_above_once_we_become_root() -> None:
    """D, adopted while N is detached, has seen up to 4 and pushes up 7 (5 and 6 lost on
    the way): N, made root, holds 5..7 open for the subtree to bring, and never gives 7 to
    a new publish (that would number 7 twice)."""
    node, asked, search = detached_holding_nothing()
    stream = node.streams[KEY]
    node.receive(1.1, D, ResubscribeRequest(9, KEY, MAX_HTL, 0.3, 0.3, 4))
    pushed = PublishData(UID + 7, KEY, 7, 0.5, 10, b"p7", None, PacketKind.DATA, None, True)
    node.receive(1.15, D, pushed)
    node.receive(1.2, asked, DataNotFound(search.uid, KEY, 0))
    assert stream.state is State.ROOT and stream.high == 7


def new_root_in_its_grace(numbers: tuple[int, ...], pushed: bool) -> tuple[Node, list[Message]]:
    """N, holding nothing, becomes root; A, below it, sends up ``numbers`` (pushed, or a
    publisher's guesses). Returns N and what it sends once its grace and look end."""
    node, asked, search = detached_holding_nothing()
    stream = node.streams[KEY]
    node.receive(1.2, asked, DataNotFound(search.uid, KEY, 0))
    assert stream.state is State.ROOT and (stream.next_in, stream.high) == (0, None)
    assert stream.root.recover_until is not None  # in its grace: the look comes first
    for n in numbers:
        sent = PublishData(UID + n, KEY, n, 0.5, 10, OLD[n], None, PacketKind.DATA, None, pushed)
        node.receive(1.3, A, sent)
    effects = node.handle_timer(stream.root.recover_until)
    [label] = {m for _, m in sends(effects) if isinstance(m, SubscribeRestarted)}
    [(asked, look)] = sends(node.receive(2.0, A, RestartConfirmed(label.uid, KEY)))
    assert isinstance(look, ResubscribeRequest)
    return node, [m for _, m in sends(node.receive(2.1, asked, DataNotFound(look.uid, KEY, 0)))]


def test_packets_pushed_up_to_a_new_root_in_its_grace_are_taken_in_their_places() -> None:
    """A, below N, adopted a resubscriber that had seen 1..3 and pushes them up. No claim
    reached N (A took that resubscribe), so the pushes are the claim: once the grace and
    the look end, N takes 1..3 under their numbers (0, which nobody brought, is announced
    missed) and numbers the next publish 4. Numbering new publishes 0..3 again would
    acknowledge those numbers twice, for different publishes."""
    node, sent = new_root_in_its_grace((1, 2, 3), pushed=True)
    assert PacketsMissed(KEY, 0, 0) in sent
    assert [m for m in sent if isinstance(m, PublishSucceeded)] == [
        PublishSucceeded(UID + n, KEY, n) for n in (1, 2, 3)
    ]
    effects = node.publish(2.2, KEY, 1, 999, b"new")
    assert [(peer, m.packet) for peer, m in sends(effects) if isinstance(m, SubscribeData)] == [
        (A, 4)  # the new packet is 4
    ]


def test_a_publishers_guess_at_a_new_root_in_its_grace_claims_nothing() -> None:
    """The same number from a publisher (not pushed) is a guess at a stream that has no
    past: it collides, and numbering starts at 0."""
    node, sent = new_root_in_its_grace((3,), pushed=False)
    assert sent.count(PublishCollision(UID + 3, KEY, 3, 0)) == 1
    assert not [m for m in sent if isinstance(m, PacketsMissed | PublishSucceeded)]
    effects = node.publish(2.2, KEY, 1, 999, b"new")
    assert (A, HeldQuery(KEY, 0)) in sends(effects)


def test_numbered_publish_after_the_grace_does_not_fill_the_open_tail() -> None:
    """U claimed 10 and brought nothing: 3..10 stay open past the grace. A signed
    publisher's guess of 3 is a new packet, not the lost one: the tail is announced missed
    and the publish told that 11 is free, as before the tail stayed open."""
    node = root_with_packets(3)
    node.receive(1.0, b"U", SubscribeRequest(9, KEY, 5, 0.2, 10))
    node.handle_timer(1.0 + GRACE)
    effects = node.publish(1.0 + GRACE, KEY, 1, 999, b"guess", packet=3)
    assert Send(b"U", PacketsMissed(KEY, 3, 10)) in effects
    assert Deliver(1, PublishCollided(KEY, 999, 3, 11)) in effects


def test_claim_outlives_the_member_that_made_it_and_a_second_restart() -> None:
    """N, detached, adopts E, which has seen up to 19; N reattaches under a new tree (its
    root has nothing yet), E leaves, and then N's new parent dies too. The second restart
    still claims 19, so N, made root, numbers above it: the packets are still out there,
    with whoever E went to. It used to start the claim again from what N itself held
    (nothing), and number 0 again."""
    node, asked, search = detached_holding_nothing()  # the search went to D
    stream = node.streams[KEY]
    meet(node, E, 0.25)
    node.receive(1.1, E, ResubscribeRequest(9, KEY, MAX_HTL, 0.25, 0.25, 19))
    node.receive(1.2, asked, SubscribeSucceeded(search.uid, KEY, None))  # a new tree
    assert stream.state is State.JOINED and stream.parent == asked
    node.link_down(1.3, E)
    [(_, restarted)] = sends(node.link_down(1.4, asked))
    assert isinstance(restarted, SubscribeRestarted)
    [(again, search)] = sends(node.receive(1.5, A, RestartConfirmed(restarted.uid, KEY)))
    assert isinstance(search, ResubscribeRequest)
    node.receive(1.6, again, DataNotFound(search.uid, KEY, 0))
    assert stream.state is State.ROOT and stream.high == 19
