"""A publisher's node's claim on a number (``PublishData.claim``): pushed up when a root that
took the tree over asks beyond its head (``Gathering.on_past_query``, ``push_claims``), taken
by a root only as the next new number (``Takeover.on_claim``), refused otherwise, and then
published afresh by the publisher's node (``PacketFlow.on_answer``).

The root tests use ``test_node``'s N (0.45), root of KEY for its local client 1, with
children C1 and C2; the others the tree of ``test_publishing`` (root R, relay B, publisher
A, subscribers A, D and E), or N as a publisher's node that takes the tree over holding its
own claims (``Claims.own_claims``).
"""

from __future__ import annotations

import dataclasses

from nodes import KEY, make, meet, root_with_children, sends
from publish_tree import packets, tree
from refills import settle

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect
from overlay.core.events import Packet, PublishAcked
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    DataNotFound,
    Held,
    Message,
    PacketKind,
    PastQuery,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeSucceeded,
)

GRACE = NodeConfig().takeover_grace
UID = 100  # N's client published packet n with uid UID + n
C1, C2, U = b"C1", b"C2", b"U"


def claim(uid: int, number: int, data: bytes = b"claimed") -> PublishData:
    """A publisher's node's push of its publish ``uid`` under ``number``."""
    return PublishData(
        uid, KEY, number, 0.2, MAX_WIRE_HTL, data, None, PacketKind.DATA, None, True, True
    )


def held_push(number: int) -> PublishData:
    """A member's push of packet ``number`` it holds (not a claim)."""
    return PublishData(
        900 + number, KEY, number, 0.2, MAX_WIRE_HTL, b"held", None, PacketKind.DATA, None, True
    )


def root_with_packets(count: int) -> Node:
    """N, root with children C1 and C2, has numbered 0..count-1, each held by both."""
    node = root_with_children(C1, C2)
    for n in range(count):
        node.publish(0.0, KEY, 1, UID + n, b"p%d" % n)
    for child in (C1, C2):
        node.receive(0.0, child, Held(KEY, count - 1))
    return node


def answers(effects: list[Effect], to: bytes = C1) -> list[Message]:
    """The answers to publishes sent to ``to``."""
    kinds = (PublishSucceeded, PublishCollision, PublishNumbered)
    return [m for peer, m in sends(effects) if peer == to and isinstance(m, kinds)]


def in_grace(node: Node, last_seen: int) -> None:
    """U joins N having seen up to ``last_seen``: N holds numbering for a grace."""
    meet(node, U, 0.2)
    node.receive(1.0, U, SubscribeRequest(9, KEY, 5, 0.2, last_seen))
    assert node.streams[KEY].root.recover_until == 1.0 + GRACE


# --- at the root ------------------------------------------------------------------------------


def test_a_claim_on_the_next_number_is_taken_and_answered_once_another_child_holds_it() -> None:
    node = root_with_packets(3)
    effects = node.receive(1.0, C1, claim(7, 3))
    stream = node.streams[KEY]
    assert stream.window.get(3) is not None and stream.window.get(3).data == b"claimed"  # type: ignore[union-attr]
    # It may never have gone down anywhere: answered like a publish, not like a held push.
    assert answers(effects) == []
    node.receive(1.1, C1, Held(KEY, 3))
    effects = node.receive(1.1, C2, Held(KEY, 3))
    assert answers(effects) == [PublishSucceeded(7, KEY, 3)]


def test_a_claim_beyond_the_next_number_is_refused_and_moves_nothing() -> None:
    # Taken, it would leave 3 and 4 as a hole, announced missed to everyone: the root that
    # gave 5 may have dropped it unsent (a process killed, say).
    node = root_with_packets(3)
    effects = node.receive(1.0, C1, claim(7, 5))
    stream = node.streams[KEY]
    assert answers(effects) == [PublishCollision(7, KEY, 5, 3)]
    assert (stream.high, stream.next_in, stream.root.recover_until) == (2, 3, None)
    assert node.stats.claims_refused == 1 and node.stats.gaps == 0


def test_a_claim_in_the_open_tail_is_refused() -> None:
    # The tree had 3 and 4 (U saw them), but nobody brought them: a claim on 4 may be
    # another root's packet 4, so it is not taken under that number.
    node = root_with_packets(3)
    in_grace(node, 4)
    node.handle_timer(1.0 + GRACE)
    effects = node.receive(1.0 + GRACE, C1, claim(7, 4))
    assert answers(effects) == [PublishCollision(7, KEY, 4, 5)]
    assert node.streams[KEY].window.get(4) is None


def test_in_a_grace_claims_wait_for_the_held_packets_and_are_taken_in_number_order() -> None:
    node = root_with_packets(3)
    in_grace(node, 4)  # 3 and 4 are U's to bring
    node.receive(1.1, C2, claim(8, 6, b"six"))  # came first, but 5 comes before it
    node.receive(1.2, C1, claim(7, 5, b"five"))
    node.receive(1.3, U, held_push(4))
    node.receive(1.3, U, held_push(3))
    stream = node.streams[KEY]
    assert stream.window.get(5) is None and stream.high == 4  # a claim moves no head
    node.handle_timer(1.0 + GRACE)
    assert [(n, p.data) for n, p in stream.window.packets.items() if n >= 3] == [
        (3, b"held"),
        (4, b"held"),
        (5, b"five"),
        (6, b"six"),
    ]
    assert node.stats.claims_refused == 0 and node.stats.gaps == 0


def test_a_claim_replaces_the_plain_retry_of_its_publish_that_waited() -> None:
    # The publisher's node retried its publish while the root was in its grace; then it
    # pushed its claim. Kept instead of the claim, the retry was numbered afresh.
    node = root_with_packets(3)
    in_grace(node, 3)
    node.receive(1.1, U, held_push(3))
    other = PublishData(8, KEY, None, 0.2, MAX_WIRE_HTL, b"y", None, PacketKind.DATA, None)
    node.receive(1.1, C2, other)
    node.receive(1.1, C1, dataclasses.replace(other, uid=7, data=b"x"))
    node.receive(1.2, C1, claim(7, 4, b"x"))
    stream = node.streams[KEY]
    assert [(m.uid, m.claim) for _, m in stream.queued] == [(8, False), (7, True)]
    node.handle_timer(1.0 + GRACE)
    assert stream.window.get(4).uid == 7  # type: ignore[union-attr]


def test_in_a_grace_one_claim_from_two_children_is_taken_once_and_answered_to_both() -> None:
    # A relay's witness (``witnesses``) and the publisher's own claim, come two ways (the
    # publisher attached elsewhere): kept once, the other child's publisher heard nothing
    # until its timer, and a push on its last attempt ended in a timeout.
    node = root_with_packets(3)
    in_grace(node, 3)
    node.receive(1.1, U, held_push(3))
    node.receive(1.1, C1, claim(7, 4, b"x"))
    node.receive(1.2, C1, claim(7, 4, b"x"))  # (a resend from the same child: kept once)
    node.receive(1.2, C2, claim(7, 4, b"x"))
    effects = node.handle_timer(1.0 + GRACE)
    stream = node.streams[KEY]
    assert stream.window.get(4).uid == 7 and stream.window.get(5) is None  # type: ignore[union-attr]
    for child in (C1, C2, U):
        effects += node.receive(1.0 + GRACE, child, Held(KEY, 4))
    assert answers(effects, C1) == [PublishSucceeded(7, KEY, 4)]
    assert answers(effects, C2) == [PublishSucceeded(7, KEY, 4)]


def test_a_claim_for_a_publish_numbered_here_otherwise_gets_that_number() -> None:
    node = root_with_packets(3)
    effects = node.receive(1.0, C1, claim(UID + 1, 3, b"p1"))
    assert answers(effects) == [PublishSucceeded(UID + 1, KEY, 1)]
    assert node.streams[KEY].window.get(3) is None


def test_a_claim_never_jumps_publishes_pending_confirmation() -> None:
    node = root_with_packets(3)
    child = PublishData(50, KEY, None, 0.2, MAX_WIRE_HTL, b"q", None, PacketKind.DATA, None)
    assert answers(node.receive(1.0, C2, child), to=C2) == [PublishNumbered(50, KEY, 3)]
    effects = node.receive(1.1, C1, claim(7, 4))
    assert answers(effects) == [PublishCollision(7, KEY, 4, 4)]
    stream = node.streams[KEY]
    assert list(stream.root.pending) == [3]  # untouched: its publisher confirms it still
    node.receive(1.2, C2, PublishConfirmed(50, KEY, 3))
    assert stream.window.get(3).uid == 50  # type: ignore[union-attr]


def test_a_detached_node_takes_no_claim_as_the_trees_past() -> None:
    # A held packet pushed up to a restarting node says the tree got that far; a claim
    # does not (its root may have dropped it), so it is not numbered above.
    node = make()
    for peer, location in ((b"P", 0.49), (b"A", 0.2)):
        meet(node, peer, location)
    node.receive(0.0, b"A", SubscribeRequest(1, KEY, 5, 0.2, None))
    node.receive(0.0, b"P", SubscribeSucceeded(1, KEY, None))
    node.link_down(1.0, b"P")
    stream = node.streams[KEY]
    assert stream.state is State.RESTARTING
    node.receive(1.1, b"A", claim(7, 12))
    assert stream.subtree_high is None and [m.uid for _, m in stream.queued] == [7]


# --- at the publisher's node ------------------------------------------------------------------


def test_a_member_asked_beyond_its_head_pushes_its_claims_there() -> None:
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    net.inject(b"B", b"A", PublishNumbered(uid, KEY, 5))
    net.trace.clear()
    net.inject(b"B", b"A", PastQuery(KEY, 0, 3, MAX_WIRE_HTL))  # not in the span: nothing
    net.inject(b"B", b"A", PastQuery(KEY, 4, 40, MAX_WIRE_HTL))
    ups = [m for s, d, m in net.sent(PublishData) if (s, d) == (b"A", b"B")]
    assert [(m.uid, m.packet, m.pushed, m.claim, m.data) for m in ups] == [
        (uid, 5, True, True, b"mine")
    ]


def test_a_refused_claim_is_published_afresh_and_the_client_sees_only_the_ack() -> None:
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    net.inject(b"B", b"A", PublishNumbered(uid, KEY, 7))  # a root since lost
    net.inject(b"B", b"A", PublishCollision(uid, KEY, 7, 0))  # the claim refused
    a = net.nodes[b"A"]
    assert a.stats.claims_renewed == 1 and a.streams[KEY].claims == {}
    again = [m for s, d, m in net.sent(PublishData) if (s, d) == (b"A", b"B")]
    assert [m.packet for m in again] == [None, None]  # the first try, then afresh
    net.release(b"R")
    assert net.answers(b"A") == [PublishAcked(KEY, uid, 0)]


def test_a_new_root_above_the_publisher_takes_its_claim_before_what_waited() -> None:
    # The claim class (tests/test_sim_chaos_claims.py) in small. R numbered A's publish
    # 0 and A confirmed; R sent it down and was cut off. B, A's parent all along, takes
    # the tree over; D publishes meanwhile. A's parent never changed, so only B's question
    # beyond its head brings A's claim up: taken as 0, D's publish is numbered 1. Before,
    # D's got 0, which R's side had been shown as A's.
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    net.inject(b"B", b"A", PublishNumbered(uid, KEY, 0))
    net.disconnect(b"R", b"B")
    net.disconnect(b"R", b"E")
    b = net.stream(b"B", KEY)
    assert b is not None and b.state is State.ROOT and b.root.recover_until is not None
    net.publish(b"D", KEY, b"other")
    net.advance(net.now + GRACE + 1.0)
    assert packets(net, b"D")[:2] == [(0, b"mine"), (1, b"other")]
    assert net.answers(b"A") == [PublishAcked(KEY, uid, 0)]


def publisher_numbered_then_alone(numbers: dict[int, int]) -> Node:
    """N publishes (its client 1, uids in ``numbers``) through its parent P, which numbers
    them so and is confirmed; then P's link goes, and N's resubscribe finds nobody
    (through Q): N takes the tree over, holding its claims, and is in its grace."""
    node = make(0.45)
    meet(node, b"P", 0.49)
    meet(node, b"Q", 0.2)
    [search] = [m for _, m in sends(node.subscribe(0.0, KEY, 1)) if isinstance(m, SubscribeRequest)]
    node.receive(0.0, b"P", SubscribeSucceeded(search.uid, KEY, None))
    for uid in sorted(numbers):
        node.publish(0.1, KEY, 1, uid, b"p%d" % uid)
    for uid, number in numbers.items():
        node.receive(0.2, b"P", PublishNumbered(uid, KEY, number))
    [again] = [m for _, m in sends(node.link_down(1.0, b"P")) if isinstance(m, ResubscribeRequest)]
    node.receive(1.0, b"Q", DataNotFound(again.uid, KEY, 0))
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.root.recover_until is not None
    assert stream.claims == numbers
    return node


def test_a_publishers_node_that_takes_the_tree_over_takes_its_own_claims() -> None:
    # P numbered 102 as 0 and 101 as 1 and may have sent both down. N's claims went up
    # only to a parent, and as root it has none: numbered afresh, in the order its client
    # published them, 101 would get 0, while a subscriber on P's side may have been shown
    # 0 as another publish.
    node = publisher_numbered_then_alone({102: 0, 101: 1})
    settle(node)
    window = node.streams[KEY].window
    assert [(n, p.uid) for n, p in window.packets.items()] == [(0, 102), (1, 101)]
    assert node.stats.claims_refused == 0


def test_a_publishers_node_root_refused_its_own_claim_publishes_it_afresh() -> None:
    # A claim beyond the next number is refused (``on_claim``), here too; the publish is
    # numbered afresh and its client sees only the final acknowledgement.
    node = publisher_numbered_then_alone({101: 5})
    effects = settle(node)
    assert [(n, p.uid) for n, p in node.streams[KEY].window.packets.items()] == [(0, 101)]
    assert node.stats.claims_refused == 1 and node.stats.claims_renewed == 1
    assert node.streams[KEY].claims == {}
    told = [e.event for e in effects if isinstance(e, Deliver) and not isinstance(e.event, Packet)]
    assert told == [PublishAcked(KEY, 101, 0)]  # (no collision)
