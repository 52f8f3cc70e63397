"""The searches in flight through this node, moved hop to hop: forwarding to the next peer,
backtracking on a failure, and the timeouts of a silent hop (the rules are
``overlay.core.routing``'s; which searches are taken on at all is ``overlay.core.admission``'s;
what a search does where it ends, or when it succeeds, is ``Node``'s).

A resubscribe that reaches a member of an attached tree which may not accept it goes to
that member's parent first (``_up_the_tree``): up the tree it reaches that tree's root,
which takes any resubscribe, so a search that found a tree is not lost to greedy routing
spending its budget inside it.

A search of our own with no peer at all to go to *waits* (it is parked, and goes on at the
next peer's Hello) if this node is part of a network: it had a peer since it started, or its
driver dials some (``NodeConfig.wait_for_peers``). Ended there, it would make us the root of
a tree of one, which numbers our local publishes beside the real tree's root (a restarted
node whose client publishes before its links are up; a node whose peers all died). A node
alone from the start is the whole network, and its search ends at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.liveness import Liveness
from overlay.core.outbox import Outbox
from overlay.core.peers import Peer, PeerTable
from overlay.core.probes import Probes
from overlay.core.recent import RecentIds
from overlay.core.routing import Route
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.core.timers import TimerQueue
from overlay.errors import LocalProtocolError
from overlay.messages import Accepted, DataNotFound, RejectedLoop, RejectOverload

ROUTE_TIMER = "route"


class Searches:
    """The route table: every search in flight through this node, by uid, by key and (for
    relayed ones) by the peer that sent it, and our own searches parked for want of a peer."""

    __slots__ = (
        "_awaiting",
        "_config",
        "_end_route",
        "_liveness",
        "_out",
        "_peers",
        "_probes",
        "_rng",
        "_settle",
        "_stats",
        "_streams",
        "_timers",
        "by_key",
        "by_peer",
        "parked",
        "routes",
        "seen",
    )

    def __init__(
        self,
        config: NodeConfig,
        peers: PeerTable,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        timers: TimerQueue,
        out: Outbox,
        rng: random.Random,
        seen: RecentIds,  # uids seen lately, for loops (shared with ``probes``)
        awaiting: dict[int, bytes],  # our restarts' and looks' uids, until routed (``restarts``)
        liveness: Liveness,
        probes: Probes,
        end_route: Callable[[float, Route], None],  # no peer left: root here or fail (node)
        settle: Callable[[PeerId | None, bytes], None],  # a held Unsubscribe (``leaving``)
    ) -> None:
        self._config = config
        self._peers = peers
        self._stats = stats
        self._streams = streams
        self._timers = timers
        self._out = out
        self._rng = rng
        self.seen = seen
        self._awaiting = awaiting
        self._liveness = liveness
        self._probes = probes
        self._end_route = end_route
        self._settle = settle
        self.routes: dict[int, Route] = {}
        self.by_key: dict[bytes, dict[int, None]] = {}
        self.by_peer: dict[tuple[PeerId, bytes], int] = {}  # relayed, in flight
        self.parked: dict[int, None] = {}  # own searches waiting for a peer, in order parked
        timers.on(ROUTE_TIMER, self.on_timeout)

    def uid_names(self, uid: int) -> bytes | None:
        """The key of the search ``uid`` names here (None: none): one in flight, or a
        restart or look of ours whose subtree is confirming it (its uid is out, its
        search not yet)."""
        route = self.routes.get(uid)
        return route.key if route is not None else self._awaiting.get(uid)

    def fresh_uid(self) -> int:
        """A uid for a search of ours that names nothing here yet."""
        while True:
            uid = self._rng.getrandbits(64)
            if uid not in self.routes and uid not in self._awaiting:
                return uid

    def uids_for(self, key: bytes) -> list[int]:
        """The uids of the searches for ``key`` in flight here, oldest first."""
        return list(self.by_key.get(key, ()))

    def waiting_on(self, peer: PeerId, key: bytes) -> bool:
        """Whether a search for ``key`` waits for ``peer``'s answer."""
        routes = self.routes
        return any(routes[uid].current == peer for uid in self.by_key.get(key, ()))

    def start_route(self, now: float, route: Route) -> None:
        """Route a search. A uid names one search for one key (the tables by key and by
        peer hang on it): a relayed search with a uid in flight is a loop, answered before
        it gets here, and one naming another key is refused (``Subscribing.on_request``); our
        own take fresh uids, or ones only our own subtree was told (``restarts``)."""
        if route.uid in self.routes:
            raise LocalProtocolError(f"search uid {route.uid} is in flight already")
        self.routes[route.uid] = route
        self.by_key.setdefault(route.key, {})[route.uid] = None
        if route.upstream is not None:
            mine = (route.upstream, route.key)
            self.by_peer[mine] = self.by_peer.get(mine, 0) + 1
        self._stats.searches += 1
        probes = self._probes
        if self._untried(route, probes.trail_hop(route)) is None:
            route.trail_htl = 0  # its trail names no hop here: a search like any other
        route.prefer = probes.first_hop(route)
        self.forward(now, route)

    def lost_peer(self, now: float, peer: PeerId) -> None:
        """``peer`` is gone: every search waiting on it backtracks past it, its answer (if
        any) lost with the link."""
        routes = self.routes
        for route in list(routes.values()):
            # Handling one route can finish others (joining a tree completes every search
            # for the key): act only on routes still live and still waiting on ``peer``.
            if routes.get(route.uid) is route and route.current == peer:
                route.lost = True
                self.forward(now, route)

    def forward(self, now: float, route: Route) -> None:
        """Send ``route`` to the closest untried peer, or end it here if there is none."""
        route.current = None
        htl = route.htl
        peer = self._up_the_tree(route) if htl > 0 else None
        if peer is None and route.trail_htl > 0:
            # A look's trail (``probes``) is a way a probe or look walked already, to a
            # closer root: its hops spend a budget of their own, ``trail_htl``, one a hop
            # from ``TRAIL_HTL``. In a darknet such a way can be twice a look's HTL long,
            # and a look that runs out one hop short of the closer root leaves two roots
            # numbering side by side. A relay tries the trail's hop and no other: from each
            # hop of a long trail a search with nearly a whole budget would make one look
            # cost as many searches. The look's origin backtracks as any search does.
            peer = self._preferred(route)
            if peer is not None:
                htl = route.trail_htl
            elif route.upstream is not None:
                htl = 0
        if peer is None and htl > 0:
            peer = self._preferred(route) or self._peers.closest(route.target, route.tried)
        if peer is not None:
            if route.attempt == 0 and route.upstream is not None:
                # The search goes on below us: tell whoever asked to wait for it.
                self._out.send(route.upstream, Accepted(route.uid))
            route.tried.add(peer.id)
            route.current = peer.id
            route.attempt += 1
            route.accepted = False
            route.deadline = now + self._config.accept_timeout
            self._timers.add(route.deadline, (ROUTE_TIMER, route.uid, route.attempt))
            self._stats.forwarded += 1
            self._out.send(peer.id, route.request(htl))
            return
        if not self._peers and route.upstream is None and self._in_a_network():
            if route.key not in self._streams:
                # Nobody here needs it any more (the stream was pruned while it ran):
                # parked, it would wait for ever on a node cut off from every peer.
                self.drop_route(route)
                return
            self.parked[route.uid] = None  # see the module docstring; ``resume_parked``
            return
        self._end_route(now, route)

    def _in_a_network(self) -> bool:
        # ``Liveness.beating`` starts at the first peer's Hello and never stops.
        return self._config.wait_for_peers or self._liveness.beating

    def resume_parked(self, now: float) -> None:
        """A peer is up: our own searches that waited for one go on."""
        parked = list(self.parked)
        self.parked.clear()
        for uid in parked:
            route = self.routes.get(uid)
            if route is not None:
                self.forward(now, route)

    def drop_parked(self, key: bytes) -> None:
        """Drop our own searches for ``key`` that wait for a peer to come up."""
        for uid in [u for u in self.by_key.get(key, ()) if u in self.parked]:
            self.drop_route(self.routes[uid])

    def _up_the_tree(self, route: Route) -> Peer | None:
        """A resubscribe we carry the stream for but may not accept goes to our parent first:
        up an attached tree it reaches that tree's root, which takes any (``_may_accept``),
        where greedy routing from inside another tree may spend its budget without finding
        the one node that would, and a look would miss the root its probe found.
        Not if the search is from our own ancestors (their label): up is back to them."""
        stream = self._streams.get(route.key)
        if (
            route.must_beat is None
            or stream is None
            or stream.state is not State.JOINED
            or stream.restart_origin is not None
            or stream.parent is None
            or stream.parent in route.tried
            or route.uid in stream.restarts_seen
        ):
            return None
        return self._peers.get(stream.parent)

    def _preferred(self, route: Route) -> Peer | None:
        """The peer ``route`` asks to try first (``Route.prefer``), once, if still linked."""
        prefer, route.prefer = route.prefer, None
        return self._untried(route, prefer)

    def _untried(self, route: Route, peer: PeerId | None) -> Peer | None:
        """``peer``, if ``route`` has not tried it and it is still linked."""
        return None if peer is None or peer in route.tried else self._peers.get(peer)

    def drop_route(self, route: Route) -> None:
        del self.routes[route.uid]
        self.parked.pop(route.uid, None)
        uids = self.by_key[route.key]
        del uids[route.uid]
        if not uids:
            del self.by_key[route.key]
        if route.upstream is not None:
            mine = (route.upstream, route.key)
            left = self.by_peer[mine] - 1
            if left:
                self.by_peer[mine] = left
            else:
                del self.by_peer[mine]

    def on_failure(
        self, now: float, peer: PeerId, reply: DataNotFound | RejectOverload | RejectedLoop
    ) -> None:
        route = self.routes.get(reply.uid)
        if route is None or route.current != peer:
            return  # stale: we gave up on that peer already
        if not isinstance(reply, RejectedLoop) and reply.key != route.key:
            self._out.drop(peer, "answered a search with another stream's key")
            return
        if isinstance(reply, DataNotFound):
            if route.trail_htl == 0 or peer != self._probes.trail_hop(route):
                route.htl = min(route.htl, reply.htl)  # (not the trail's budget: ``forward``)
            route.lost |= reply.lost
        self.forward(now, route)
        self._settle(peer, route.key)

    def on_accepted(self, now: float, peer: PeerId, uid: int) -> None:
        route = self.routes.get(uid)
        if route is not None and route.current == peer and not route.accepted:
            route.accepted = True
            route.deadline = now + self._config.request_timeout
            self._timers.add(route.deadline, (ROUTE_TIMER, route.uid, route.attempt))

    def on_timeout(self, now: float, uid: int, attempt: int) -> None:
        route = self.routes.get(uid)
        if (
            route is not None
            and route.attempt == attempt
            and route.current is not None
            and now >= route.deadline
        ):
            self._stats.timeouts += 1
            peer = route.current
            self.forward(now, route)
            self._settle(peer, route.key)
