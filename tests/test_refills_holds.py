"""Refills (``overlay.core.refills``) held while nobody can answer: a waiter is not told
the numbers it lacks were missed while whoever may bring them is away — its relay detached
or below a restarting ancestor, or, at a root, the lost subtree that may come back in the
takeover grace, the tree a look may join, or a subtree a partition hid. Each hold is
bounded (``MAX_HOLDS``), and a held search is answered while it still waits."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodes import meet, sends
from refills import (
    FILL,
    KEY,
    A,
    B,
    C,
    P,
    b_resubscribes,
    data,
    joined_late,
    push,
    restart,
    root_that_lacks_19,
    to,
)

from overlay.core.config import NodeConfig
from overlay.core.effects import Effect
from overlay.core.node import Node
from overlay.core.refills import MAX_HOLDS
from overlay.core.streams import State, Stream
from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    FillRequest,
    Hello,
    Message,
    PacketsMissed,
    PastQuery,
    PublishSucceeded,
    RestartEnded,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRestarted,
    SubscribeSucceeded,
)

# --- a relay's waiter, while the relay or an ancestor is out of the tree ---------------------


Q = b"Q"


def detached_with_a_waiter() -> tuple[Node, ResubscribeRequest]:
    """A waits on N for 19 (asked at 1.0); P dies at 2.0 and N's resubscribe goes to Q."""
    node = joined_late()
    meet(node, Q, 0.48)
    node.receive(1.0, A, FillRequest(KEY, 19, 19))
    [search] = to(restart(node, 2.0), Q)
    assert isinstance(search, ResubscribeRequest)
    return node, search


def test_a_waiter_of_a_relay_that_reattaches_waits_anew_for_the_new_parent() -> None:
    # N's parent dies while A waits for 19; N is back in the tree 6 s later, under Q, and
    # asks Q. The 10 s A had ran mostly while nobody could answer: measured from the new
    # ask, Q's answer is in time; otherwise A is told of packets missed that Q brings.
    node, search = detached_with_a_waiter()
    effects = node.receive(7.0, Q, SubscribeSucceeded(search.uid, KEY, 21))
    assert (Q, FillRequest(KEY, 19, 19)) in sends(effects)
    assert to(node.handle_timer(1.0 + FILL), A) == []
    assert to(node.receive(1.0 + FILL + 1.0, Q, data(19)), A) == [data(19)]


def test_a_detached_relay_keeps_its_waiter_past_the_timeout_until_it_can_ask() -> None:
    # N restarts and is detached longer than fill_timeout: telling A that 19 was missed
    # then would lose what the tree may well hold (the restarting relay's own subtree,
    # say).
    node, search = detached_with_a_waiter()
    node.receive(2.1, Q, Accepted(search.uid))  # Q's answer takes long (request_timeout)
    assert to(node.handle_timer(1.0 + FILL), A) == []
    assert node.streams[KEY].fills
    later = 1.0 + 1.5 * FILL
    effects = node.receive(later, Q, SubscribeSucceeded(search.uid, KEY, 21))
    assert (Q, FillRequest(KEY, 19, 19)) in sends(effects)
    assert to(node.handle_timer(later + FILL - 0.1), A) == []
    assert to(node.receive(later + 1.0, Q, data(19)), A) == [data(19)]


def below_a_restart() -> Node:
    """B waits on N for 19 (asked of P at 1.0); at 1.2 P's own parent dies, and P's restart
    (origin 0.49, closer to the key than B's must-beat) labels N's subtree."""
    node = joined_late()
    b_resubscribes(node)
    assert sends(node.receive(1.2, P, SubscribeRestarted(77, KEY, 0.49))) == [
        (A, SubscribeRestarted(77, KEY, 0.49))
    ]
    return node


def test_a_waiter_below_a_restarting_ancestor_waits_until_the_origin_is_back() -> None:
    # P holds N's ask and asks again once it is back in the tree, which may hold 19: the
    # restart's origin, once root, may fetch it from a branch that holds it, so telling B
    # it was missed before then would be wrong.
    node = below_a_restart()
    assert to(node.handle_timer(1.0 + FILL), B) == []
    assert node.streams[KEY].fills
    back = 1.0 + FILL + 0.5
    assert sends(node.receive(back, P, RestartEnded(77, KEY))) == [(A, RestartEnded(77, KEY))]
    # The wait starts again when the label ends, without a second ask.
    assert to(node.handle_timer(back + FILL - 0.1), B) == []
    effects = node.receive(back + 1.0, P, data(19))
    assert to(effects, B) == [SubscribeSucceeded(2, KEY, 21), data(19), data(20), data(21)]
    assert B in node.streams[KEY].children and not node.refills.waiting


def test_a_label_that_never_ends_holds_a_waiter_only_so_long() -> None:
    node = below_a_restart()
    for timeout in range(1, MAX_HOLDS + 1):
        assert to(node.handle_timer(1.0 + timeout * FILL), B) == []
    effects = node.handle_timer(1.0 + (MAX_HOLDS + 1) * FILL)
    assert to(effects, B)[:2] == [
        SubscribeSucceeded(2, KEY, 21, restart=77, origin=0.49),
        PacketsMissed(KEY, 19, 19),
    ]


# --- a root's waiter, while the subtree that may hold what it lacks is away ----------------


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
    assert stream.root.recover_until is not None and stream.root.looking is None
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
    assert look is not None and stream.root.looking == look.uid
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
    # A root cut off with part of its tree, past its grace and its look, must not tell a
    # waiting search that a packet was missed: the other side of the cut may hold it and
    # have acknowledged it, and the cut may heal soon after (``test_sim_chaos_refills``).
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
        node, now, lambda stream: stream.root.recover_until is None and stream.state is State.ROOT
    )
    assert answer[:2] == [SubscribeSucceeded(2, KEY, 21), PacketsMissed(KEY, 19, 19)]
    assert FILL / 2 < at - now <= REQUEST / 2
