"""A root's answer to a child's claim of what it has seen (``Takeover.reported``): how far a
claim moves the root's head, and a merging tree's past taken as holes to fill.

Split from test_takeover.py, whose constants it shares. N (0.45) is the root of KEY for its
local client 1 (``root_with_packets``); U (0.2) is a peer about to join.
"""

from __future__ import annotations

from test_node import make, meet
from test_takeover import GRACE, KEY, OLD, UID, C

from overlay.codec import encode
from overlay.core.effects import Deliver, Send
from overlay.core.events import Missed, Packet, PublishAcked
from overlay.core.node import Node
from overlay.messages import (
    MAX_PACKET,
    Held,
    HeldQuery,
    PacketKind,
    PacketsMissed,
    PublishData,
    SubscribeData,
    SubscribeRequest,
)


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
    assert (stream.high, stream.next_in, stream.recover_until) == (2 + 8, 3, 1.0 + GRACE)
    effects = node.handle_timer(1.0 + GRACE)
    assert Send(b"U", PacketsMissed(KEY, 3, 10)) in effects
    assert Deliver(1, Missed(KEY, 3, 10)) in effects
    effects = node.publish(1.0 + GRACE, KEY, 1, 999, b"next")
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
    fills those numbers here in order, and they go down our other branch too (chaos: a
    side that was cut off never got what the other side published meanwhile)."""
    node = root_with_packets(0)
    meet(node, C, 0.3)
    node.receive(0.0, C, SubscribeRequest(8, KEY, 5, 0.3, None))
    node.receive(0.0, b"U", SubscribeRequest(9, KEY, 5, 0.2, 2))
    stream = node.streams[KEY]
    assert (stream.high, stream.next_in) == (2, 0)
    for n in range(3):
        pushed = PublishData(UID + n, KEY, n, 0.5, 10, OLD[n], None, PacketKind.DATA, None)
        effects = node.receive(0.1, b"U", pushed)
        packet = SubscribeData(KEY, n, OLD[n], None, PacketKind.DATA, None, None, UID + n)
        assert Send(C, packet) in effects
    assert node.stats.refilled == 3 and node.stats.published == 0
    effects = node.receive(0.2, C, Held(KEY, 2))
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
    pushed = PublishData(999, KEY, 1, 0.5, 10, b"same", None, PacketKind.DATA, None)
    node.receive(0.1, b"U", pushed)
    assert stream.next_in == 2 and stream.window.get(1) is not None
    assert node.stats.refilled == 1
