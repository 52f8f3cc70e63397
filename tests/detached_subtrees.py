"""A member of a detached subtree (labelled by its root's restart search) whose relay finds a
tree beyond the label: the scene shared by the restart tests of test_node_failures and
test_early_packets."""

from __future__ import annotations

from nodes import KEY, make, meet, one_send, own_uid, relayed, sends

from overlay.core.effects import Send
from overlay.core.node import Node
from overlay.messages import (
    PacketKind,
    RejectedLoop,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
)

DATA = PacketKind.DATA


def child_of_b() -> Node:
    """N (0.45) joined under parent B (0.49), with child D (0.2) and peers W (0.3), X (0.35)."""
    node = make(0.45)
    meet(node, b"B", 0.49)
    meet(node, b"D", 0.2)
    meet(node, b"W", 0.3)
    meet(node, b"X", 0.35)
    uid = own_uid(node.subscribe(0.0, KEY, 1))
    node.receive(0.0, b"B", SubscribeSucceeded(uid, KEY, None))
    node.receive(0.0, b"D", SubscribeRequest(600, KEY, 5, 0.2, None))
    assert node.streams[KEY].parent == b"B" and list(node.streams[KEY].children) == [b"D"]
    return node


def found_beyond_a_labelled_member(
    reply: SubscribeSucceeded, confirmed: bool = True, held: int = 0
) -> tuple[Node, list[Send]]:
    """N, labelled by a detached subtree whose origin is at 0.2 (``confirmed``: N's child D
    has confirmed the label), routes on W's resubscribe that must beat 0.3 (closer to the
    key at 0.5: it may not hang below N's subtree). B refuses it, and X answers with
    ``reply``. N holds packets ``0..held - 1``."""
    node = child_of_b()
    for number in range(held):
        node.receive(0.5, b"B", SubscribeData(KEY, number, b"p%d" % number, None, DATA, None))
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.2))
    if confirmed:
        node.receive(1.05, b"D", RestartConfirmed(70, KEY))
    effects = node.receive(1.1, b"W", ResubscribeRequest(81, KEY, 5, 0.3, 0.3, None))
    assert relayed(effects, b"W", 81)[0] == b"B"
    (hop, forwarded) = one_send(node.receive(1.2, b"B", RejectedLoop(81)))
    assert hop == b"X" and isinstance(forwarded, ResubscribeRequest)
    return node, sends(node.receive(1.3, b"X", reply))
