"""Moving one search from hop to hop: forwarding to the next peer, backtracking on a
failure, and the timeouts of a silent hop (the rules are ``overlay.core.routing``'s; what
a search does where it ends, or when it succeeds, is ``Node``'s).

A resubscribe that reaches a member of an attached tree which may not accept it goes to
that member's parent first (``_up_the_tree``): up the tree it reaches that tree's root,
which takes any resubscribe, so a search that found a tree is not lost to greedy routing
spending its budget inside it.

A search of our own with no peer at all to go to *waits* (it is parked, and goes on at the
next peer's Hello) if this node is part of a network: it had a peer since it started, or its
driver dials some (``NodeConfig.wait_for_peers``). Ended there, it would make us the root of
a tree of one, which numbers our local publishes beside the real tree's root (chaos: a
restarted node whose client published before its links were up; a node whose peers all
died). A node alone from the start is the whole network, and its search ends at once.

Searches in flight are state, so they are bounded: per key (``max_searches_per_key``) and,
within that, per peer that sent them (``PEER_SHARE``), beyond which the request is answered
RejectOverload.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Protocol

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.peers import Peer, PeerTable
from overlay.core.routing import Route
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.core.timers import TimerQueue
from overlay.errors import LocalProtocolError
from overlay.messages import Accepted, DataNotFound, Message, RejectedLoop, RejectOverload

ROUTE_TIMER = "route"
# One peer may hold at most this fraction of a key's search allowance (1/4 of
# ``max_searches_per_key``): a peer sending fresh uids in a loop is refused beyond it, while
# the other peers' searches for that key still find room. A root's death sends one
# resubscribe per orphaned subtree, so an honest peer relays a handful per key, not dozens.
PEER_SHARE = 4


class _NodeParts(Protocol):
    """What these methods use of the ``Node`` they are mixed into (for the type checker)."""

    config: NodeConfig
    peers: PeerTable
    stats: NodeStats
    streams: dict[bytes, Stream]
    routes: dict[int, Route]
    _parked: dict[int, None]  # in the order they parked
    _trails: OrderedDict[int, PeerId]  # a look's first hop (``probes``)
    _beating: bool
    _routes_by_key: dict[bytes, dict[int, None]]
    _routes_by_peer: dict[tuple[PeerId, bytes], int]
    _awaiting: dict[int, bytes]  # our restarts' and looks' uids, until routed (``restarts``)
    rng: random.Random
    _timers: TimerQueue
    out: Outbox

    def _send(self: _NodeParts, peer: PeerId, message: Message) -> None: ...
    def _forward(self: _NodeParts, now: float, route: Route) -> None: ...
    def _up_the_tree(self: _NodeParts, route: Route) -> Peer | None: ...
    def _preferred(self: _NodeParts, route: Route) -> Peer | None: ...
    def _first_hop(self: _NodeParts, route: Route) -> PeerId | None: ...
    def _closest_stranger(self: _NodeParts, stream: Stream) -> PeerId | None: ...
    def _in_a_network(self: _NodeParts) -> bool: ...
    def _end_route(self: _NodeParts, now: float, route: Route) -> None: ...
    def _drop_route(self: _NodeParts, route: Route) -> None: ...
    def _settle(self: _NodeParts, peer: PeerId, key: bytes) -> None: ...


class Hops:
    """Mixed into ``Node``; each method's ``self`` is the node (``_NodeParts``)."""

    def _too_many_searches(self: _NodeParts, peer: PeerId, key: bytes) -> bool:
        """Whether routing one more search for ``key`` from ``peer`` would pass the key's
        allowance (``max_searches_per_key``) or the peer's share of it (``PEER_SHARE``)."""
        allowance = self.config.max_searches_per_key
        if len(self._routes_by_key.get(key, ())) >= allowance:
            return True
        return self._routes_by_peer.get((peer, key), 0) >= max(1, allowance // PEER_SHARE)

    def _uid_names(self: _NodeParts, uid: int) -> bytes | None:
        """The key of the search ``uid`` names here (None: none): one in flight, or a
        restart or look of ours whose subtree is confirming it (its uid is out, its
        search not yet)."""
        route = self.routes.get(uid)
        return route.key if route is not None else self._awaiting.get(uid)

    def _fresh_uid(self: _NodeParts) -> int:
        """A uid for a search of ours that names nothing here yet."""
        while True:
            uid = self.rng.getrandbits(64)
            if uid not in self.routes and uid not in self._awaiting:
                return uid

    def _start_route(self: _NodeParts, now: float, route: Route) -> None:
        """Route a search. A uid names one search for one key (the tables by key and by
        peer hang on it): a relayed search with a uid in flight is a loop, answered before
        it gets here, and one naming another key is refused (``Node._on_request``); our
        own take fresh uids, or ones only our own subtree was told (``restarts``)."""
        if route.uid in self.routes:
            raise LocalProtocolError(f"search uid {route.uid} is in flight already")
        self.routes[route.uid] = route
        self._routes_by_key.setdefault(route.key, {})[route.uid] = None
        if route.upstream is not None:
            mine = (route.upstream, route.key)
            self._routes_by_peer[mine] = self._routes_by_peer.get(mine, 0) + 1
        self.stats.searches += 1
        route.prefer = self._first_hop(route)
        self._forward(now, route)

    def _first_hop(self: _NodeParts, route: Route) -> PeerId | None:
        """Where a look goes before greedy order (``probes``): the peer a probe's trail
        names for its uid, or, for a root's own look without one, the closest peer closer
        than the root that is not its child (greedy order would go into its own tree)."""
        trail = self._trails.get(route.uid)
        if trail is not None or route.upstream is not None:
            return trail
        stream = self.streams.get(route.key)
        if stream is None or stream.state is not State.ROOT:
            return None
        return self._closest_stranger(stream)

    def _forward(self: _NodeParts, now: float, route: Route) -> None:
        """Send ``route`` to the closest untried peer, or end it here if there is none."""
        route.current = None
        if route.htl > 0:
            peer = (
                self._up_the_tree(route)
                or self._preferred(route)
                or self.peers.closest(route.target, route.tried)
            )
            if peer is not None:
                if route.attempt == 0 and route.upstream is not None:
                    # The search goes on below us: tell whoever asked to wait for it.
                    self._send(route.upstream, Accepted(route.uid))
                route.tried.add(peer.id)
                route.current = peer.id
                route.attempt += 1
                route.accepted = False
                route.deadline = now + self.config.accept_timeout
                self._timers.add(route.deadline, (ROUTE_TIMER, route.uid, route.attempt))
                self.stats.forwarded += 1
                self._send(peer.id, route.request())
                return
        if not self.peers and route.upstream is None and self._in_a_network():
            if route.key not in self.streams:
                # Nobody here needs it any more (the stream was pruned while it ran):
                # parked, it would wait for ever on a node cut off from every peer.
                self._drop_route(route)
                return
            self._parked[route.uid] = None  # see the module docstring; ``_resume_parked``
            return
        self._end_route(now, route)

    def _in_a_network(self: _NodeParts) -> bool:
        # ``_beating`` starts at the first peer's Hello and never stops.
        return self.config.wait_for_peers or self._beating

    def _resume_parked(self: _NodeParts, now: float) -> None:
        """A peer is up: our own searches that waited for one go on."""
        parked = list(self._parked)
        self._parked.clear()
        for uid in parked:
            route = self.routes.get(uid)
            if route is not None:
                self._forward(now, route)

    def _up_the_tree(self: _NodeParts, route: Route) -> Peer | None:
        """A resubscribe we carry the stream for but may not accept goes to our parent first:
        up an attached tree it reaches that tree's root, which takes any (``_may_accept``),
        where greedy routing from inside another tree may spend its budget without finding
        the one node that would (chaos: a look that never found the root its probe found).
        Not if the search is from our own ancestors (their label): up is back to them."""
        stream = self.streams.get(route.key)
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
        return self.peers.get(stream.parent)

    def _preferred(self: _NodeParts, route: Route) -> Peer | None:
        """The peer ``route`` asks to try first (``Route.prefer``), once, if still linked."""
        prefer, route.prefer = route.prefer, None
        return None if prefer is None or prefer in route.tried else self.peers.get(prefer)

    def _drop_route(self: _NodeParts, route: Route) -> None:
        del self.routes[route.uid]
        self._parked.pop(route.uid, None)
        uids = self._routes_by_key[route.key]
        del uids[route.uid]
        if not uids:
            del self._routes_by_key[route.key]
        if route.upstream is not None:
            mine = (route.upstream, route.key)
            left = self._routes_by_peer[mine] - 1
            if left:
                self._routes_by_peer[mine] = left
            else:
                del self._routes_by_peer[mine]

    def _on_failure(
        self: _NodeParts,
        now: float,
        peer: PeerId,
        reply: DataNotFound | RejectOverload | RejectedLoop,
    ) -> None:
        route = self.routes.get(reply.uid)
        if route is None or route.current != peer:
            return  # stale: we gave up on that peer already
        if not isinstance(reply, RejectedLoop) and reply.key != route.key:
            self.out.drop(peer, "answered a search with another stream's key")
            return
        if isinstance(reply, DataNotFound):
            route.htl = min(route.htl, reply.htl)
            route.lost |= reply.lost
        self._forward(now, route)
        self._settle(peer, route.key)

    def _on_accepted(self: _NodeParts, now: float, peer: PeerId, uid: int) -> None:
        route = self.routes.get(uid)
        if route is not None and route.current == peer and not route.accepted:
            route.accepted = True
            route.deadline = now + self.config.request_timeout
            self._timers.add(route.deadline, (ROUTE_TIMER, route.uid, route.attempt))

    def _on_route_timeout(self: _NodeParts, now: float, uid: int, attempt: int) -> None:
        route = self.routes.get(uid)
        if (
            route is not None
            and route.attempt == attempt
            and route.current is not None
            and now >= route.deadline
        ):
            self.stats.timeouts += 1
            peer = route.current
            self._forward(now, route)
            self._settle(peer, route.key)
