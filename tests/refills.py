"""The refill scene (``overlay.core.refills``) and its message helpers: N (0.45) joined
late below P (0.49) as the relay of A's resubscribe (last seen 19), then B's resubscribe,
having seen only up to 18, coalesces at N, which never had 19.

Also a root that lacks packet 19 and one rooted by a resubscribe, pushed packets by
PublishData, for the refill and takeover-push tests."""

from __future__ import annotations

from collections.abc import Sequence

from corenet import key_at
from nodes import MAX_HTL, make, meet, sends

from overlay.core.effects import Effect
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    Committed,
    DataNotFound,
    Message,
    PacketKind,
    PastQuery,
    PublishData,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)

KEY = key_at(0.5)
P, A, B = b"P", b"A", b"B"
FILL = make().config.fill_timeout


def data(number: int) -> SubscribeData:
    return SubscribeData(KEY, number, b"p%d" % number, None, PacketKind.DATA, None, None, number)


def joined_late(**config: object) -> Node:
    """N joined as the relay of A's resubscribe (last_seen 19); P sent 20 and 21."""
    node = make(0.45, **config)
    meet(node, P, 0.49)
    meet(node, A, 0.2)
    meet(node, B, 0.3)
    effects = node.receive(0.0, A, ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 19))
    assert sends(effects) == [
        (A, Accepted(1)),
        (P, ResubscribeRequest(1, KEY, MAX_HTL, 0.45, 0.2, 19)),
    ]
    effects = node.receive(0.0, P, SubscribeSucceeded(1, KEY, 19))
    assert sends(effects) == [(A, SubscribeSucceeded(1, KEY, 19))]
    for n in (20, 21):
        assert sends(node.receive(0.0, P, data(n))) == [(A, data(n))]
    stream = node.streams[KEY]
    assert (stream.state, stream.next_in, list(stream.children)) == (State.JOINED, 22, [A])
    return node


def b_resubscribes(node: Node, now: float = 1.0) -> list[Effect]:
    return node.receive(now, B, ResubscribeRequest(2, KEY, MAX_HTL, 0.3, 0.3, 18))


def to(effects: Sequence[Effect], peer: bytes) -> list[Message]:
    return [m for p, m in sends(effects) if p == peer]


def restart(node: Node, now: float) -> list[Effect]:
    """P dies: N restarts, and once A confirms, routes its own resubscribe."""
    [restarted] = to(node.link_down(now, P), A)
    assert isinstance(restarted, SubscribeRestarted)
    return node.receive(now, A, RestartConfirmed(restarted.uid, KEY))


def root_that_lacks_19(local: bool = False, **config: object) -> tuple[Node, float]:
    """N, holding 20 and 21 with child A (and a local client if ``local``), became root
    when P died, and its grace is over: it never had 19. Returns N and a time after that."""
    node = joined_late(**config)
    if local:
        node.subscribe(0.5, KEY, 1)
    effects = restart(node, 1.0)
    while node.streams[KEY].state is not State.ROOT:  # nobody else has the stream
        [(peer, search)] = [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
        effects = node.receive(1.0, peer, DataNotFound(search.uid, KEY, 0))
    settle(node)
    return node, GRACE * 10


ASK_19 = PastQuery(KEY, 19, 19, MAX_WIRE_HTL)


def served(uid: int) -> list[Message]:
    """A resubscriber adopted at N's head 21: its success, catch-up from 19, and mark."""
    return [SubscribeSucceeded(uid, KEY, 21), data(19), data(20), data(21), Committed(KEY, 21)]


C, D = b"C", b"D"


C, W = b"C", b"W"
GRACE = make().config.takeover_grace


def push(number: int) -> PublishData:
    """What C pushes up: packet ``number`` with its original uid (``PacketFlow.push_up``)."""
    return PublishData(
        number, KEY, number, 0.5, MAX_HTL, b"p%d" % number, None, PacketKind.DATA, None, True
    )


def rooted_by_a_resubscribe() -> Node:
    """C's resubscribe, having seen up to 2, makes N root: N continues after 2, holding
    nothing of the tree's past. W then resubscribes having seen only 0."""
    node = make(0.45)
    meet(node, C, 0.3)
    effects = node.receive(0.0, C, ResubscribeRequest(1, KEY, MAX_HTL, 0.3, 0.3, 2))
    assert (C, SubscribeSucceededNewRoot(1, KEY, 2)) in sends(effects)  # (it goes on after 2)
    stream = node.streams[KEY]
    assert (stream.state, stream.next_in, len(stream.window)) == (State.ROOT, 3, 0)
    meet(node, W, 0.4)
    return node


def settle(node: Node) -> list[Effect]:
    """Fire N's timers until its grace is over (the look it makes first included) and no
    child waits; what N did meanwhile."""
    stream, effects = node.streams[KEY], []
    while stream.root.recover_until is not None or stream.fills:
        at = node.next_deadline()
        assert at is not None
        effects += node.handle_timer(at)
    return effects
