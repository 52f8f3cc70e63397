"""Tree membership: a node entering a stream's tree, its state changing through the table of
``overlay.core.streams``, and a searcher answered and adopted as a child.

Invariants (checked by the simulator's tree checker at quiescence):
* a node takes a parent only while childless, so parent links never close a cycle;
* a node never adopts its own parent as a child;
* when a node enters a tree it completes its other searches for that key at once, and a
  success that arrives for a search it no longer runs is answered with Unsubscribe, so no
  node stays listed as a child of a parent it does not name.
"""

from __future__ import annotations

from overlay.core.admission import Admission
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.joining import owed_after
from overlay.core.keeping import Keeping
from overlay.core.must_beat import may_accept
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import Refills
from overlay.core.restarts import Restarts, label_of, new_head, success_of
from overlay.core.routing import Route
from overlay.core.searches import Searches
from overlay.core.stats import NodeStats
from overlay.core.streams import Change, State, Stream, new_stream, next_state
from overlay.errors import LocalProtocolError
from overlay.messages import RejectedLoop, SubscribeSucceeded, SubscribeSucceededNewRoot


class Membership:
    """Where this node stands in each stream's tree (see the module notes): the stream table
    ``streams`` is shared; this changes its entries and their children."""

    __slots__ = (
        "_admission",
        "_config",
        "_flow",
        "_keeping",
        "_out",
        "_peers",
        "_refills",
        "_restarts",
        "_searches",
        "_stats",
        "_streams",
        "location",
    )

    def __init__(
        self,
        location: float,
        config: NodeConfig,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        peers: PeerTable,
        out: Outbox,
        flow: PacketFlow,
        searches: Searches,
        restarts: Restarts,
        refills: Refills,
        admission: Admission,
        keeping: Keeping,
    ) -> None:
        self.location = location
        self._config = config
        self._stats = stats
        self._streams = streams
        self._peers = peers
        self._out = out
        self._flow = flow
        self._searches = searches
        self._restarts = restarts
        self._refills = refills
        self._admission = admission
        self._keeping = keeping

    def enter_tree(
        self,
        now: float,
        route: Route,
        change: Change,
        parent: PeerId | None,
        reply: SubscribeSucceeded | SubscribeSucceededNewRoot | None = None,
    ) -> Stream:
        """Join the tree of ``route``'s key (as a child of ``parent``, or as root) and tell
        local clients. The caller releases the publishes that waited (``flow.carried``)
        once it has adopted whoever asked: a new root that numbered them first would leave
        its first child without them (a new root's child gets no catch-up)."""
        key = route.key
        stream = self._streams.get(key)
        if stream is None:
            state = next_state(None, change)
            if state is None:
                raise LocalProtocolError(f"{change.value} cannot create a stream")
            stream = self.new_stream(key, state, parent, route.descriptor)
        else:
            self.change(stream, change, parent)
        self._restarts.take_label(stream, *label_of(reply))
        if change is Change.BECAME_ROOT:
            self._stats.roots += 1
            # A resubscribe that makes us root brings an existing tree: a takeover.
            takeover, ours = route.is_resubscribe, route.upstream is None
            self._flow.became_root(now, stream, route.last_seen, takeover=takeover, ours=ours)
        else:
            self._flow.attached(stream, success_of(reply), route.last_seen, new_head(reply))
        root = stream.state is State.ROOT
        if stream.local:
            subscribed = self._flow.subscribed(stream, root)
            for client, member in stream.local.items():
                if member.receives:
                    self._out.deliver(client, subscribed)
        self.complete_pending(now, stream)
        return stream

    def new_stream(
        self, key: bytes, state: State, parent: PeerId | None, descriptor: bytes | None
    ) -> Stream:
        """Start carrying (or joining) ``key``."""
        stream = self._streams[key] = new_stream(key, state, parent, descriptor, self._config)
        return stream

    def change(self, stream: Stream, change: Change, parent: PeerId | None) -> None:
        """Move ``stream`` to the state ``streams.next_state`` gives for ``change`` (none:
        the stream is dropped), with ``parent`` as its parent."""
        state = next_state(stream.state, change)
        if state is None:
            del self._streams[stream.key]
            return
        was_root = stream.state is State.ROOT
        stream.state = state
        stream.parent = parent
        if was_root and state is not State.ROOT:
            self._flow.children_changed(stream)  # its clients are shown what it holds
        if change is not Change.JOIN_FAILED:
            stream.join_uid = None

    def complete_pending(self, now: float, stream: Stream) -> None:
        """Now that we carry ``stream``, answer the searches for it still running through us
        instead of letting them wander on: this coalesces concurrent joins."""
        searches = self._searches
        routes = searches.routes
        for uid in searches.uids_for(stream.key):
            route = routes[uid]
            if route.upstream is None or may_accept(stream, self.location, uid, route.must_beat):
                searches.drop_route(route)
                self.answer(now, stream, route, new_root=False)

    def answer(
        self, now: float, stream: Stream, route: Route, new_root: bool, head_known: bool = True
    ) -> None:
        """Tell whoever asked that the search succeeded, and adopt them as a child."""
        upstream = route.upstream
        if upstream is None or upstream not in self._peers:
            return
        if upstream == stream.parent:
            self._out.send(upstream, RejectedLoop(route.uid))
            return
        self.adopt(
            now,
            stream,
            upstream,
            route.uid,
            new_root,
            route.last_seen,
            route.must_beat,
            head_known=head_known,
        )

    def adopt(
        self,
        now: float,
        stream: Stream,
        peer: PeerId,
        uid: int,
        new_root: bool,
        last_seen: int | None,
        must_beat: float | None = None,
        wait: bool = True,
        head_known: bool = True,
    ) -> None:
        """Take ``peer`` as a child, answering its search ``uid``, and catch it up after
        ``last_seen``, first asking for what we never had (``refills``; ``wait`` False:
        serve what we have). Told no head (``head_known`` False: our root lacks the past)
        or one below ``last_seen`` (``joining.owed_after``), it is adopted at once."""
        # A child relaying coalesced fresh searches already gets all we take in; a resubscribe
        # is caught up anyway (refilled first): a restarting sender drops what came before.
        known = peer in stream.children
        owes = not new_root and not (known and last_seen is None)
        if wait and owes and not self._admission.may_catch_up(now, stream, peer, uid, last_seen):
            return
        refills = self._refills
        if (
            wait
            and head_known
            and not new_root
            and last_seen is not None
            and refills.serve_later(now, stream, peer, last_seen + 1, None, uid, must_beat)
        ):
            return
        flow = self._flow
        stream.children[peer] = None
        self._keeping.unkeep(stream)
        reply = None if new_root else flow.success(uid, stream, last_seen, head_known)
        self._out.send(peer, reply or SubscribeSucceededNewRoot(uid, stream.key, stream.high))
        after = owed_after(reply, last_seen)
        owed = after != last_seen or not head_known
        own = refills.catch_up_later(now, stream, peer, after) if owed else None
        later = own is not None
        if owes and not later:
            flow.catch_up(stream, peer, after)
        if not later:
            flow.send_mark(stream, peer)  # how far it may show, after its catch-up
        if stream.state is State.RESTARTING:
            # A detached node claims the numbers its new child has seen: should it become
            # root holding none of them, it must not number them again.
            stream.claim(last_seen)
        flow.reported(now, stream, last_seen)
        refills.ask_newcomer(stream, peer, last_seen, own)
