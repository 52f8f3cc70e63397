"""The composition root (``overlay.core.assembly``) built alone, without a ``Node``: the
components it builds share the node's tables, and the calls that close a cycle between two
of them (a search ending, a restart's search, a child adopted) reach the right one."""

from __future__ import annotations

import random

from core_parts import KEY, OWN

from overlay.core.assembly import Components
from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.child_drops import ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import Send
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.stats import NodeStats
from overlay.core.streams import Change, State, Stream
from overlay.core.timers import TimerQueue
from overlay.messages import ResubscribeRequest, SubscribeRequest


def build() -> tuple[Components, dict[bytes, Stream], PeerTable, Outbox]:
    config, stats = NodeConfig(), NodeStats()
    streams: dict[bytes, Stream] = {}
    peers, timers, out = PeerTable(), TimerQueue(), Outbox(stats)
    flow = PacketFlow(config, streams, timers, stats, out, Memory(8, out.append), peers)
    budget = CatchUpBudget(1e6, 1e9, 1e6, 1e9)
    parts = Components(
        OWN,
        config,
        random.Random(3),
        stats,
        streams,
        peers,
        timers,
        out,
        flow,
        budget,
        ChildDrops(),
    )
    return parts, streams, peers, out


def test_a_local_subscribe_with_no_peer_ends_in_subscribing_and_makes_a_root() -> None:
    parts, streams, _, _ = build()
    parts.clients.subscribe(1.0, KEY, 1)
    assert streams[KEY].state is State.ROOT  # searches -> subscribing -> membership
    assert parts.searches.routes == {}


def test_a_restart_routes_its_resubscribe_through_subscribing() -> None:
    parts, streams, peers, out = build()
    parts.clients.subscribe(1.0, KEY, 1)
    out.take()
    peers.add(b"C", 0.49, 100, 2.0)
    parts.restarts.restart(2.0, streams[KEY], Change.CLOSER_NODE)
    sent = [e.message for e in out.take() if isinstance(e, Send)]
    assert [type(m) for m in sent] == [ResubscribeRequest]  # restarts -> subscribing
    assert streams[KEY].state is State.RESTARTING
    assert streams[KEY].join_uid == sent[0].uid


def test_a_request_for_a_carried_stream_is_adopted_in_the_shared_stream_table() -> None:
    parts, streams, peers, out = build()
    parts.clients.subscribe(1.0, KEY, 1)
    out.take()
    peers.add(b"U", 0.2, 100, 2.0)
    parts.subscribing.on_request(2.0, b"U", SubscribeRequest(9, KEY, 10, 0.2, None, None))
    assert list(streams[KEY].children) == [b"U"]  # subscribing -> membership
