"""Building and wiring sans-IO Nodes for tests: one ``Node`` fed messages by hand from made-up
peers, reading what it sends, and small trees of real cores wired by ``tests/corenet.py``.

The key sits at location 0.5; node locations are chosen around it so that who is closest is
obvious from the numbers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from corenet import CoreNet, key_at

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect, Send, SetTimer
from overlay.core.events import Subscribed
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    Accepted,
    Hello,
    Message,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeSucceeded,
)

KEY = key_at(0.5)
KEY2 = key_at(0.5, tag=2)
MAX_HTL = NodeConfig().max_htl
ACCEPT = NodeConfig().accept_timeout  # how long a hop may take to send Accepted
TIMEOUT = NodeConfig().request_timeout  # how long a search below a hop may take after it


# Single-node tests push the friend-of-a-friend announcement far into the future: they are
# about subscribing, and a Neighbours broadcast in the middle would only blur the effects.
NO_ANNOUNCE = 1e6
# Likewise heartbeats (liveness has its own tests): these tests read every timer and effect.
NO_BEATS = {"heartbeat_interval": 1e7, "dead_after": 2e7}


def make(location: float = 0.45, **config: object) -> Node:
    config.setdefault("announce_delay", NO_ANNOUNCE)
    for name, value in NO_BEATS.items():
        config.setdefault(name, value)
    return Node(b"N", location, random.Random(7), NodeConfig(**config), boot_id=1)  # type: ignore[arg-type]


def meet(node: Node, peer: bytes, location: float, boot_id: int = 100, now: float = 0.0) -> None:
    node.link_up(now, peer)
    assert proto(node.receive(now, peer, Hello(location, boot_id))) == []


def proto(effects: Sequence[Effect]) -> list[Effect]:
    """``effects`` without SetTimer: for tests about what is sent and delivered."""
    return [e for e in effects if not isinstance(e, SetTimer)]


def sends(effects: Sequence[Effect]) -> list[tuple[bytes, Message]]:
    return [(e.peer, e.message) for e in effects if isinstance(e, Send)]


def one_send(effects: Sequence[Effect]) -> tuple[bytes, Message]:
    out = sends(effects)
    assert len(out) == 1, out
    return out[0]


def look_sent(effects: Sequence[Effect], peer: bytes, own: float) -> ResubscribeRequest:
    """The look a new root routes before numbering anything (``merges``): one resubscribe,
    to ``peer``, that only a node closer than ``own`` may take, with the wider budget."""
    [(to, look)] = sends(effects)
    assert to == peer and isinstance(look, ResubscribeRequest)
    assert (look.must_beat, look.best_loc, look.htl) == (own, own, NodeConfig().check_htl)
    return look


def relayed(effects: Sequence[Effect], upstream: bytes, uid: int) -> tuple[bytes, Message]:
    """The request a node forwarded on taking search ``uid`` on: it tells ``upstream``
    Accepted first, then sends exactly one request on."""
    out = sends(effects)
    assert len(out) == 2 and out[0] == (upstream, Accepted(uid)), out
    return out[1]


def own_uid(effects: Sequence[Effect]) -> int:
    """The uid of the one search request among ``effects``."""
    _, message = one_send(effects)
    assert isinstance(message, SubscribeRequest | ResubscribeRequest)
    return message.uid


def joined_node() -> Node:
    """N (0.45) in KEY's tree: parent P (0.49), child C (0.2), spare peer Q (0.4), client 1."""
    node = make()
    meet(node, b"P", 0.49, boot_id=11)
    meet(node, b"Q", 0.4, boot_id=12)
    meet(node, b"C", 0.2, boot_id=13)
    effects = node.subscribe(0.0, KEY, 1)
    assert sends(effects)[0][0] == b"P"
    uid = own_uid(effects)
    effects = node.receive(0.0, b"P", SubscribeSucceeded(uid, KEY, None))
    assert effects == [Deliver(1, Subscribed(KEY, root=False))]
    effects = node.receive(0.0, b"C", SubscribeRequest(500, KEY, MAX_HTL, 0.2, None))
    assert sends(effects) == [(b"C", SubscribeSucceeded(500, KEY, None))]
    stream = node.streams[KEY]
    assert (stream.state, stream.parent, list(stream.children)) == (State.JOINED, b"P", [b"C"])
    return node


def relay() -> Node:
    """N (0.3) with upstream U (0.49) and peers P1 (0.45), P2 (0.4), P3 (0.1), in key order."""
    node = make(0.3)
    meet(node, b"U", 0.49)
    meet(node, b"P1", 0.45)
    meet(node, b"P2", 0.4)
    meet(node, b"P3", 0.1)
    return node


def root_with_children(*children: bytes) -> Node:
    node = make()
    assert node.subscribe(0.0, KEY, 1) == [Deliver(1, Subscribed(KEY, root=True))]
    for i, child in enumerate(children):
        meet(node, child, 0.2, boot_id=200 + i)
        effects = node.receive(0.0, child, SubscribeRequest(300 + i, KEY, 5, 0.2, None))
        assert sends(effects) == [(child, SubscribeSucceeded(300 + i, KEY, None))]
    return node


def chain() -> CoreNet:
    """A (0.1) - B (0.3) - C (0.48): C is the closest to the key."""
    net = CoreNet(seed=1)
    net.add(b"A", 0.1)
    net.add(b"B", 0.3)
    net.add(b"C", 0.48)
    net.connect(b"A", b"B")
    net.connect(b"B", b"C")
    return net
