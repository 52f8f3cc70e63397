"""A root's waiters (``overlay.core.refills``) held through a grace or a look that began
after they asked: the subtree that would bring what they lack may be on its way back, or
the look may join a tree that holds it. Served at their first timeout, they were told the
numbers were missed (chaos seed 690, ``test_sim_chaos_refills``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodes import meet, sends
from refills import FILL, KEY, A, B, C, b_resubscribes, data, push, root_that_lacks_19, to

from overlay.core.config import NodeConfig
from overlay.core.effects import Effect
from overlay.core.node import Node
from overlay.core.refills import MAX_HOLDS
from overlay.core.streams import State, Stream
from overlay.messages import (
    MAX_WIRE_HTL,
    FillRequest,
    Hello,
    Message,
    PacketsMissed,
    PastQuery,
    PublishSucceeded,
    ResubscribeRequest,
    SubscribeData,
    SubscribeSucceeded,
)

Q = b"Q"
REQUEST = NodeConfig().request_timeout
# A's link closes in these tests, yet its subtree comes back seconds later: its loss is
# held for the whole takeover grace, as one found by silence is (``merges``).
LONG = {"lost_child_grace": NodeConfig().takeover_grace}


def served(effects: Sequence[Effect]) -> list[Message]:
    """What B's waiting search is answered with (the look's searches aside)."""
    return [
        m
        for m in to(effects, B)
        if isinstance(m, SubscribeSucceeded | SubscribeData | PacketsMissed)
    ]


def root_losing_a(also_q: bool = False) -> tuple[Node, float]:
    """N, root lacking 19, loses its child A (a grace, then a look); with ``also_q``, N is
    linked to Q (0.35, farther from the key than N), through which its look goes. Returns N
    and the time A's link dropped."""
    node, now = root_that_lacks_19(**LONG)
    if also_q:
        node.link_up(now, Q)
        node.receive(now, Q, Hello(0.35, 100))
    node.link_down(now, A)
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and not stream.children
    assert stream.recover_until is not None and stream.looking is None
    return node, now


def test_a_waiter_is_held_through_a_grace_and_served_what_the_lost_subtree_brings_back() -> None:
    node, now = root_that_lacks_19(**LONG)
    b_resubscribes(node, now)  # asks A for 19
    node.link_down(now + 0.1, A)
    # At the waiter's first timeout the grace runs: A may come back with 19.
    assert served(node.handle_timer(now + FILL / 2)) == []
    back = now + FILL / 2 + 1.0
    meet(node, A, 0.2, boot_id=101, now=back)
    effects = node.receive(back, A, ResubscribeRequest(9, KEY, MAX_WIRE_HTL, 0.2, 0.2, 21))
    assert (A, PastQuery(KEY, 19, 19, MAX_WIRE_HTL)) in sends(effects)
    effects = node.receive(back, A, push(19))
    assert to(effects, A)[-1] == PublishSucceeded(19, KEY, 19)
    assert served(effects) == [SubscribeSucceeded(2, KEY, None), data(19), data(20), data(21)]


def test_a_waiter_is_held_through_a_look_and_served_from_the_tree_it_joins() -> None:
    node, now = root_losing_a(also_q=True)
    stream = node.streams[KEY]
    b_resubscribes(node, now + 9.0)  # its first timeout comes after the grace
    look = None
    while (at := node.next_deadline()) is not None and at <= now + 14.0:
        effects = node.handle_timer(at)
        assert served(effects) == []  # not at the waiter's timeout (now + 14), in the look
        look = look or next(
            (m for p, m in sends(effects) if isinstance(m, ResubscribeRequest)), None
        )
    assert look is not None and stream.looking == look.uid
    # The look found a tree through Q, which holds 19.
    effects = node.receive(now + 14.5, Q, SubscribeSucceeded(look.uid, KEY, 21))
    assert stream.state is State.JOINED and sends(effects)[-1] == (Q, FillRequest(KEY, 19, 19))
    effects = node.receive(now + 14.6, Q, data(19))
    assert served(effects) == [SubscribeSucceeded(2, KEY, 21), data(19), data(20), data(21)]


def first_answer(
    node: Node, now: float, check: Callable[[Stream], bool]
) -> tuple[list[Message], float]:
    """Fire N's timers from ``now`` until B's search is answered, with ``check`` true of
    the stream after each; the answer and when it came."""
    stream = node.streams[KEY]
    answer: list[Message] = []
    at = now
    while not answer:
        at = node.next_deadline() or at
        answer = served(node.handle_timer(at))
        assert check(stream)
    return answer, at


def test_a_waiter_is_held_only_so_long_and_told_what_nobody_brought() -> None:
    node, now = root_losing_a()
    b_resubscribes(node, now)
    answer, at = first_answer(
        node, now, lambda stream: all(fill.held <= MAX_HOLDS for fill in stream.fills or ())
    )
    assert answer[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]
    # Held, but answered while B's search (each hop's ``request_timeout`` from its
    # Accepted) still waits for the answer, with time left for it to go down the path.
    assert FILL / 2 < at - now <= REQUEST / 2


def test_a_search_at_a_root_past_its_grace_is_held_for_a_subtree_a_partition_hid() -> None:
    # Chaos (``test_sim_chaos_refills``): a root cut off with part of its tree,
    # past its grace and its look, told a waiting search that packet 0 was missed, which
    # the other side of the cut held and had acknowledged; the cut healed 4 s later.
    node, now = root_that_lacks_19()
    b_resubscribes(node, now)
    assert served(node.handle_timer(now + FILL / 2)) == []  # held: not told 19 was missed
    # The cut heals: C's subtree, which has seen 21, attaches and is asked for 19.
    later = now + FILL / 2 + 1.0
    node.link_up(later, C)
    node.receive(later, C, Hello(0.35, 100))  # (a root probes on a new link: not asserted)
    effects = node.receive(later, C, ResubscribeRequest(3, KEY, MAX_WIRE_HTL, 0.35, 0.35, 21))
    assert (C, PastQuery(KEY, 19, 19, MAX_WIRE_HTL)) in sends(effects)
    effects = node.receive(later, C, push(19))
    assert served(effects) == [SubscribeSucceeded(2, KEY, 21), data(19), data(20), data(21)]


def test_a_search_at_a_root_past_its_grace_is_held_only_while_it_would_wait() -> None:
    node, now = root_that_lacks_19()
    b_resubscribes(node, now)
    answer, at = first_answer(
        node, now, lambda stream: stream.recover_until is None and stream.state is State.ROOT
    )
    assert answer[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]
    assert FILL / 2 < at - now <= REQUEST / 2
