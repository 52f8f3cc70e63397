"""The node's components, each built with exactly what it uses: the composition root of
``overlay.core.node``. The node builds the shared tables (config, stats, streams, peers,
timers, the outbox, the packet flow) and hands them here; this builds every component over
them. Where two components need each other, the one built later is reached through a lambda,
bound when it is called, so no component is handed another half built.
"""

from __future__ import annotations

import random

from overlay.core.admission import Admission
from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.child_drops import ChildDrops
from overlay.core.clients import LocalClients
from overlay.core.config import NodeConfig
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
from overlay.core.searches import Searches
from overlay.core.stats import NodeStats
from overlay.core.streams import Stream
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
        self.keeping = keeping = Keeping(config, streams, timers, lambda s: self.leaving.forget(s))
        self.refills = refills = Refills(
            config,
            stats,
            streams,
            peers,
            timers,
            out,
            catch_ups,
            flow,
            lambda *a: self.membership.adopt(*a),
            lambda now, stream: self.leaving.prune(now, stream),
            lambda peer, verdict: self.admission.over_catch_up_budget(peer, verdict),
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
            lambda stream, change, parent: self.membership.change(stream, change, parent),
            lambda now, stream, must_beat, uid: self.subscribing.start_own_search(
                now, stream, must_beat, uid
            ),
            lambda: self.searches.fresh_uid(),
            lambda peer, key: self.leaving.leave(peer, key),
            lambda now, stream: self.leaving.linger(now, stream),
            lambda now, stream: self.leaving.prune(now, stream),
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
            lambda now, stream, uid: self.merges.start_look(now, stream, uid),
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
            lambda now, peer, at_once: self.links.forget_peer(now, peer, at_once),
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
            lambda now, route: self.subscribing.end_route(now, route),
            lambda peer, key: self.leaving.settle(peer, key),
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
