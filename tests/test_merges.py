"""Merges (``overlay.core.merges``) built alone, without a Node: a root that lost a child
holds numbering for a grace and looks for another tree when it ends; a look labels its
subtree and routes once confirmed (``restarts``); one that found nothing ends the labels and
the grace, or looks again. The node's behaviour in whole trees is ``test_node_merges``."""

from __future__ import annotations

import random

import pytest

from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.child_drops import ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId, Send
from overlay.core.memory import Memory
from overlay.core.merges import RELOOKS, Merges
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import Refills
from overlay.core.restarts import RESTART_TIMER, Restarts
from overlay.core.routing import Route
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream, new_stream
from overlay.core.takeover import RECOVER_TIMER
from overlay.core.timers import TimerQueue
from overlay.messages import RestartConfirmed, RestartEnded, SubscribeRestarted

KEY = bytes(32)  # location 0.0
HERE = 0.1
C1, C2 = b"C1", b"C2"


class Parts:
    """Merges with real tables, a real Restarts and Refills; the searches it would start,
    and the uids it draws, faked."""

    def __init__(self, stranger: bool = False) -> None:
        self.config = NodeConfig()
        self.stats = NodeStats()
        self.streams: dict[bytes, Stream] = {}
        self.routes: dict[int, Route] = {}
        self.peers = PeerTable()
        self.timers = TimerQueue()
        self.out = Outbox(self.stats)
        self.child_drops = ChildDrops()
        self.searches: list[tuple[float, int | None]] = []
        self.uids = iter(range(100, 200))
        config, out = self.config, self.out
        memory = Memory(config.remembered_streams, out.append, None)
        self.flow = PacketFlow(config, self.streams, self.timers, self.stats, out, memory)
        refills = Refills(
            config,
            self.stats,
            self.streams,
            self.peers,
            self.timers,
            out,
            CatchUpBudget(1, 1, 1, 1),
            self.flow,
            lambda *args: None,
            lambda now, stream: None,
            lambda peer, verdict: None,
        )
        self.restarts = Restarts(
            HERE,
            config,
            self.stats,
            self.streams,
            self.peers,
            self.timers,
            out,
            self.flow,
            refills,
            lambda stream, change, parent: None,
            lambda now, stream, must_beat, uid: self.searches.append((now, uid)),
            self.fresh_uid,
            lambda peer, key: None,
            lambda now, stream: None,
            lambda now, stream: None,
        )
        self.probed: list[tuple[float, bytes]] = []  # (``Probes.probe_after_look``)
        self.merges = Merges(
            HERE,
            config,
            random.Random(1),
            self.stats,
            self.streams,
            self.routes,
            self.peers,
            self.timers,
            self.flow,
            self.child_drops,
            self.restarts,
            refills,
            self.fresh_uid,
            lambda stream: stranger,
            lambda now, stream: self.probed.append((now, stream.key)),
        )
        for name, location in ((C1, 0.2), (C2, 0.3)):
            self.peers.add(name, location, 1, 0.0)

    def fresh_uid(self) -> int:
        return next(self.uids)

    def root(self, *children: PeerId) -> Stream:
        stream = new_stream(KEY, State.ROOT, None, None, self.config)
        stream.children.update(dict.fromkeys(children))
        self.streams[KEY] = stream
        return stream

    def sent(self) -> list[tuple[PeerId, object]]:
        return [(e.peer, e.message) for e in self.out.take() if isinstance(e, Send)]


def test_a_root_that_loses_a_child_holds_numbering_and_looks_when_the_grace_ends() -> None:
    parts = Parts()
    stream = parts.root(C1, C2)
    parts.merges.lost_child(1.0, stream, C2, at_once=True)
    config = parts.config
    grace_end = 1.0 + min(config.takeover_grace, config.lost_child_grace)
    assert stream.root.look_due and stream.root.recover_until == grace_end
    assert parts.flow.takeover.recovering == {stream.root.recover_token: KEY}
    assert parts.child_drops.too_many(1.0, C2) is None  # one hold is no fault
    del stream.children[C2]
    parts.timers.run(grace_end)  # (``RECOVER_TIMER``: the grace would end, a look starts)
    assert (parts.stats.looks, stream.root.looking, stream.root.look_due) == (1, 100, False)
    assert parts.sent() == [(C1, SubscribeRestarted(100, KEY, HERE))]
    assert parts.restarts.awaiting == {100: KEY} and parts.searches == []
    assert stream.root.recover_until == grace_end + config.request_timeout  # held while it runs
    assert parts.flow.takeover.recovering == {stream.root.recover_token: KEY}
    parts.restarts.on_restart_confirmed(grace_end, C1, RestartConfirmed(100, KEY))
    assert parts.searches == [(grace_end, 100)]


def test_a_look_that_found_nothing_ends_the_labels_and_the_grace() -> None:
    parts = Parts()
    stream = parts.root(C1)
    parts.flow.reserve(stream)
    parts.merges.start_look(1.0, stream)
    parts.restarts.on_restart_confirmed(1.0, C1, RestartConfirmed(100, KEY))
    parts.out.take()
    parts.merges.looked(1.5, stream)
    assert stream.root.looking is None and stream.restart_uid is None
    assert parts.sent() == [(C1, RestartEnded(100, KEY))]
    assert (
        stream.root.recover_until is None and parts.flow.takeover.recovering == {}
    )  # numbering goes on
    assert parts.probed == [(1.5, KEY)]  # and a probe goes out: a farther root may be beside


def test_a_look_lost_beyond_a_broken_link_is_repeated_after_a_pause() -> None:
    parts = Parts()
    stream = parts.root(C1)
    parts.flow.reserve(stream)
    parts.merges.start_look(1.0, stream)
    parts.merges.looked(1.5, stream, lost=True)
    assert stream.root.look_due and stream.root.relooks == 1
    assert parts.probed == []  # not while another look is due
    assert stream.root.recover_until is not None
    assert 1.5 <= stream.root.recover_until <= 1.5 + parts.config.heartbeat_interval
    parts.timers.run(stream.root.recover_until)
    assert parts.stats.looks == 2 and stream.root.looking == 101  # a fresh uid


def test_looks_after_a_closer_stranger_stop_after_relooks() -> None:
    parts = Parts(stranger=True)
    stream = parts.root()
    parts.flow.reserve(stream)
    stream.root.relooks = RELOOKS
    parts.merges.start_look(1.0, stream)
    parts.merges.looked(1.5, stream)
    assert not stream.root.look_due and stream.root.recover_until is None


def test_a_new_tree_looks_at_once_unless_it_is_the_whole_network() -> None:
    parts = Parts()
    stream = parts.root()
    route = Route(7, KEY, 0.0, None, 10, HERE, True, None, None)
    parts.merges.first_look(1.0, stream, route)
    assert parts.stats.looks == 1 and parts.searches == [(1.0, 100)]  # no child: at once
    alone = Parts()
    alone.peers.remove(C1)
    alone.peers.remove(C2)
    alone.merges.first_look(1.0, alone.root(), route)
    assert alone.stats.looks == 0 and alone.searches == []


def test_a_merge_ends_the_root_s_look_and_grace() -> None:
    parts = Parts()
    stream = parts.root(C1)
    parts.flow.reserve(stream)
    parts.merges.start_look(1.0, stream)
    parts.merges.merged(stream)
    assert parts.stats.merges == 1 and parts.probed == []
    assert stream.root.looking is None and stream.root.recover_until is None


def test_the_recover_timer_kind_is_registered_by_merges() -> None:
    parts = Parts()
    for kind in (RECOVER_TIMER, RESTART_TIMER):
        with pytest.raises(ValueError):
            parts.timers.on(kind, lambda now, uid, attempt: None)
