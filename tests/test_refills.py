"""Refills (``overlay.core.refills``) built alone, without a Node: a relay that never had
the numbers a child needs asks its parent, holds the child, and serves it once they are in
or its wait runs out. A Node's refills are ``test_refills_relays`` (a relay asks its parent),
``test_refills_roots`` (a root asks its subtree), ``test_refills_grace`` (a root in its
takeover grace) and ``test_refills_holds`` (waiters held while nobody can answer)."""

from __future__ import annotations

import pytest

from overlay.core.catch_up_budget import CatchUpBudget, Verdict
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId, Send
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import FILL_TIMER, Refills
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream, new_stream
from overlay.core.timers import TimerQueue
from overlay.messages import (
    Accepted,
    FillRequest,
    PacketKind,
    PacketsMissed,
    SubscribeData,
)

KEY = bytes(32)
P, A, B = b"P", b"A", b"B"


def data(number: int) -> SubscribeData:
    return SubscribeData(KEY, number, b"p%d" % number, None, PacketKind.DATA, None, None, number)


class Parts:
    """Refills with real tables, and the node operations it calls recorded."""

    def __init__(self) -> None:
        self.config = NodeConfig()
        self.stats = NodeStats()
        self.streams: dict[bytes, Stream] = {}
        self.peers = PeerTable()
        self.timers = TimerQueue()
        self.out = Outbox(self.stats)
        config = self.config
        catch_ups = CatchUpBudget(
            config.catch_up_rate * config.window_packets,
            config.catch_up_rate * config.window_bytes,
            config.catch_up_burst * config.window_packets,
            config.catch_up_burst * config.window_bytes,
        )
        memory = Memory(config.remembered_streams, self.out.append, None)
        out = self.out
        self.flow = PacketFlow(config, self.streams, self.timers, self.stats, out, memory)
        self.adopted: list[tuple[PeerId, int, int | None, bool]] = []
        self.pruned: list[bytes] = []
        self.over: list[tuple[PeerId, Verdict]] = []
        self.refills = Refills(
            config,
            self.stats,
            self.streams,
            self.peers,
            self.timers,
            self.out,
            catch_ups,
            self.flow,
            self.adopt,
            lambda now, stream: self.pruned.append(stream.key),
            lambda peer, verdict: self.over.append((peer, verdict)),
        )
        for name, location in ((P, 0.49), (A, 0.2), (B, 0.3)):
            self.peers.add(name, location, 1, 0.0)

    def adopt(
        self,
        now: float,
        stream: Stream,
        peer: PeerId,
        uid: int,
        new_root: bool,
        last_seen: int | None,
        must_beat: float | None,
        wait: bool,
    ) -> None:
        self.adopted.append((peer, uid, last_seen, wait))

    def sent(self) -> list[tuple[PeerId, object]]:
        return [(e.peer, e.message) for e in self.out.take() if isinstance(e, Send)]


def joined_late(parts: Parts) -> Stream:
    """A relay below P that joined at 20 (a resubscriber had seen 19), holding 20 and 21."""
    stream = new_stream(KEY, State.JOINED, P, None, parts.config)
    stream.children[A] = None
    stream.next_in = stream.contiguous_from = 20
    for n in (20, 21):
        stream.window.add(data(n))
    stream.next_in = 22
    parts.streams[KEY] = stream
    return stream


def test_a_search_needing_numbers_never_had_waits_and_the_parent_is_asked() -> None:
    parts = Parts()
    stream = joined_late(parts)
    assert parts.refills.serve_later(1.0, stream, B, 19, None, 2, 0.3)
    assert parts.sent() == [(B, Accepted(2)), (P, FillRequest(KEY, 19, 19))]
    assert parts.refills.waiting and stream.fills is not None and len(stream.fills) == 1
    assert parts.timers.earliest() == 1.0 + parts.config.fill_timeout
    # The same search again (a duplicate) waits once.
    assert parts.refills.serve_later(1.5, stream, B, 19, None, 2, 0.3)
    assert parts.sent() == [] and len(stream.fills) == 1


def test_nothing_waits_for_numbers_the_node_holds() -> None:
    parts = Parts()
    stream = joined_late(parts)
    assert not parts.refills.serve_later(1.0, stream, B, 20, None, 2, 0.3)
    assert parts.sent() == [] and not parts.refills.waiting and stream.fills is None


def test_the_waiter_is_adopted_once_the_numbers_are_in() -> None:
    parts = Parts()
    stream = joined_late(parts)
    parts.refills.serve_later(1.0, stream, B, 19, None, 2, 0.3)
    parts.out.take()
    parts.refills.check_fills(1.2, stream)
    assert parts.adopted == []  # 19 is still lacking
    stream.window.add(data(19))
    parts.refills.served(1.3, KEY)
    assert parts.adopted == [(B, 2, 18, False)]  # caught up from its own last_seen
    assert stream.fills is None and not parts.refills.waiting
    assert parts.pruned == [KEY]


def test_a_wait_that_runs_out_is_served_with_what_the_node_has() -> None:
    parts = Parts()
    stream = joined_late(parts)
    parts.refills.serve_later(1.0, stream, B, 19, None, 2, 0.3)
    parts.timers.run(1.0 + parts.config.fill_timeout)
    assert parts.adopted == [(B, 2, 18, False)] and not parts.refills.waiting


def test_a_restarting_relay_holds_its_waiter_past_the_timeout() -> None:
    parts = Parts()
    stream = joined_late(parts)
    parts.refills.serve_later(1.0, stream, B, 19, None, 2, 0.3)
    stream.state, stream.parent = State.RESTARTING, None
    parts.timers.run(1.0 + parts.config.fill_timeout)
    assert parts.adopted == [] and parts.refills.waiting  # its clock starts again
    assert parts.timers.earliest() == 1.0 + 2 * parts.config.fill_timeout


def test_a_child_fill_request_is_replayed_holes_reported() -> None:
    parts = Parts()
    stream = joined_late(parts)
    stream.window.add(data(19))
    parts.refills.on_fill_request(2.0, A, FillRequest(KEY, 19, 21))
    assert parts.sent() == [(A, data(19)), (A, data(20)), (A, data(21))]
    stream.window.mark_missing(18, 18)
    parts.refills.on_fill_request(2.0, A, FillRequest(KEY, 18, 19))
    assert parts.sent() == [(A, PacketsMissed(KEY, 18, 18)), (A, data(19))]


def test_a_fill_request_from_a_stranger_is_ignored() -> None:
    parts = Parts()
    joined_late(parts)
    parts.refills.on_fill_request(2.0, B, FillRequest(KEY, 20, 21))
    assert parts.sent() == [] and parts.stats.ignored == 1


def test_the_fill_timer_kind_is_registered_by_the_component() -> None:
    parts = Parts()
    with pytest.raises(ValueError):
        parts.timers.on(FILL_TIMER, lambda now, uid, attempt: None)
