"""Outbox: a node's effects for one call, in the order the protocol produced them."""

from __future__ import annotations

from overlay.core.effects import Deliver, DropPeer, Send, SetTimer
from overlay.core.events import SubscribeFailed
from overlay.core.outbox import Outbox
from overlay.core.stats import NodeStats
from overlay.messages import Unsubscribe


def test_effects_come_out_in_order_and_the_outbox_starts_empty() -> None:
    stats = NodeStats()
    out = Outbox(stats)
    out.send(b"p", Unsubscribe(b"k"))
    out.deliver(3, SubscribeFailed(b"k", "no route"))
    out.drop(b"q", "lied", fault=False)
    out.append(SetTimer(5.0))
    assert out.take() == [
        Send(b"p", Unsubscribe(b"k")),
        Deliver(3, SubscribeFailed(b"k", "no route")),
        DropPeer(b"q", "lied", False),
        SetTimer(5.0),
    ]
    assert out.take() == []


def test_each_message_sent_is_counted() -> None:
    stats = NodeStats()
    out = Outbox(stats)
    out.send(b"p", Unsubscribe(b"k"))
    out.send(b"p", Unsubscribe(b"k"))
    out.drop(b"p", "bad")
    assert stats.sent == 2
