"""The node's components, each built with exactly what it uses: the composition root of
``overlay.core.node``. The node builds the shared tables (config, stats, streams, peers,
timers, the outbox, the packet flow) and hands them here; this builds every component over
them. Where two components need each other, the one built later is reached through a method
of this object that looks it up when called, so no component is handed another half built.
Those are passed as bound methods rather than closures: one 64-byte object each, where a
closure costs its function, tuple and cell (about 250 bytes), in every simulated node.
"""

from __future__ import annotations

import random

from overlay.core.admission import Admission
from overlay.core.catch_up_budget import CatchUpBudget, Verdict
from overlay.core.child_drops import ChildDrops
from overlay.core.clients import LocalClients
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.keeping import Keeping
from overlay.core.leaving import Leaving
from overlay.core.links import Links
from overlay.core.liveness import Liveness
from overlay.core.membership import Membership
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
from overlay.core.streams import Change, Stream
from overlay.core.subscribing import Subscribing
from overlay.core.timers import TimerQueue


class Components:
    """Every component of one node, wired (see the module notes). Each attribute is one
    component; the node reads them and dispatches to them."""

    __slots__ = (
        "admission",
        "clients",
        "keeping",
        "leaving",
        "links",
        "liveness",
        "membership",
        "merges",
        "probes",
        "refills",
        "restarts",
        "searches",
        "subscribing",
    )

    def __init__(
        self,
        location: float,
        config: NodeConfig,
        rng: random.Random,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        peers: PeerTable,
        timers: TimerQueue,
        out: Outbox,
        flow: PacketFlow,
        catch_ups: CatchUpBudget,
        child_drops: ChildDrops,  # (``merges``, ``subscribing``: a root's lost children)
    ) -> None:
        seen = RecentIds(config.seen_uid_ttl, config.seen_uid_capacity)  # (searches, probes)
        self.keeping = keeping = Keeping(config, streams, timers, self._forget)
        self.refills = refills = Refills(
            config,
            stats,
            streams,
            peers,
            timers,
            out,
            catch_ups,
            flow,
            self._adopt,
            self._prune,
            self._over_catch_up_budget,
        )
        self.restarts = restarts = Restarts(
            location,
            config,
            stats,
            streams,
            peers,
            timers,
            out,
            flow,
            refills,
            self._change,
            self._start_own_search,
            self._fresh_uid,
            self._leave,
            self._linger,
            self._prune,
        )
        self.probes = probes = Probes(
            location,
            config,
            rng,
            stats,
            peers,
            streams,
            out,
            flow,
            seen,
            self._start_look,
        )
        self.liveness = liveness = Liveness(
            config,
            peers,
            stats,
            timers,
            out,
            flow,
            catch_ups,
            probes,
            self._forget_peer,
        )
        self.searches = searches = Searches(
            config,
            peers,
            stats,
            streams,
            timers,
            out,
            rng,
            seen,
            restarts.awaiting,
            liveness,
            probes,
            self._end_route,
            self._settle,
        )
        self.leaving = leaving = Leaving(
            config, peers, streams, timers, out, searches, keeping, restarts.child_gone
        )
        self.admission = admission = Admission(
            config, stats, streams, out, catch_ups, searches, keeping, leaving
        )
        self.merges = merges = Merges(
            location,
            config,
            rng,
            stats,
            streams,
            searches.routes,
            peers,
            timers,
            flow,
            child_drops,
            restarts,
            refills,
            searches.fresh_uid,
            probes.closer_stranger,
            probes.probe_after_look,
        )
        self.membership = membership = Membership(
            location,
            config,
            stats,
            streams,
            peers,
            out,
            flow,
            searches,
            restarts,
            refills,
            admission,
            keeping,
        )
        self.subscribing = subscribing = Subscribing(
            location,
            config,
            stats,
            streams,
            peers,
            out,
            flow,
            child_drops,
            searches,
            restarts,
            refills,
            admission,
            leaving,
            merges,
            membership,
            probes.on_look_relayed,
        )
        self.links = Links(
            location,
            streams,
            peers,
            catch_ups,
            liveness,
            probes,
            searches,
            restarts,
            leaving,
            merges,
        )
        self.clients = LocalClients(
            location,
            config,
            streams,
            out,
            flow,
            membership.new_stream,
            subscribing.start_own_search,
            leaving.prune,
            keeping.unkeep,
            admission.has_room,
        )

    # --- ties to components built after the one that calls them (module notes) ----------

    def _forget(self, stream: Stream) -> None:
        self.leaving.forget(stream)

    def _adopt(
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
        self.membership.adopt(now, stream, peer, uid, new_root, last_seen, must_beat, wait)

    def _prune(self, now: float, stream: Stream) -> None:
        self.leaving.prune(now, stream)

    def _over_catch_up_budget(self, peer: PeerId, verdict: Verdict) -> None:
        self.admission.over_catch_up_budget(peer, verdict)

    def _change(self, stream: Stream, change: Change, parent: PeerId | None) -> None:
        self.membership.change(stream, change, parent)

    def _start_own_search(
        self, now: float, stream: Stream, must_beat: float | None, uid: int | None
    ) -> None:
        self.subscribing.start_own_search(now, stream, must_beat, uid)

    def _fresh_uid(self) -> int:
        return self.searches.fresh_uid()

    def _leave(self, peer: PeerId, key: bytes) -> None:
        self.leaving.leave(peer, key)

    def _linger(self, now: float, stream: Stream) -> None:
        self.leaving.linger(now, stream)

    def _start_look(self, now: float, stream: Stream, trail: int | None) -> None:
        self.merges.start_look(now, stream, trail)

    def _forget_peer(self, now: float, peer: PeerId, at_once: bool) -> None:
        self.links.forget_peer(now, peer, at_once)

    def _end_route(self, now: float, route: Route) -> None:
        self.subscribing.end_route(now, route)

    def _settle(self, peer: PeerId | None, key: bytes) -> None:
        self.leaving.settle(peer, key)
