"""The host contains the core's faults (``overlay.runtime.host``, "Faults"): a bug raised on a
peer's message closes that peer's link, one raised in a timer loses that timer, and a
message that does not encode closes the link it was for. The node goes on serving every
other peer and stream, says so in the log with the traceback, and counts it in ``overlay
stats``. The core's own bugs are stood in for by patching one of its handlers to raise.

Links are test doubles (the host's ``PeerLink``), time is trio's autojump clock.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import trio

from overlay.codec import decode
from overlay.core.config import NodeConfig
from overlay.core.effects import DropPeer, Send
from overlay.core.leaving import Leaving
from overlay.core.node import Node
from overlay.core.searches import Searches
from overlay.messages import Heartbeat, Hello, Message, Unsubscribe
from overlay.runtime.host import NodeHost
from overlay.runtime.refusals import Refusal

KEY = bytes(31) + b"\x02"  # an open stream's key (the last bit clear)
BEAT = 1.0
CONFIG = NodeConfig(heartbeat_interval=BEAT, dead_after=1e6, announce_delay=1e6)
A, B = b"A" * 32, b"B" * 32


class FakeLink:
    """A link that keeps what the host sends on it and how it was closed."""

    def __init__(self, peer: bytes) -> None:
        self.peer = self.initiator = peer
        self.refusal: Refusal | None = None
        self.address: str | None = None
        self.sent: list[Message] = []
        self.reason: str | None = None
        self.queued_bytes = 0

    def send(self, message: Message) -> None:
        self.sent.append(message)

    def send_encoded(self, body: bytes) -> None:
        self.sent.append(decode(body))

    def flush(self) -> None:
        pass

    def close(self, reason: str) -> None:
        self.reason = self.reason or reason


def linked_host() -> tuple[NodeHost, FakeLink, FakeLink]:
    """A node at 0.45 with peers A (0.3) and B (0.49), both of which said Hello (the node
    vouches for both, so they may sit where they say)."""
    host = NodeHost(b"N" * 32, 0.45, config=CONFIG, rng=random.Random(3), vouched={A, B})
    a, b = FakeLink(A), FakeLink(B)
    for link, location in ((a, 0.3), (b, 0.49)):
        assert host.link_opened(link)
        host.received(link, Hello(location, 1))
    return host, a, b


def beats(link: FakeLink) -> int:
    return sum(isinstance(m, Heartbeat) for m in link.sent)


def raising(calls: list[str], before: Any = None) -> Any:
    """A stand-in for a core handler with a bug: it does ``before`` (if any), then raises."""

    def handler(*args: Any) -> None:
        calls.append("called")
        if before is not None:
            before()
        raise RuntimeError("a bug in the core")

    return handler


async def test_a_timer_that_raises_is_lost_alone_and_the_node_goes_on(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A local subscribe routes a search to B, which never answers; the route timer that
    fires after ``accept_timeout`` raises. The node does not die: the timer is lost, the
    fault is logged with its traceback and counted, and heartbeats go on to both peers."""
    calls: list[str] = []
    # (on the class: a component registers its bound timer handler as the node is built)
    monkeypatch.setattr(Searches, "on_timeout", raising(calls))
    host, a, b = linked_host()
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        host.subscribe(host.add_client(Inbox()), KEY)
        await trio.sleep(CONFIG.accept_timeout + 3 * BEAT)
        assert calls == ["called"]  # once: not again and again
        assert host.timer_faults == 1
        assert "internal error in a timer" in caplog.text
        assert "RuntimeError: a bug in the core" in caplog.text  # the traceback
        seen = beats(a), beats(b)
        await trio.sleep(2 * BEAT)
        assert beats(a) > seen[0] and beats(b) > seen[1]
        assert host.describe()["stats"]["timer_faults"] == 1
        nursery.cancel_scope.cancel()


async def test_a_message_the_core_raises_on_closes_only_its_link(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A's Unsubscribe meets a bug after the core queued a Heartbeat for B: A's link closes
    as a fault, what the core did before it raised still goes out, and B's link stays."""
    host, a, b = linked_host()
    core: Node = host.core
    calls: list[str] = []
    monkeypatch.setattr(
        Leaving, "on_unsubscribe", raising(calls, lambda: core.out.send(B, Heartbeat(99)))
    )
    host.received(a, Unsubscribe(KEY))
    assert calls == ["called"]
    assert a.reason is not None and "internal error" in a.reason
    assert b.reason is None and b.sent[-1] == Heartbeat(99)
    assert host.receive_faults == 1
    assert "internal error in Unsubscribe from" in caplog.text
    host.link_closed(a, a.reason)  # (the link's task reports it)
    assert A not in host.links and [p.id for p in core.peers] == [B]


async def test_a_message_that_does_not_encode_closes_the_link_it_was_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A message our code built with a bad field (here a location of 2.0) cannot go out:
    the link it was for closes (a lost frame would be a silent gap), and the effects after
    it are still carried out."""
    host, a, b = linked_host()
    host._apply([Send(A, Hello(2.0, 1)), Send(B, Heartbeat(7))])
    assert a.reason is not None and "did not encode" in a.reason
    assert b.sent[-1] == Heartbeat(7) and b.reason is None
    assert host.encode_faults == 1 and "EncodeError" in caplog.text


async def test_a_peer_the_core_refuses_is_a_warning_and_a_silent_one_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    host, a, b = linked_host()
    host._apply([DropPeer(A, "forged signature"), DropPeer(B, "silent", fault=False)])
    assert a.refusal is Refusal.PEER_DROPPED and b.refusal is None
    host.link_closed(a, "forged signature")
    host.link_closed(b, "silent")
    levels = {r.getMessage().split("closed: ", 1)[1]: r.levelno for r in caplog.records}
    assert levels == {
        "forged signature; refused for the next 5 s": logging.WARNING,  # A is vouched for
        "silent": logging.INFO,
    }
    assert host.refusals.counts == {"peer_dropped": 1}
    assert host.cooldowns.peer_remaining(A) > 0 and host.cooldowns.peer_remaining(B) == 0


class Inbox:
    def deliver(self, event: object) -> None:
        pass
