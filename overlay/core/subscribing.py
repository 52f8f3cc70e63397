"""Subscribe searches where they start, arrive and end: a request taken on or refused, our
own search routed, a search ending here (as the new root, or failing), a success arriving.

Subscribing follows the Freenet 0.7 specification (seeds/003): a search routed greedily
toward the key (``overlay.core.routing``) coalesces into the tree at the first node that
carries the stream; "SubscribeSucceededNewRoot is forwarded back to the originator just as
SubscribeSucceeded is", and every node on the way back joins the tree, so the tree is the
union of the successful search paths. A search's hops (forward, backtrack, time out) are
``overlay.core.searches``; joining the tree is ``overlay.core.membership``.
"""

from __future__ import annotations

from collections.abc import Callable

from keyspace.location import key_location
from keyspace.stream_key import descriptor_matches, key_is_signed
from overlay.core.admission import Admission
from overlay.core.child_drops import WINDOW, ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.events import SubscribeFailed
from overlay.core.leaving import Leaving
from overlay.core.membership import Membership
from overlay.core.merges import Merges
from overlay.core.must_beat import (
    label_refuses,
    may_accept,
    may_become_root,
    may_hang_below,
    may_move_to,
)
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import Refills
from overlay.core.restarts import Restarts, label_of, new_head, success_of
from overlay.core.routing import TRAIL_HTL, Route, advance
from overlay.core.searches import Searches
from overlay.core.stats import NodeStats
from overlay.core.streams import Change, State, Stream
from overlay.messages import (
    DataNotFound,
    PublishError,
    RejectedLoop,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)


class Subscribing:
    """The ends of subscribe searches at this node (see the module notes). It holds no state
    of its own: the searches in flight are ``searches``, the streams ``membership``'s."""

    __slots__ = (
        "_admission",
        "_child_drops",
        "_config",
        "_flow",
        "_leaving",
        "_look_relayed",
        "_membership",
        "_merges",
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
        child_drops: ChildDrops,
        searches: Searches,
        restarts: Restarts,
        refills: Refills,
        admission: Admission,
        leaving: Leaving,
        merges: Merges,
        membership: Membership,
        look_relayed: Callable[[float, PeerId, int, bytes, float], None],  # (``probes``)
    ) -> None:
        self.location = location
        self._config = config
        self._stats = stats
        self._streams = streams
        self._peers = peers
        self._out = out
        self._flow = flow
        self._child_drops = child_drops
        self._searches = searches
        self._restarts = restarts
        self._refills = refills
        self._admission = admission
        self._leaving = leaving
        self._merges = merges
        self._membership = membership
        self._look_relayed = look_relayed

    def on_request(
        self, now: float, peer: PeerId, request: SubscribeRequest | ResubscribeRequest
    ) -> None:
        """A search from ``peer``: end it here (adopt ``peer``), refuse it, or route it on."""
        uid, key = request.uid, request.key
        drops = self._child_drops.too_many(now, peer)
        if drops is not None:
            # (``child_drops``: its lost links held a root's numbering too often to join again)
            self._out.drop(
                peer, f"dropped its link as a root's child {drops} times in {WINDOW:g} s"
            )
            return
        descriptor = None
        if key_is_signed(key):
            descriptor = request.descriptor
            if descriptor is None or descriptor_matches(key, descriptor) is None:
                self._out.drop(peer, "a signed stream's request without its descriptor")
                return
        searches = self._searches
        named = searches.uid_names(uid)
        if named is not None and named != key:
            # One uid names one search for one key (``Searches.start_route``). A search's uid
            # can reach peers before the search does (a restart tells its subtree the uid,
            # SubscribeRestarted, and routes it once the subtree confirms), so a hostile
            # member can name another stream's search with it. Refused as a loop: the
            # search goes no further here, and its sender, which may be an honest relay of
            # whoever reused the uid, keeps its link.
            self._stats.uids_refused += 1
            self._stats.loops += 1
            self._out.send(peer, RejectedLoop(uid))
            return
        seen = searches.seen.contains(uid, now) or named is not None
        searches.seen.add(uid, now)
        must_beat = request.must_beat if isinstance(request, ResubscribeRequest) else None
        stream = self._streams.get(key)
        if stream is not None and stream.carried:
            if peer == stream.parent and uid != stream.restart_uid:
                # Our parent is searching through its own subtree: it must not attach here.
                # (Its resubscribe, whose uid it told us, we route on: "we may need to route
                # our resubscribe request through one of our children".)
                self._out.send(peer, RejectedLoop(uid))
                return
            if may_accept(stream, self.location, uid, must_beat):
                # Even a uid seen before: accepting ends the search here, so it cannot
                # loop, and a search whose first success through us was refused further
                # back (a node cannot adopt its own parent) must still find this tree,
                # or it ends as a second root beside it.
                self._membership.adopt(now, stream, peer, uid, False, request.last_seen, must_beat)
                return
        if seen:  # (or in flight still, though ``seen`` forgot it: ``named``)
            self._stats.loops += 1
            self._out.send(peer, RejectedLoop(uid))
            return
        if self._admission.refuses(peer, uid, key, stream):
            return  # (RejectOverload: ``admission``)
        target = key_location(key)
        config = self._config
        best_loc, htl, i_am_best = advance(
            self.location,
            target,
            request.best_loc,
            request.htl,
            config.max_htl,
            config.max_htl if must_beat is None else config.check_htl,
        )
        route = Route(
            uid, key, target, peer, htl, best_loc, i_am_best, request.last_seen, must_beat
        )
        route.descriptor = descriptor
        if isinstance(request, ResubscribeRequest) and request.trail is not None:
            route.trail = request.trail
            route.trail_htl = request.htl - 1  # (``Searches.forward``)
        route.tried.add(peer)
        if stream is not None and stream.confirming is None:
            route.labelled = stream.restart_uid
        if (
            stream is not None
            and stream.carried
            and label_refuses(stream, self.location, uid, must_beat)
        ):
            # A tree that would have taken this look, but for its own look's label: "not
            # found" may be wrong here, so the look is marked lost and its root looks again
            # (``merges``). Two roots that took over from one dead root label each other's
            # looks; with no closer peer outside either tree, a plain "not found" would
            # leave both numbering side by side.
            route.lost = True
        if must_beat is not None:
            self._look_relayed(now, peer, uid, key, must_beat)
        searches.start_route(now, route)

    def start_own_search(
        self, now: float, stream: Stream, must_beat: float | None, uid: int | None = None
    ) -> None:
        """Route a search for ``stream`` that starts here (a local join or a restart)."""
        searches = self._searches
        if uid is None:
            uid = searches.fresh_uid()
        searches.seen.add(uid, now)
        stream.join_uid = uid
        route = Route(
            uid,
            stream.key,
            stream.target,
            None,
            # A root's own resubscribe is a look for another root (``merges``).
            self._config.check_htl if stream.state is State.ROOT else self._config.max_htl,
            self.location,
            True,
            self._flow.resume_point(stream),
            must_beat,
            stream.descriptor,
        )
        if stream.state is State.ROOT and stream.root.looking == uid:
            route.trail = stream.root.look_trail  # (``Merges.start_look``)
            if route.trail is not None:
                route.trail_htl = TRAIL_HTL  # (``Searches.forward``)
        searches.start_route(now, route)

    def end_route(self, now: float, route: Route) -> None:
        """No peer is left to try (or the budget is spent): root here, or report failure."""
        self._searches.drop_route(route)
        stream = self._streams.get(route.key)
        if route.upstream is None and stream is not None and stream.join_uid == route.uid:
            self._own_search_ended(now, stream, route)
        elif stream is not None and stream.state is not State.JOINING:
            # We carry the stream but routed this resubscribe past it ("pretend the stream
            # doesn't exist"): we cannot be a new root for it.
            self._fail(route)
        elif route.trail_htl > 0 and route.upstream is not None:
            # A relay on a look's trail tries the trail's hop alone (``Searches.forward``):
            # it searched no further than that, so it is not where the search ran out, and
            # its "not found" may be wrong (that hop may be busy or gone silent): the look's
            # origin looks again (``merges``).
            route.lost = True
            self._fail(route)
        elif may_become_root(route, self.location):
            membership = self._membership
            stream = membership.enter_tree(now, route, Change.BECAME_ROOT, parent=None)
            membership.answer(now, stream, route, new_root=True)
            self._merges.first_look(now, stream, route)
            self._flow.carried(now, stream)
            self._leaving.prune(now, stream)
        else:
            self._fail(route)

    def _own_search_ended(self, now: float, stream: Stream, route: Route) -> None:
        flow = self._flow
        if stream.state is State.ROOT:
            self._merges.looked(now, stream, route.lost)  # no other tree: still the root
        elif stream.state is State.RESTARTING:
            # Nobody closer than us outside our own subtree answered: we are the closest
            # node that routing can find, so the subtree keeps us as its root.
            self._membership.change(stream, Change.BECAME_ROOT, parent=None)
            self._restarts.take_label(stream, None, None)
            self._stats.roots += 1
            flow.became_root(now, stream, None, takeover=True)
            flow.reported(now, stream, stream.subtree_high)
            self._membership.complete_pending(now, stream)
            flow.carried(now, stream)
            self._refills.refill(now, stream)
        elif may_become_root(route, self.location):
            stream = self._membership.enter_tree(now, route, Change.BECAME_ROOT, parent=None)
            self._merges.first_look(now, stream, route)
            flow.carried(now, stream)
        else:
            self._membership.change(stream, Change.JOIN_FAILED, parent=None)
            reason = "no route to the stream's key: every peer refused the search"
            for client, member in stream.local.items():
                if member.receives:
                    self._out.deliver(client, SubscribeFailed(stream.key, reason))
            flow.abandon(stream, PublishError.NOT_CARRIED)
        self._leaving.prune(now, stream)

    def _fail(self, route: Route) -> None:
        self._stats.not_found += 1
        if route.upstream is not None and route.upstream in self._peers:
            self._out.send(
                route.upstream, DataNotFound(route.uid, route.key, route.htl, route.lost)
            )

    def on_success(
        self, now: float, peer: PeerId, reply: SubscribeSucceeded | SubscribeSucceededNewRoot
    ) -> None:
        """A search through ``peer`` found the tree: join it, and answer whoever asked."""
        leaving = self._leaving
        route = self._searches.routes.get(reply.uid)
        if route is None or route.current != peer or route.key != reply.key:
            # A late answer to a search we already finished (timed out, or completed when we
            # joined by another path): the sender just listed us as a child; undo that.
            leaving.refuse_parent(peer, reply.key)
            return
        stream = self._streams.get(route.key)
        if (
            stream is not None
            and peer in stream.children
            and (stream.state is State.RESTARTING or route.uid == stream.restart_uid)
        ):
            # Spec: "a subtree never adopts its own descendant as parent". We are about to
            # take ``peer`` as parent while it is listed as our child: either the listing is
            # stale or the success went round our own subtree. We cannot tell which, so we
            # refuse, undo its adoption of us and try our next peer.
            self._stats.loops += 1
            leaving.leave(peer, route.key)
            self._searches.forward(now, route)
            leaving.settle(peer, route.key)
            return
        self._searches.drop_route(route)
        new_root = isinstance(reply, SubscribeSucceededNewRoot)
        membership = self._membership
        flow = self._flow
        if stream is not None and stream.carried:
            head_known = True
            if stream.join_uid == route.uid and stream.state is not State.JOINED:
                if stream.state is State.ROOT:
                    self._merges.merged(stream)  # our look found another tree: join it
                change = Change.ATTACHED if stream.state is State.RESTARTING else Change.MERGED
                membership.change(stream, change, parent=peer)
                self._restarts.take_label(stream, *label_of(reply))
                flow.attached(stream, success_of(reply), route.last_seen, new_head(reply))
                membership.complete_pending(now, stream)
                flow.carried(now, stream)
                self._refills.refill(now, stream)
            elif stream.state is State.JOINED and route.uid == stream.restart_uid:
                # We routed our restarting ancestor's resubscribe past ourselves and it found
                # the tree through ``peer``: hang from ``peer`` and leave the old parent (our
                # ancestor, which will attach below us), so no cycle closes.
                self._restarts.hang_from(now, stream, peer, reply, route.last_seen)
                # A root this very search made holds none of the tree's past, so we name no
                # head: the ancestor whose search it is then pushes all it has, where told
                # our head it would push nothing and a packet whose only copy is below it
                # would be lost. It is still caught up from us: we may hold what it lacks.
                head_known = not new_root
            elif stream.parent != peer:
                if may_hang_below(stream, route.uid, route.must_beat):
                    leaving.leave(peer, route.key)  # it joins our tree, through us
                elif may_move_to(stream, peer, reply, route):
                    self._restarts.hang_from(now, stream, peer, reply, route.last_seen)
                else:
                    leaving.leave(peer, route.key)
                    self._fail(route)  # answering it from here would put it below us
                    return
            membership.answer(now, stream, route, new_root=False, head_known=head_known)
        else:
            stream = membership.enter_tree(now, route, Change.ATTACHED, parent=peer, reply=reply)
            membership.answer(now, stream, route, new_root=new_root)
            flow.carried(now, stream)
        leaving.prune(now, stream)
        leaving.settle(peer, route.key)
