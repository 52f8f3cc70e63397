"""Refills (``overlay.core.refills``): when a relay serves a waiter. Split from
``test_node_refills`` (its scene: N joined late below parent P, with resubscribers B and
others asking through it)."""

from __future__ import annotations

from nodes import MAX_HTL, meet
from refills import KEY, B, P, b_resubscribes, data, joined_late, to

from overlay.messages import FillRequest, ResubscribeRequest, SubscribeSucceeded


def test_a_waiter_is_not_served_by_the_answer_to_a_narrower_ask_made_before_its_own() -> None:
    """B (seen 18) makes N ask P for 19, then C (seen 16) for 17..19. P answers the first
    ask with 19: that serves B, not C, which still lacks 17 and 18 (chaos: a relay told C
    they were missed 25 ms before P's answer to C's ask brought them, and C's subscriber
    never had them)."""
    node = joined_late()
    C = b"C"
    meet(node, C, 0.35)
    assert to(b_resubscribes(node), P) == [FillRequest(KEY, 19, 19)]
    effects = node.receive(1.1, C, ResubscribeRequest(3, KEY, MAX_HTL, 0.35, 0.35, 16))
    assert to(effects, P) == [FillRequest(KEY, 17, 19)]
    effects = node.receive(1.5, P, data(19))
    assert to(effects, B)[:2] == [SubscribeSucceeded(2, KEY, 21), data(19)]
    assert to(effects, C) == [] and C not in node.streams[KEY].children
    node.receive(1.6, P, data(17))
    effects = node.receive(1.6, P, data(18))
    assert to(effects, C) == [
        SubscribeSucceeded(3, KEY, 21),
        data(17),
        data(18),
        data(19),
        data(20),
        data(21),
    ]
