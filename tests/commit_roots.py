"""The commit scene (``overlay.core.commits``): N (0.45) root of KEY with local client 1,
subscribed and publishing, and U (0.2) its only child; V (0.3) for a second child; a root
without local clients (``bare_root``); a child's publish as it reaches the root; the marks
a root tells (``notices``) and stamps on its packets (``packets_to``)."""

from __future__ import annotations

from collections.abc import Sequence

from corenet import key_at
from nodes import make, meet, sends

from overlay.core.effects import Effect
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    Committed,
    PacketKind,
    PublishData,
    SubscribeData,
    SubscribeRequest,
)

KEY = key_at(0.5)
U = b"U"
V = b"V"


def root(child: bool = True, **config: object) -> Node:
    node = make(**config)
    node.subscribe(0.0, KEY, 1)
    if child:
        meet(node, U, 0.2)
        node.receive(0.0, U, SubscribeRequest(9, KEY, 5, 0.2, None))
        assert list(node.streams[KEY].children) == [U]
    return node


def adopt(node: Node, child: bytes, location: float, uid: int) -> None:
    meet(node, child, location, boot_id=uid)
    node.receive(0.0, child, SubscribeRequest(uid, KEY, 5, location, None))
    assert child in node.streams[KEY].children


def bare_root(*children: tuple[bytes, float], **config: object) -> Node:
    """N as root of KEY with ``children`` and no local client (the one that made it root
    left). Confirmation (``confirming``, on by default) is off unless ``config`` says: a
    child's own publish would first wait for its node's PublishConfirmed, and these tests
    are about what comes after (``test_confirming`` has it on)."""
    config.setdefault("confirm_publishes", False)
    node = root(child=False, **config)
    for i, (child, location) in enumerate(children):
        adopt(node, child, location, 50 + i)
    node.unsubscribe(0.5, KEY, 1)
    assert node.streams[KEY].state is State.ROOT and not node.streams[KEY].local
    return node


def own_publish(uid: int, data: bytes, hops: int = 1) -> PublishData:
    """A publish as it reaches the root ``hops`` hops from the publisher's node."""
    return PublishData(uid, KEY, None, 0.2, MAX_WIRE_HTL - hops, data, None, PacketKind.DATA, None)


def notices(effects: Sequence[Effect]) -> list[tuple[bytes, int]]:
    """The commit notices sent, as (peer, mark)."""
    return [(peer, m.upto) for peer, m in sends(effects) if isinstance(m, Committed)]


def packets_to(effects: Sequence[Effect], peer: bytes) -> list[tuple[int, int | None]]:
    """The packets sent to ``peer``, as (number, the mark they carry)."""
    return [(m.packet, m.mark) for p, m in sends(effects) if p == peer and type(m) is SubscribeData]
