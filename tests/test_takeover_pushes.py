"""Pushes (``Takeover.push_one``, ``resend_pushes``): a packet a node pushes up is sent again
until the parent it went to answers, and a root takes a resend once, in its place, also
after its grace. The scenes are ``refills``': N, rooted by C's resubscribe, takes the
tree's past pushed up from below."""

from __future__ import annotations

import dataclasses
import itertools

from nodes import MAX_HTL, make, meet, sends
from refills import KEY, C, W, data, push, rooted_by_a_resubscribe, settle, to

from overlay.core.effects import Effect
from overlay.core.node import Node
from overlay.messages import (
    HeldQuery,
    PacketKind,
    PacketsMissed,
    PublishData,
    PublishError,
    PublishRejected,
    PublishSucceeded,
    ResubscribeRequest,
    SubscribeData,
    SubscribeSucceeded,
)

PARENT, CHILD = b"P", b"A"


def relay_that_pushed() -> Node:
    """N relays A's resubscribe under P, holds packets 20 and 21 (uids 20 and 21), and has
    pushed both up to P (``push_up``, as after a restart). Heartbeats every 2 s."""
    node = make(heartbeat_interval=2.0, dead_after=1e6)
    meet(node, PARENT, 0.49)
    meet(node, CHILD, 0.2)
    node.receive(0.0, CHILD, ResubscribeRequest(1, KEY, MAX_HTL, 0.2, 0.2, 19))
    node.receive(0.0, PARENT, SubscribeSucceeded(1, KEY, 19))
    for n in (20, 21):
        node.receive(
            0.0, PARENT, SubscribeData(KEY, n, b"p%d" % n, None, PacketKind.DATA, None, None, n)
        )
    node.flow.pushing.push_up(node.streams[KEY], 19)
    assert pushed_to_parent(node._flush(0.0)) == [20, 21]
    return node


def pushed_to_parent(effects: list[Effect]) -> list[int | None]:
    return [
        m.packet
        for p, m in sends(effects)
        if p == PARENT and isinstance(m, PublishData) and m.pushed
    ]


def resent_over(node: Node, seconds: float) -> list[tuple[float, int | None]]:
    """Run ``node``'s heartbeat rounds for ``seconds``: each push sent again, and when."""
    out = []
    for step in range(1, int(seconds / 2.0) + 1):
        now = 2.0 * step
        out += [(now, n) for n in pushed_to_parent(node.handle_timer(now))]
    return out


def test_an_unanswered_push_is_sent_again_up_to_publish_attempts() -> None:
    # A relay does not store what it passes up: a push lost with a link beyond our parent
    # was lost for good, and with it, where only a push carried it, a claim.
    node = relay_that_pushed()
    timeout, attempts = node.config.publish_timeout, node.config.publish_attempts
    resent = resent_over(node, 10 * timeout)
    assert [n for _, n in resent] == [20, 21] * (attempts - 1)
    times = sorted({at for at, _ in resent})
    assert times[0] >= timeout and all(b - a >= timeout for a, b in itertools.pairwise(times))
    assert node.stats.pushes_resent == 2 * (attempts - 1) and not node.flow.pushing.pushes


def test_an_answered_push_is_not_sent_again_but_a_busy_one_is() -> None:
    node = relay_that_pushed()
    node.receive(1.0, PARENT, PublishSucceeded(20, KEY, 20))
    node.receive(1.0, PARENT, PublishRejected(21, KEY, int(PublishError.BUSY)))  # still owed
    resent = resent_over(node, 10 * node.config.publish_timeout)
    assert [n for _, n in resent] == [21] * (node.config.publish_attempts - 1)


def test_a_push_is_not_sent_again_once_the_relay_restarts() -> None:
    # Its parent is gone: the push, if lost, is pushed anew when it attaches (``push_up``).
    node = relay_that_pushed()
    node.link_down(1.0, PARENT)
    assert resent_over(node, 10 * node.config.publish_timeout) == []
    assert not node.flow.pushing.pushes


def test_only_the_parent_a_push_went_to_answers_it_or_gets_it_again() -> None:
    node = relay_that_pushed()
    node.receive(1.0, CHILD, PublishSucceeded(20, KEY, 20))  # not from where 20 went
    assert set(node.flow.pushing.pushes) == {20, 21}
    # N hangs from another parent now (REPARENTED keeps it JOINED): that parent was told
    # what N lacks when N attached (``push_up``); the old pushes are not sent there.
    meet(node, b"Q", 0.48)
    node.streams[KEY].parent = b"Q"
    assert resent_over(node, 10 * node.config.publish_timeout) == []
    assert not node.flow.pushing.pushes


def test_a_push_sent_again_after_the_grace_still_fills_the_open_tail() -> None:
    # W reported 6: N's tail 3..6 is open when the grace ends, nobody having pushed. C's
    # push of 4 comes only then (a resend: ``resend_pushes`` waits ``publish_timeout``,
    # as long as the grace). It is the tree's packet 4, not a publisher's guess: 3 is
    # missed, 4 taken and sent down, and the tail stays open above it.
    node = rooted_by_a_resubscribe()
    node.receive(0.1, W, ResubscribeRequest(2, KEY, MAX_HTL, 0.4, 0.4, 6))
    settle(node)
    stream = node.streams[KEY]
    assert (stream.next_in, stream.high, stream.root.recover_until) == (3, 6, None)
    effects = node.receive(50.0, C, push(4))
    assert to(effects, C)[-1:] == [PublishSucceeded(4, KEY, 4)]
    # 3 missed is as far as N's members may show until its children hold 4 (``showing``):
    # packet 4 carries that mark.
    assert to(effects, W) == [
        PacketsMissed(KEY, 3, 3),
        dataclasses.replace(data(4), mark=3),
        HeldQuery(KEY, 4),
    ]
    assert (stream.next_in, stream.high) == (5, 6)
