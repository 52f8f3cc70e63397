"""A node's links to its peers as the tree sees them: a peer's Hello (a new peer, or one
back with a new boot id), a link lost, a peer gone from every stream, its neighbours."""

from __future__ import annotations

from keyspace.location import is_closer
from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.effects import PeerId
from overlay.core.leaving import Leaving
from overlay.core.liveness import Liveness
from overlay.core.merges import Merges
from overlay.core.peers import PeerTable
from overlay.core.probes import Probes
from overlay.core.restarts import Restarts
from overlay.core.searches import Searches
from overlay.core.streams import Change, State, Stream
from overlay.messages import Hello, Neighbours


class Links:
    """Peers arriving, coming back anew and going (see the module notes). The peer table
    ``peers`` is shared; this adds and removes its entries."""

    __slots__ = (
        "_catch_ups",
        "_leaving",
        "_liveness",
        "_merges",
        "_peers",
        "_probes",
        "_restarts",
        "_searches",
        "_streams",
        "location",
    )

    def __init__(
        self,
        location: float,
        streams: dict[bytes, Stream],
        peers: PeerTable,
        catch_ups: CatchUpBudget,
        liveness: Liveness,
        probes: Probes,
        searches: Searches,
        restarts: Restarts,
        leaving: Leaving,
        merges: Merges,
    ) -> None:
        self.location = location
        self._streams = streams
        self._peers = peers
        self._catch_ups = catch_ups
        self._liveness = liveness
        self._probes = probes
        self._searches = searches
        self._restarts = restarts
        self._leaving = leaving
        self._merges = merges

    def link_down(self, now: float, peer: PeerId) -> None:
        """The link to ``peer`` is gone (closed, or declared dead by the driver)."""
        if self._peers.remove(peer) is not None:
            # Its budget goes with the link, not with a new boot id (``forget_peer``): a
            # Hello costs nothing, a new link a handshake.
            self._catch_ups.forget(peer)
            self.forget_peer(now, peer)
            self._liveness.links_changed(now)

    def on_hello(self, now: float, peer: PeerId, hello: Hello) -> None:
        """``peer`` introduced itself: it counts as connected from now."""
        previous = self._peers.add(peer, hello.location, hello.boot_id, now)
        self._liveness.start(now)
        # A peer that moved (a location swap: ``swaps``) is, for routing, a new node.
        moved = previous is not None and previous.location != hello.location
        if previous is None or moved:
            self._liveness.links_changed(now)
        if previous is not None and previous.boot_id != hello.boot_id:
            # Spec: "When a node reconnects, and has a new boot ID, we remove it from any
            # streams to which it was subscribed."
            self.forget_peer(now, peer)
        if previous is None or moved:
            # Spec: "when a new node is added ... we restart the subscription". Only a root
            # has reason to: a closer peer means the tree belongs further on, and routing
            # our resubscribe (must beat: us) moves it there. Elsewhere the tree stays valid.
            # A child that moved is no closer node to hand the tree to: it is inside it,
            # and would refuse the resubscribe. Nor is a peer that moved away from the key:
            # a member of the tree moves only so (``swaps``), and may stand closer than
            # its root (it joined where its search first met the tree).
            for stream in list(self._streams.values()):
                if (
                    stream.state is State.ROOT
                    and peer not in stream.children
                    and is_closer(stream.target, hello.location, self.location)
                    and (
                        previous is None
                        or is_closer(stream.target, hello.location, previous.location)
                    )
                ):
                    self._restarts.restart(now, stream, Change.CLOSER_NODE)
        if previous is None:
            self._probes.probe_new_links(now)
        if self._searches.parked:
            self._searches.resume_parked(now)

    def on_neighbours(self, peer: PeerId, message: Neighbours) -> None:
        """``peer`` told us where its peers are (friend-of-a-friend routing)."""
        record = self._peers.get(peer)
        if record is not None:
            # Sorted (bisect finds a target's place in C), and kept as it came when it came
            # sorted, as every node announces: one tuple for every node it reached, our own
            # location in it (``peers``).
            locations = message.locations
            ordered = tuple(sorted(locations))
            record.neighbours = locations if ordered == locations else ordered

    def forget_peer(self, now: float, peer: PeerId, at_once: bool = True) -> None:
        """``peer`` is gone or restarted: it is nobody's child and nobody's parent here.
        ``at_once``: its link closed or it came back anew, which the peers on its other
        links saw at the same moment; not: it fell silent (``liveness``)."""
        self._probes.lost_peer(peer)
        self._leaving.forget_peer(peer)
        self._searches.lost_peer(now, peer)
        for stream in list(self._streams.values()):
            if stream.parent == peer:
                self._restarts.restart(now, stream, Change.PARENT_LOST)
            elif peer in stream.children:
                self._merges.lost_child(now, stream, peer, at_once)
                self._restarts.child_gone(now, stream, peer, died=True)
