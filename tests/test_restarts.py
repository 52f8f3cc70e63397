"""Restarts (``overlay.core.restarts``) built alone, without a Node: the origin of a restart
labels its subtree and routes its resubscribe once every child confirmed (or the timeout
passed); members relay labels and confirm; the acceptance rules (races 1-3). The node's
behaviour in whole trees is ``test_node_failures`` and ``test_node_merges``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId, Send
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import Refills
from overlay.core.restarts import RESTART_TIMER, Restarts
from overlay.core.stats import NodeStats
from overlay.core.streams import Change, State, Stream, new_stream, next_state
from overlay.core.timers import TimerQueue
from overlay.messages import (
    RestartConfirmed,
    RestartEnded,
    SubscribeRestarted,
)

KEY = bytes(32)  # location 0.0
HERE = 0.1
P, C1, C2, X = b"P", b"C1", b"C2", b"X"


@dataclass
class Calls:
    searches: list[tuple[float, float | None, int | None]] = field(default_factory=list)
    left: list[tuple[PeerId, bytes]] = field(default_factory=list)
    lingered: list[bytes] = field(default_factory=list)
    pruned: list[bytes] = field(default_factory=list)


class Parts:
    """Restarts with real tables and a real Refills; the node's operations recorded."""

    def __init__(self) -> None:
        self.config = NodeConfig()
        self.stats = NodeStats()
        self.streams: dict[bytes, Stream] = {}
        self.peers = PeerTable()
        self.timers = TimerQueue()
        self.out = Outbox(self.stats)
        self.calls = Calls()
        self.uids = iter(range(100, 200))
        config, out = self.config, self.out
        memory = Memory(config.remembered_streams, out.append, None)
        flow = PacketFlow(config, self.streams, self.timers, self.stats, out, memory)
        refills = Refills(
            config,
            self.stats,
            self.streams,
            self.peers,
            self.timers,
            out,
            CatchUpBudget(1, 1, 1, 1),
            flow,
            lambda *args: None,
            lambda now, stream: None,
            lambda peer, verdict: None,
        )
        calls = self.calls
        self.restarts = Restarts(
            HERE,
            config,
            self.stats,
            self.streams,
            self.peers,
            self.timers,
            out,
            flow,
            refills,
            self.change,
            lambda now, stream, must_beat, uid: calls.searches.append((now, must_beat, uid)),
            lambda: next(self.uids),
            lambda peer, key: calls.left.append((peer, key)),
            lambda now, stream: calls.lingered.append(stream.key),
            lambda now, stream: calls.pruned.append(stream.key),
        )
        for name, location in ((P, 0.05), (C1, 0.2), (C2, 0.3), (X, 0.4)):
            self.peers.add(name, location, 1, 0.0)

    def change(self, stream: Stream, change: Change, parent: PeerId | None) -> None:
        state = next_state(stream.state, change)
        assert state is not None
        stream.state, stream.parent = state, parent

    def member(self, *children: PeerId) -> Stream:
        stream = new_stream(KEY, State.JOINED, P, None, self.config)
        stream.children.update(dict.fromkeys(children))
        self.streams[KEY] = stream
        return stream

    def sent(self) -> list[tuple[PeerId, object]]:
        return [(e.peer, e.message) for e in self.out.take() if isinstance(e, Send)]


def test_the_origin_labels_its_subtree_and_waits_for_every_confirmation() -> None:
    parts = Parts()
    stream = parts.member(C1, C2)
    parts.restarts.restart(1.0, stream, Change.PARENT_LOST)
    assert (stream.state, stream.parent, stream.restart_uid) == (State.RESTARTING, None, 100)
    assert parts.sent() == [
        (C1, SubscribeRestarted(100, KEY, HERE)),
        (C2, SubscribeRestarted(100, KEY, HERE)),
    ]
    assert parts.restarts.awaiting == {100: KEY} and parts.stats.restarts == 1
    assert parts.timers.earliest() == 1.0 + parts.config.confirm_timeout
    parts.restarts.on_restart_confirmed(1.1, C1, RestartConfirmed(100, KEY, 7))
    assert parts.calls.searches == []
    parts.restarts.on_restart_confirmed(1.2, C2, RestartConfirmed(100, KEY, None))
    assert parts.calls.searches == [(1.2, HERE, 100)]  # must beat: the origin
    assert parts.restarts.awaiting == {} and stream.subtree_high == 7


def test_a_childless_origin_routes_at_once() -> None:
    parts = Parts()
    stream = parts.member()
    parts.restarts.restart(1.0, stream, Change.PARENT_LOST)
    assert parts.calls.searches == [(1.0, HERE, 100)] and parts.restarts.awaiting == {}


def test_a_slow_member_does_not_hold_the_restart_past_the_timeout() -> None:
    parts = Parts()
    stream = parts.member(C1)
    parts.restarts.restart(1.0, stream, Change.PARENT_LOST)
    parts.timers.run(1.0 + parts.config.confirm_timeout)
    assert parts.calls.searches == [(1.0 + parts.config.confirm_timeout, HERE, 100)]
    assert parts.stats.confirm_timeouts == 1 and parts.restarts.awaiting == {}


def test_a_member_relays_a_label_and_confirms_once_its_subtree_has() -> None:
    parts = Parts()
    stream = parts.member(C1, C2)
    stream.high = 5
    parts.restarts.on_restarted(1.0, P, SubscribeRestarted(7, KEY, 0.02))
    assert parts.sent() == [
        (C1, SubscribeRestarted(7, KEY, 0.02)),
        (C2, SubscribeRestarted(7, KEY, 0.02)),
    ]
    assert (stream.restart_uid, stream.restart_origin) == (7, 0.02)
    parts.restarts.on_restart_confirmed(1.1, C1, RestartConfirmed(7, KEY, 8))
    assert parts.sent() == []
    parts.restarts.child_gone(1.2, stream, C2, died=True)  # the last one to confirm dies
    assert parts.sent() == [(P, RestartConfirmed(7, KEY, 8))]  # what C1's subtree holds
    assert parts.calls.lingered == [KEY] and parts.calls.pruned == []
    assert parts.restarts.awaiting == {}  # a member awaits nothing: it is not the origin


def test_a_label_ending_is_relayed_down() -> None:
    parts = Parts()
    stream = parts.member(C1)
    stream.restart_uid, stream.restart_origin = 7, 0.02
    parts.restarts.on_restart_ended(1.0, P, 7, KEY)
    assert parts.sent() == [(C1, RestartEnded(7, KEY))]


def test_a_restart_from_a_stranger_is_confirmed_and_left() -> None:
    parts = Parts()
    parts.member()
    parts.restarts.on_restarted(1.0, X, SubscribeRestarted(7, KEY, 0.3))
    assert parts.sent() == [(X, RestartConfirmed(7, KEY))]
    assert parts.calls.left == [(X, KEY)]


def test_the_restart_timer_kind_is_registered_by_the_component() -> None:
    parts = Parts()
    with pytest.raises(ValueError):
        parts.timers.on(RESTART_TIMER, lambda now, uid, attempt: None)
