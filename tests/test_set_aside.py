"""Numbers a root gave up on and set aside (``Confirming.give_up``, ``resolve``): they are
given to no other publish, go down only once a publish reaches the root, and never stall it;
when the tree turns out to hold them (a report at a heal), nothing is acknowledged that the
root did not store.

N (0.45) roots KEY for its local client 1; H (0.2) and Q (0.3) are its children. H publishes
and then falls silent, so N gives its numbers up. Times are explicit.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodes import KEY, make, meet, sends

from overlay.core.config import NodeConfig
from overlay.core.effects import Effect
from overlay.core.node import Node
from overlay.core.streams import Stream
from overlay.messages import (
    Held,
    PacketKind,
    PublishConfirmed,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
    SubscribeData,
    SubscribeRequest,
    Unsubscribe,
)

DEADLINE = NodeConfig().confirm_deadline


def publish(uid: int, data: bytes, location: float = 0.2) -> PublishData:
    return PublishData(uid, KEY, None, location, 5, data, None, PacketKind.DATA, None)


def pushed(uid: int, number: int, data: bytes, claim: bool = False) -> PublishData:
    return PublishData(uid, KEY, number, 0.4, 5, data, None, PacketKind.DATA, None, True, claim)


def packets_to(effects: Sequence[Effect], peer: bytes) -> list[tuple[int, bytes]]:
    return [
        (m.packet, m.data)
        for to, m in sends(effects)
        if to == peer and isinstance(m, SubscribeData)
    ]


def acks_to(effects: Sequence[Effect], peer: bytes, uid: int) -> list[int]:
    return [
        m.packet
        for to, m in sends(effects)
        if to == peer and isinstance(m, PublishSucceeded) and m.uid == uid
    ]


def root(**config: object) -> Node:
    node = make(**config)
    node.subscribe(0.0, KEY, 1)
    meet(node, b"H", 0.2)
    node.receive(0.1, b"H", SubscribeRequest(300, KEY, 5, 0.2, None))
    meet(node, b"Q", 0.3)
    node.receive(0.2, b"Q", SubscribeRequest(301, KEY, 5, 0.3, None))
    return node


def set_aside_two(node: Node) -> Stream:
    """H's publish 7 is numbered 0 and Q's 20, which Q confirms, 1; H falls silent and N
    gives both up."""
    node.receive(1.0, b"H", publish(7, b"h7"))
    node.receive(1.05, b"Q", publish(20, b"q20", 0.3))
    node.receive(1.1, b"Q", PublishConfirmed(20, KEY, 1))
    node.handle_timer(1.0 + DEADLINE)  # H asked
    node.handle_timer(1.0 + 1.5 * DEADLINE)  # no answer: given up
    stream = node.streams[KEY]
    assert list(stream.root.set_aside) == [0, 1] and not stream.root.pending
    return stream


def test_a_window_of_numbers_set_aside_goes_down_when_the_next_publish_comes() -> None:
    """H's four publishes fill a window of 4 and H falls silent: all four are set aside.
    Q's fresh publish reaches N: they go down first, under their numbers, and Q's after
    them, though the numbers set aside would hold a full window back."""
    node = root(window_packets=4)
    for i in range(4):
        effects = node.receive(1.0, b"H", publish(10 + i, b"h%d" % i))
        assert [m.packet for _, m in sends(effects) if isinstance(m, PublishNumbered)] == [i]
    node.handle_timer(1.0 + DEADLINE)
    node.handle_timer(1.0 + 1.5 * DEADLINE)
    stream = node.streams[KEY]
    assert list(stream.root.set_aside) == [0, 1, 2, 3]
    node.receive(1.0 + 1.6 * DEADLINE, b"H", Unsubscribe(KEY))
    effects = node.receive(3.0, b"Q", publish(20, b"q20", 0.3))
    assert packets_to(effects, b"Q") == [(0, b"h0"), (1, b"h1"), (2, b"h2"), (3, b"h3")]
    assert not stream.root.set_aside and list(stream.root.backlog) == [20]


def test_a_child_that_leaves_with_a_window_of_numbers_does_not_stall_the_stream() -> None:
    """H has a whole window of publishes numbered and unconfirmed, and leaves: N sets them
    aside. The local client's publish is a publisher on N's side: they go down, and it is
    numbered after them."""
    node = root()
    count = NodeConfig().window_packets
    for i in range(count):
        node.receive(1.0, b"H", publish(1000 + i, b"x"))
    node.receive(1.01, b"H", Unsubscribe(KEY))
    stream = node.streams[KEY]
    assert len(stream.root.set_aside) == count
    effects = node.publish(2.0, KEY, 1, 8, b"local")
    assert len(packets_to(effects, b"Q")) == count and not stream.root.set_aside
    assert stream.uids is not None and stream.uids.get(8) is None  # (held back, for now)
    assert list(stream.root.backlog) == [8]


def test_a_retry_after_the_tree_showed_it_held_the_numbers_is_acked_under_its_packet() -> None:
    """0 (H's 7) and 1 (Q's 20) are set aside. At a heal, W (the other side's root, which
    showed packet 0) joins with last seen 0: N's head becomes 0 and a grace begins. Q's
    node retries 20; at the grace's end the numbers set aside are found to be the tree's
    (dropped, their uids forgotten), so 20 is numbered afresh: every number Q is told for
    20 carries Q's packet, and no number carries two."""
    node = root()
    stream = set_aside_two(node)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, 0))
    effects = node.receive(30.1, b"Q", publish(20, b"q20", 0.3))
    effects += node.handle_timer(40.0)  # the grace ends: Q's retry is weighed
    effects += node.publish(40.1, KEY, 1, 8, b"local")
    told = [
        m.packet
        for to, m in sends(effects)
        if to == b"Q" and isinstance(m, PublishNumbered) and m.uid == 20
    ]
    for number in told:
        effects += node.receive(40.3, b"Q", PublishConfirmed(20, KEY, number))
    effects += node.handle_timer(41.0)
    for child in (b"H", b"Q", b"W"):
        effects += node.receive(41.5, child, Held(KEY, 5))
    content = dict(packets_to(effects, b"Q"))
    acks = acks_to(effects, b"Q", 20)
    assert acks and all(content.get(number) == b"q20" for number in acks)
    assert stream.uids is not None and content.get(stream.uids.get(8)) == b"local"


def test_a_claim_after_the_tree_showed_it_held_the_number_is_not_acked_unstored() -> None:
    """As above, W reports the tree held 0, and H's node pushes its claim of 7 as 0: N,
    in its grace, acknowledges nothing it has not stored under that number."""
    node = root()
    stream = set_aside_two(node)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, 0))
    effects = node.receive(30.1, b"H", pushed(7, 0, b"h7", claim=True))
    effects += node.handle_timer(40.0)
    effects += node.handle_timer(41.0)
    effects += node.publish(41.5, KEY, 1, 8, b"local")
    for child in (b"H", b"Q", b"W"):
        effects += node.receive(41.6, child, Held(KEY, 5))
    for number in acks_to(effects, b"H", 7):
        held = stream.window.get(number)
        assert held is not None and held.data == b"h7"


def test_the_trees_packet_pushed_up_under_a_number_set_aside_is_stored_there() -> None:
    """At a heal W, whose side took H's claim as 0 and showed it, reports last seen 0 and
    pushes packet 0 (H's 7): N stores it under 0, as its branch holds it."""
    node = root()
    stream = set_aside_two(node)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, 0))
    node.receive(30.1, b"W", pushed(7, 0, b"h7"))
    held = stream.window.get(0)
    assert held is not None and held.data == b"h7"


def test_a_claim_beyond_the_numbers_set_aside_is_refused() -> None:
    """With 0 and 1 set aside, a claim naming 2 under a uid N never gave: taking it would
    drop 0 and 1, numbers H's and Q's nodes were told, and leave them a hole. It is
    refused (its node publishes afresh), and 0 and 1 stay set aside."""
    node = root()
    stream = set_aside_two(node)
    node.receive(3.0, b"H", pushed(99, 2, b"claim", claim=True))
    assert list(stream.root.set_aside) == [0, 1] and stream.window.get(2) is None


def set_aside_unconfirmed(node: Node, first: int = 0) -> Stream:
    """H's publish 7 is numbered ``first`` and Q's 20 the next; neither is confirmed (Q's
    node may never have heard its number: a cut). H falls silent: both are set aside."""
    node.receive(1.0, b"H", publish(7, b"h7"))
    node.receive(1.05, b"Q", publish(20, b"q20", 0.3))
    node.handle_timer(1.0 + DEADLINE)
    node.handle_timer(1.0 + 1.5 * DEADLINE)
    stream = node.streams[KEY]
    assert list(stream.root.set_aside) == [first, first + 1]
    return stream


def test_a_witness_claim_sends_down_its_own_number_alone() -> None:
    """0 (H's 7) and 1 (Q's 20) are set aside, and no publish reaches N. W, a relay that
    passed 7's confirmation up before a cut, attaches to N and pushes its witness claim of
    7 as 0. That speaks for 0 alone (W may speak for a publisher beyond the cut): 0 goes
    down, and Q's 1, which nothing vouches for and whose number the other side may have
    given to another publish, stays set aside."""
    node = root()
    stream = set_aside_unconfirmed(node)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, None))
    effects = node.receive(30.1, b"W", pushed(7, 0, b"h7", claim=True))
    assert packets_to(effects, b"Q") == [(0, b"h7")]
    assert list(stream.root.set_aside) == [1] and node.stats.claimed_back == 1


def test_a_members_push_sends_down_its_own_number_alone() -> None:
    """Packet 0 went down; 1 (H's 7) and 2 (Q's 20) are set aside. W, holding 7 as 1 (shown
    by another root), pushes it up: 1 goes down, and 2 stays set aside."""
    node = root()
    node.publish(0.5, KEY, 1, 5, b"first")
    stream = set_aside_unconfirmed(node, first=1)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, None))
    effects = node.receive(30.1, b"W", pushed(7, 1, b"h7"))
    assert packets_to(effects, b"Q") == [(1, b"h7")]
    assert list(stream.root.set_aside) == [2]


def test_a_late_confirmation_sends_down_its_own_number_alone() -> None:
    """H, a relay cut off from 7's publisher after the confirmation reached it, passes it
    on late: 0 goes down, Q's 1 stays set aside."""
    node = root()
    stream = set_aside_unconfirmed(node)
    effects = node.receive(30.0, b"H", PublishConfirmed(7, KEY, 0))
    assert packets_to(effects, b"Q") == [(0, b"h7")]
    assert list(stream.root.set_aside) == [1]


def test_a_push_in_a_grace_keeps_the_numbers_set_aside_above_it() -> None:
    """0 (H's 7) and 1 (Q's 20, confirmed) are set aside. At a heal W reports last seen 0
    (a grace) and pushes 7 as 0: the push says nothing of 1, which Q's node was told and
    may hold as a claim, so 1 stays set aside, and the local publish at the grace's end
    sends it down and is numbered 2."""
    node = root()
    stream = set_aside_two(node)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, 0))
    node.receive(30.1, b"W", pushed(7, 0, b"h7"))
    assert list(stream.root.set_aside) == [1]
    for now in (41.0, 45.0):
        node.handle_timer(now)
    node.publish(45.1, KEY, 1, 8, b"local")
    assert stream.uids is not None
    assert [stream.uids.get(uid) for uid in (7, 20, 8)] == [0, 1, 2]


def heal_with_head_0(node: Node) -> None:
    """W (the other side's root, which showed a packet of its own as 0) joins with last
    seen 0: N's head becomes 0 and a grace begins; W brings nothing up, and it ends."""
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, 0))
    for now in (41.0, 45.0):
        node.handle_timer(now)


def test_a_claim_of_a_number_the_tree_held_keeps_those_above_it_set_aside() -> None:
    """0 (H's 7) and 1 (Q's 20, confirmed) are set aside; the tree reported holding 0, and
    nothing of 1. H's node pushes its claim of 7 as 0: 0 is the tree's, so it is dropped,
    but 1 stays set aside, and the local publish that follows sends it down and is 2."""
    node = root()
    stream = set_aside_two(node)
    heal_with_head_0(node)
    node.receive(45.05, b"H", pushed(7, 0, b"h7", claim=True))
    assert list(stream.root.set_aside) == [1]
    node.publish(45.1, KEY, 1, 8, b"local")
    assert stream.uids is not None and [stream.uids.get(u) for u in (20, 8)] == [1, 2]


def test_a_publish_after_the_tree_held_a_number_set_aside_keeps_those_above_it() -> None:
    """As above, with no claim: the local publish finds 0 the tree's (dropped) and 1 set
    aside, sends 1 down, and is numbered 2."""
    node = root()
    stream = set_aside_two(node)
    heal_with_head_0(node)
    node.publish(45.1, KEY, 1, 8, b"local")
    assert stream.uids is not None and [stream.uids.get(u) for u in (20, 8)] == [1, 2]


def test_a_claim_under_another_number_in_a_grace_waits_and_is_never_acked_unstored() -> None:
    """0 (H's 7) and 1 (Q's 20) are set aside. Q's node, told to publish afresh, got 2 for
    20 on the other side. At the heal W reports last seen 2 (a grace), Q's node pushes its
    claim of 20 as 2, and W pushes its packets 0 to 2: every number Q is told for 20
    holds Q's packet."""
    node = root()
    set_aside_two(node)
    meet(node, b"W", 0.4, now=30.0)
    node.receive(30.0, b"W", SubscribeRequest(400, KEY, 5, 0.4, 2))
    effects = node.receive(30.1, b"Q", pushed(20, 2, b"q20", claim=True))
    for number, uid in ((0, 90), (1, 91), (2, 20)):
        effects += node.receive(30.2, b"W", pushed(uid, number, b"q20" if uid == 20 else b"w"))
    for now in (41.0, 45.0):
        effects += node.handle_timer(now)
    stream = node.streams[KEY]
    assert set(acks_to(effects, b"Q", 20)) <= {2}  # (never 1, which holds W's packet)
    held = stream.window.get(2)
    assert held is not None and held.data == b"q20" and not stream.root.set_aside
