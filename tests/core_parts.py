"""The parts a node's components are built from, without a ``Node``: real tables (config,
stats, outbox, timers, peers, streams, the seen-uid table, a ``PacketFlow``) and the
components of the search side wired as the node wires them. The operations still owned by
the node (ending a route, starting a look, forgetting a peer, a child leaving) are fakes
that record their calls in ``calls``, so a test sees exactly what a component asked of
them."""

from __future__ import annotations

import random
from typing import Any

from corenet import key_at

from overlay.core.admission import Admission
from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.child_drops import ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import Send
from overlay.core.keeping import Keeping
from overlay.core.leaving import Leaving
from overlay.core.links import Links
from overlay.core.liveness import Liveness
from overlay.core.membership import Membership
from overlay.core.memory import Memory
from overlay.core.merges import Merges
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.probes import Probes
from overlay.core.publishing import PacketFlow
from overlay.core.recent import RecentIds
from overlay.core.refills import Refills
from overlay.core.restarts import Restarts
from overlay.core.routing import Route
from overlay.core.searches import Searches
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream, new_stream
from overlay.core.subscribing import Subscribing
from overlay.core.timers import TimerQueue
from overlay.messages import Message

KEY = key_at(0.5)
KEY2 = key_at(0.5, tag=2)
KEY3 = key_at(0.5, tag=3)
OWN = 0.45  # the location of the node these parts belong to


class Parts:
    def __init__(self, location: float = OWN, **config: Any) -> None:
        self.config = config = NodeConfig(**config)
        self.rng = random.Random(7)
        self.stats = stats = NodeStats()
        self.out = out = Outbox(stats)
        self.timers = timers = TimerQueue()
        self.peers = peers = PeerTable(location)
        self.streams: dict[bytes, Stream] = {}
        self.seen = RecentIds(config.seen_uid_ttl, config.seen_uid_capacity)
        self.awaiting: dict[int, bytes] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.catch_ups = self._catch_ups()
        memory = Memory(config.remembered_streams, out.append)
        self.flow = PacketFlow(config, self.streams, timers, stats, out, memory, peers)
        self.keeping = Keeping(config, self.streams, timers, lambda s: self.leaving.forget(s))
        self.probes = Probes(
            location,
            config,
            self.rng,
            stats,
            peers,
            self.streams,
            out,
            self.flow,
            self.seen,
            lambda now, stream, uid: self.calls.append(("look", stream.key, uid)),
        )
        self.liveness = Liveness(
            config,
            peers,
            stats,
            timers,
            out,
            self.flow,
            self.catch_ups,
            self.probes,
            lambda now, peer, at_once: self.calls.append(("forget_peer", peer, at_once)),
        )
        self.searches = Searches(
            config,
            peers,
            stats,
            self.streams,
            timers,
            out,
            self.rng,
            self.seen,
            self.awaiting,
            self.liveness,
            self.probes,
            self._end_route,
            lambda peer, key: self.leaving.settle(peer, key),
        )
        self.leaving = Leaving(
            config,
            peers,
            self.streams,
            timers,
            out,
            self.searches,
            self.keeping,
            lambda now, stream, peer: self.calls.append(("child_gone", stream.key, peer)),
        )
        self.admission = Admission(
            config,
            stats,
            self.streams,
            out,
            self.catch_ups,
            self.searches,
            self.keeping,
            self.leaving,
        )

    def _catch_ups(self) -> CatchUpBudget:
        c = self.config
        return CatchUpBudget(
            c.catch_up_rate * c.window_packets,
            c.catch_up_rate * c.window_bytes,
            c.catch_up_burst * c.window_packets,
            c.catch_up_burst * c.window_bytes,
        )

    def _end_route(self, now: float, route: Route) -> None:
        self.calls.append(("end", route.uid))
        self.searches.drop_route(route)

    def meet(self, peer: bytes, location: float, now: float = 0.0) -> None:
        self.peers.add(peer, location, 100, now)

    def stream(
        self, key: bytes = KEY, state: State = State.ROOT, parent: bytes | None = None
    ) -> Stream:
        stream = self.streams[key] = new_stream(key, state, parent, None, self.config)
        return stream

    def sends(self) -> list[tuple[bytes, Message]]:
        """What was sent since the last call, in order (other effects are dropped)."""
        return [(e.peer, e.message) for e in self.out.take() if isinstance(e, Send)]

    def run(self, now: float) -> None:
        self.timers.run(now)


class TreeParts(Parts):
    """``Parts`` plus the tree side, real and wired as the node wires them: refills,
    restarts, merges, membership, subscribing and links. A search that ends here ends in
    ``subscribing`` (still recorded in ``calls``); a root's look, a silent peer forgotten
    and a child leaving (``Parts``) are still fakes."""

    def __init__(self, location: float = OWN, **config: Any) -> None:
        super().__init__(location, **config)
        c, stats, streams, peers, timers, out = (
            self.config,
            self.stats,
            self.streams,
            self.peers,
            self.timers,
            self.out,
        )
        flow = self.flow
        self.child_drops = ChildDrops()
        self.refills = Refills(
            c,
            stats,
            streams,
            peers,
            timers,
            out,
            self.catch_ups,
            flow,
            lambda *a: self.membership.adopt(*a),
            self.leaving.prune,
            self.admission.over_catch_up_budget,
        )
        self.restarts = Restarts(
            location,
            c,
            stats,
            streams,
            peers,
            timers,
            out,
            flow,
            self.refills,
            lambda stream, change, parent: self.membership.change(stream, change, parent),
            lambda now, stream, must_beat, uid: self.subscribing.start_own_search(
                now, stream, must_beat, uid
            ),
            self.searches.fresh_uid,
            self.leaving.leave,
            self.leaving.linger,
            self.leaving.prune,
        )
        self.restarts.awaiting = self.awaiting  # (one table, shared with ``searches``)
        self.merges = Merges(
            location,
            c,
            self.rng,
            stats,
            streams,
            self.searches.routes,
            peers,
            timers,
            flow,
            self.child_drops,
            self.restarts,
            self.refills,
            self.searches.fresh_uid,
            self.probes.closer_stranger,
            self.probes.probe_after_look,
        )
        self.membership = Membership(
            location,
            c,
            stats,
            streams,
            peers,
            out,
            flow,
            self.searches,
            self.restarts,
            self.refills,
            self.admission,
            self.keeping,
        )
        self.subscribing = Subscribing(
            location,
            c,
            stats,
            streams,
            peers,
            out,
            flow,
            self.child_drops,
            self.searches,
            self.restarts,
            self.refills,
            self.admission,
            self.leaving,
            self.merges,
            self.membership,
            self.probes.on_look_relayed,
        )
        self.links = Links(
            location,
            streams,
            peers,
            self.catch_ups,
            self.liveness,
            self.probes,
            self.searches,
            self.restarts,
            self.leaving,
            self.merges,
        )

    def _end_route(self, now: float, route: Route) -> None:
        self.calls.append(("end", route.uid))
        self.subscribing.end_route(now, route)
