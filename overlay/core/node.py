"""The sans-IO protocol core of one node.

Inputs: ``link_up``/``link_down`` (a driver opened or lost a link), ``receive`` (a decoded
message from a peer), ``handle_timer`` (a deadline passed), and the local client calls
(``overlay.core.clients``: subscribe, publish, unsubscribe, remove_client). Each takes ``now``
(seconds, any epoch) and returns the list of effects the driver must carry out. The core
imports no I/O, reads no clock and draws every random number from the ``random.Random`` it
was handed, so a seeded simulator replays it exactly and the trio runtime runs the very same
code.

Subscribing follows the Freenet 0.7 specification (seeds/003): a search routed greedily
toward the key (``overlay.core.routing``) coalesces into the tree at the first node that
carries the stream; "SubscribeSucceededNewRoot is forwarded back to the originator just as
SubscribeSucceeded is", and every node on the way back joins the tree, so the tree is the
union of the successful search paths. Packets move through the tree in
``overlay.core.publishing``; this module keeps the tree.

Invariants (checked by the simulator's tree checker at quiescence):
* a node takes a parent only while childless, so parent links never close a cycle;
* a node never adopts its own parent as a child;
* when a node enters a tree it completes its other searches for that key at once, and a
  success that arrives for a search it no longer runs is answered with Unsubscribe, so no
  node stays listed as a child of a parent it does not name.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from keyspace.location import is_closer, key_location
from keyspace.stream_key import descriptor_matches, key_is_signed
from overlay.core.admission import Admission
from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.child_drops import WINDOW, ChildDrops
from overlay.core.clients import LocalClients
from overlay.core.config import NodeConfig
from overlay.core.effects import ClientId, Effect, PeerId, SetTimer
from overlay.core.events import ClientEvent, SubscribeFailed
from overlay.core.joining import owed_after
from overlay.core.keeping import Keeping
from overlay.core.leaving import Leaving
from overlay.core.liveness import Liveness
from overlay.core.memory import Memory
from overlay.core.merges import Merges
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.probes import Probes
from overlay.core.publishing import PacketFlow
from overlay.core.recent import RecentIds
from overlay.core.refills import Refills
from overlay.core.restarts import (
    Restarts,
    label_of,
    may_hang_below,
    may_move_to,
    new_head,
    success_of,
)
from overlay.core.routing import Route, advance, may_become_root
from overlay.core.searches import Searches
from overlay.core.stats import NodeStats
from overlay.core.streams import Change, State, Stream, new_stream, next_state
from overlay.core.timers import TimerQueue
from overlay.errors import LocalProtocolError
from overlay.messages import (
    Accepted,
    Committed,
    DataNotFound,
    FillRequest,
    Heartbeat,
    Held,
    HeldQuery,
    Hello,
    Message,
    Neighbours,
    PacketKind,
    PacketsMissed,
    PastQuery,
    ProbeAnswer,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    PublishWitness,
    RejectedLoop,
    RejectOverload,
    RestartConfirmed,
    RestartEnded,
    ResubscribeRequest,
    RootProbe,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
    Unsubscribe,
)


class Node:
    """One node's protocol state. Not thread-safe; a driver calls it from one task."""

    def __init__(
        self,
        node_id: PeerId,
        location: float,
        rng: random.Random,
        config: NodeConfig | None = None,
        boot_id: int | None = None,
        remembered: Mapping[bytes, int] | None = None,  # ``Remember`` effects a driver kept
    ) -> None:
        self.id = node_id
        self.location = location
        self.config = config = config if config is not None else NodeConfig()
        self.rng = rng
        # A fresh boot id per start tells peers that our stream state is gone (spec).
        self.boot_id = boot_id if boot_id is not None else rng.getrandbits(64)
        self.peers = peers = PeerTable()
        self.streams: dict[bytes, Stream] = {}
        streams = self.streams
        self.stats = stats = NodeStats()
        self.child_drops = ChildDrops()  # (``merges``: a root's lost children, per peer)
        # What each peer may draw in catch-ups, in the config's windows (``config``).
        self.catch_ups = CatchUpBudget(
            config.catch_up_rate * config.window_packets,
            config.catch_up_rate * config.window_bytes,
            config.catch_up_burst * config.window_packets,
            config.catch_up_burst * config.window_bytes,
        )
        self._timers = timers = TimerQueue()
        self._announced: float | None = None
        self.out = out = Outbox(stats)
        self.memory = Memory(config.remembered_streams, out.append, remembered)
        # (``peers``: whom a publisher's node tells, ``peer_witnesses``)
        self.flow = flow = PacketFlow(config, streams, timers, stats, out, self.memory, peers)
        # The components, each built with what it uses. Where two need each other, the
        # later one is reached through a lambda (bound when called).
        seen = RecentIds(config.seen_uid_ttl, config.seen_uid_capacity)  # (searches, probes)
        self.keeping = Keeping(config, streams, timers, lambda s: self.leaving.forget(s))
        self.refills = Refills(
            config,
            stats,
            streams,
            peers,
            timers,
            out,
            self.catch_ups,
            flow,
            self._adopt,
            lambda now, stream: self.leaving.prune(now, stream),
            lambda peer, verdict: self.admission.over_catch_up_budget(peer, verdict),
            may_hang_below,
        )
        self.restarts = Restarts(
            location,
            config,
            stats,
            streams,
            peers,
            timers,
            out,
            flow,
            self.refills,
            self._change,
            self._start_own_search,
            lambda: self.searches.fresh_uid(),
            lambda peer, key: self.leaving.leave(peer, key),
            lambda now, stream: self.leaving.linger(now, stream),
            lambda now, stream: self.leaving.prune(now, stream),
        )
        self.probes = Probes(
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
        self.liveness = Liveness(
            config, peers, stats, timers, out, flow, self.catch_ups, self.probes, self._forget_peer
        )
        self.searches = Searches(
            config,
            peers,
            stats,
            streams,
            timers,
            out,
            rng,
            seen,
            self.restarts.awaiting,
            self.liveness,
            self.probes,
            self._end_route,
            lambda peer, key: self.leaving.settle(peer, key),
        )
        self.leaving = Leaving(
            config,
            peers,
            streams,
            timers,
            out,
            self.searches,
            self.keeping,
            self.restarts.child_gone,
        )
        self.admission = Admission(
            config, stats, streams, out, self.catch_ups, self.searches, self.keeping, self.leaving
        )
        self.merges = Merges(
            location,
            config,
            rng,
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
        )
        self.clients = LocalClients(
            location,
            config,
            streams,
            out,
            flow,
            self._new_stream,
            self._start_own_search,
            self.leaving.prune,
            self.keeping.unkeep,
            self.admission.has_room,
        )

    # --- driver entry points ------------------------------------------------------------

    def link_up(self, now: float, peer: PeerId) -> list[Effect]:
        """A link to ``peer`` is open: introduce ourselves. The peer counts as connected
        once its own Hello arrives."""
        self._send(peer, Hello(self.location, self.boot_id))
        return self._flush(now)

    def link_down(self, now: float, peer: PeerId) -> list[Effect]:
        """The link to ``peer`` is gone (closed, or declared dead by the driver)."""
        if self.peers.remove(peer) is not None:
            # Its budget goes with the link, not with a new boot id (``_forget_peer``): a
            # Hello costs nothing, a new link a handshake.
            self.catch_ups.forget(peer)
            self._forget_peer(now, peer)
            self.liveness.links_changed(now)
        return self._flush(now)

    def receive(self, now: float, peer: PeerId, message: Message) -> list[Effect]:
        """Handle one message from ``peer``. The driver has decoded and validated it."""
        self.stats.received += 1
        record = self.peers.get(peer)
        if record is not None:
            record.heard = now  # any message shows the peer is alive
        if type(message) is Heartbeat and record is not None:
            return self._flush(now)  # hearing it was its whole purpose
        if type(message) is SubscribeData and record is not None:
            # The one message a node handles at the broadcast's rate: skip the dispatch.
            stream = self._from_parent(peer, message.key)
            if stream is not None:
                self.flow.on_data(peer, message, stream)
                if stream.fills is not None:
                    self.refills.check_fills(now, stream)
        elif isinstance(message, Hello):
            self._on_hello(now, peer, message)
        elif record is None:
            self.out.drop(peer, f"sent {type(message).__name__} before Hello")
        else:
            self._dispatch(now, peer, message)
        return self._flush(now)

    def handle_timer(self, now: float) -> list[Effect]:
        """Run every timer due at ``now``. Harmless to call early or more than once."""
        self._timers.run(now)
        return self._flush(now)

    def after_fault(self, now: float) -> list[Effect]:
        """A call into this core raised (a bug of ours, whatever input brought it on): the
        effects it produced before it raised, and the next deadline named again. A driver
        that contains the fault (the runtime: one link closed, or one timer lost) carries
        these out and goes on; the simulator and the tests let the exception stop them.
        A timer that raised was already off the queue (``TimerQueue.due``); the timers
        due after it are still on it, so the deadline named here runs them."""
        self._announced = None
        return self._flush(now)

    def announce_neighbours(self, now: float) -> list[Effect]:
        """Tell every peer where our peers are, now (normally a timer does it after links
        change; a driver that brings many links up at once may call it when done)."""
        self.liveness.announce()
        return self._flush(now)

    def busy(self) -> bool:
        """Whether protocol work is pending: a search (not one waiting for a peer, which may
        never come), an unanswered local publish, a root's takeover grace, a waiter, a
        linger, an announcement or a root's mark due (``showing``). Heartbeats do not count;
        a driver that runs until the network is quiet (the simulator) waits for every node to
        stop being busy."""
        flow = self.flow
        searches = self.searches
        ours = len(searches.routes) > len(searches.parked) or self.liveness.announce_at is not None
        waits = self.restarts.awaiting or self.refills.waiting or self.leaving.linger_keys
        return bool(ours or waits or flow.local or flow.recovering or flow.marks_due)

    def next_deadline(self) -> float | None:
        """When ``handle_timer`` should next be called (None: no timer pending)."""
        return self._timers.earliest()

    # --- local clients (``overlay.core.clients``) -----------------------------------------

    def subscribe(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        *,
        last_seen: int | None = None,
        atomic: bool = False,
        descriptor: bytes | None = None,
    ) -> list[Effect]:
        """Subscribe a local client (``LocalClients.subscribe``)."""
        self.clients.subscribe(
            now, key, client, last_seen=last_seen, atomic=atomic, descriptor=descriptor
        )
        return self._flush(now)

    def publish(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        uid: int,
        data: bytes,
        *,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
        sig: bytes | None = None,
        descriptor: bytes | None = None,
    ) -> list[Effect]:
        """Publish ``data`` for a local client (``LocalClients.publish``)."""
        self.clients.publish(
            now,
            key,
            client,
            uid,
            data,
            packet=packet,
            epoch=epoch,
            kind=kind,
            sig=sig,
            descriptor=descriptor,
        )
        return self._flush(now)

    def unsubscribe(self, now: float, key: bytes, client: ClientId) -> list[Effect]:
        """Remove a local client (``LocalClients.unsubscribe``)."""
        self.clients.unsubscribe(now, key, client)
        return self._flush(now)

    def remove_client(self, now: float, client: ClientId) -> list[Effect]:
        """A local client went away (``LocalClients.remove_client``)."""
        self.clients.remove_client(now, client)
        return self._flush(now)

    # --- dispatch -------------------------------------------------------------------------

    def _dispatch(self, now: float, peer: PeerId, message: Message) -> None:
        match message:
            case SubscribeRequest() | ResubscribeRequest():
                self._on_request(now, peer, message)
            case Accepted():
                self.searches.on_accepted(now, peer, message.uid)
            case SubscribeSucceeded() | SubscribeSucceededNewRoot():
                self._on_success(now, peer, message)
            case DataNotFound() | RejectOverload() | RejectedLoop():
                self.searches.on_failure(now, peer, message)
            case SubscribeRestarted():
                self.restarts.on_restarted(now, peer, message)
            case RestartConfirmed():
                self.restarts.on_restart_confirmed(now, peer, message)
            case RestartEnded():
                self.restarts.on_restart_ended(now, peer, message.uid, message.key)
            case Unsubscribe():
                self.leaving.on_unsubscribe(now, peer, message.key)
            case Neighbours():
                record = self.peers.get(peer)
                if record is not None:
                    own = self.location
                    record.neighbours = tuple(sorted(x for x in message.locations if x != own))
            case PacketsMissed():
                stream = self._from_parent(peer, message.key)
                if stream is not None:
                    self.flow.on_missed(peer, message, stream)
                    if stream.fills is not None:
                        self.refills.check_fills(now, stream)
            case FillRequest():
                self.refills.on_fill_request(now, peer, message)
            case RootProbe():
                self.probes.on_probe(now, peer, message)
            case ProbeAnswer():
                self.probes.on_answer(now, peer, message)
            case HeldQuery():
                self.flow.on_held_query(peer, message)
            case Committed() | PastQuery():
                stream = self._from_parent(peer, message.key)
                if stream is not None:
                    self.flow.from_parent(now, stream, message)  # (``showing``, ``gathering``)
            case Held():
                self.flow.on_held(peer, message)
            case PublishData():
                self.flow.on_publish(now, peer, message)
                self.refills.served(now, message.key)  # it may be one a waiting child lacks
            case PublishSucceeded() | PublishCollision() | PublishRejected():
                self.flow.on_answer(now, peer, message)
            case PublishNumbered() | PublishConfirmed() | PublishWitness():
                self.flow.on_confirming(now, peer, message)  # (``peer_witnesses`` too)
            case _:
                self.stats.ignored += 1

    def _from_parent(self, peer: PeerId, key: bytes) -> Stream | None:
        """The stream ``peer`` may send packets of, as our parent in its tree. Anything else
        is answered with Unsubscribe: lazy pushing (pub0sub), negative subscription
        (nanomsg), so a sender that thinks we are its child stops."""
        stream = self.streams.get(key)
        if stream is None or stream.parent != peer or not stream.carried:
            self.leaving.leave(peer, key)
            return None
        return stream

    def _on_hello(self, now: float, peer: PeerId, hello: Hello) -> None:
        previous = self.peers.add(peer, hello.location, hello.boot_id, now)
        self.liveness.start(now)
        if previous is None or previous.location != hello.location:
            self.liveness.links_changed(now)
        if previous is not None and previous.boot_id != hello.boot_id:
            # Spec: "When a node reconnects, and has a new boot ID, we remove it from any
            # streams to which it was subscribed."
            self._forget_peer(now, peer)
        if previous is None:
            # Spec: "when a new node is added ... we restart the subscription". Only a root
            # has reason to: a closer peer means the tree belongs further on, and routing
            # our resubscribe (must beat: us) moves it there. Elsewhere the tree stays valid.
            for stream in list(self.streams.values()):
                if stream.state is State.ROOT and is_closer(
                    stream.target, hello.location, self.location
                ):
                    self.restarts.restart(now, stream, Change.CLOSER_NODE)
            self.probes.probe_new_links(now)
        if self.searches.parked:
            self.searches.resume_parked(now)

    def _forget_peer(self, now: float, peer: PeerId, at_once: bool = True) -> None:
        """``peer`` is gone or restarted: it is nobody's child and nobody's parent here.
        ``at_once``: its link closed or it came back anew, which the peers on its other
        links saw at the same moment; not: it fell silent (``liveness``)."""
        self.probes.lost_a_link = True  # a new link may now be a way back (``probes``)
        self.leaving.forget_peer(peer)
        self.searches.lost_peer(now, peer)
        for stream in list(self.streams.values()):
            if stream.parent == peer:
                self.restarts.restart(now, stream, Change.PARENT_LOST)
            elif peer in stream.children:
                self.merges.lost_child(now, stream, peer, at_once)
                self.restarts.child_gone(now, stream, peer, died=True)

    # --- searches -------------------------------------------------------------------------

    def _on_request(
        self, now: float, peer: PeerId, request: SubscribeRequest | ResubscribeRequest
    ) -> None:
        uid, key = request.uid, request.key
        drops = self.child_drops.too_many(now, peer)
        if drops is not None:
            # (``child_drops``: its lost links held a root's numbering too often to join again)
            self.out.drop(peer, f"dropped its link as a root's child {drops} times in {WINDOW:g} s")
            return
        descriptor = None
        if key_is_signed(key):
            descriptor = request.descriptor
            if descriptor is None or descriptor_matches(key, descriptor) is None:
                self.out.drop(peer, "a signed stream's request without its descriptor")
                return
        searches = self.searches
        named = searches.uid_names(uid)
        if named is not None and named != key:
            # One uid names one search for one key (``Searches.start_route``). A search's uid
            # can reach peers before the search does (a restart tells its subtree the uid,
            # SubscribeRestarted, and routes it once the subtree confirms), so a hostile
            # member can name another stream's search with it. Refused as a loop: the
            # search goes no further here, and its sender, which may be an honest relay of
            # whoever reused the uid, keeps its link.
            self.stats.uids_refused += 1
            self.stats.loops += 1
            self._send(peer, RejectedLoop(uid))
            return
        seen = searches.seen.contains(uid, now) or named is not None
        searches.seen.add(uid, now)
        must_beat = request.must_beat if isinstance(request, ResubscribeRequest) else None
        stream = self.streams.get(key)
        if stream is not None and stream.carried:
            if peer == stream.parent and uid != stream.restart_uid:
                # Our parent is searching through its own subtree: it must not attach here.
                # (Its resubscribe, whose uid it told us, we route on: "we may need to route
                # our resubscribe request through one of our children".)
                self._send(peer, RejectedLoop(uid))
                return
            if self.restarts.may_accept(stream, uid, must_beat):
                # Even a uid seen before: accepting ends the search here, so it cannot
                # loop, and a search whose first success through us was refused further
                # back (a node cannot adopt its own parent) must still find this tree,
                # or it ends as a second root beside it.
                self._adopt(now, stream, peer, uid, False, request.last_seen, must_beat)
                return
        if seen:  # (or in flight still, though ``seen`` forgot it: ``named``)
            self.stats.loops += 1
            self._send(peer, RejectedLoop(uid))
            return
        if self.admission.refuses(peer, uid, key, stream):
            return  # (RejectOverload: ``admission``)
        target = key_location(key)
        best_loc, htl, i_am_best = advance(
            self.location,
            target,
            request.best_loc,
            request.htl,
            self.config.max_htl,
            self.config.max_htl if must_beat is None else self.config.check_htl,
        )
        route = Route(
            uid, key, target, peer, htl, best_loc, i_am_best, request.last_seen, must_beat
        )
        route.descriptor = descriptor
        route.tried.add(peer)
        if stream is not None and stream.confirming is None:
            route.labelled = stream.restart_uid
        if (
            stream is not None
            and stream.carried
            and self.restarts.label_refuses(stream, uid, must_beat)
        ):
            # A tree that would have taken this look, but for its own look's label: "not
            # found" may be wrong, as when an answer dies with a link (``merges``; chaos:
            # two roots that took over from one dead root refused each other's looks twice,
            # neither had a closer peer outside its tree, and both numbered 22..24).
            route.lost = True
        searches.start_route(now, route)

    def _start_own_search(
        self, now: float, stream: Stream, must_beat: float | None, uid: int | None = None
    ) -> None:
        """Route a search for ``stream`` that starts here (a local join or a restart)."""
        searches = self.searches
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
            self.config.check_htl if stream.state is State.ROOT else self.config.max_htl,
            self.location,
            True,
            self.flow.resume_point(stream),
            must_beat,
            stream.descriptor,
        )
        searches.start_route(now, route)

    def _end_route(self, now: float, route: Route) -> None:
        """No peer is left to try (or the budget is spent): root here, or report failure."""
        self.searches.drop_route(route)
        stream = self.streams.get(route.key)
        if route.upstream is None and stream is not None and stream.join_uid == route.uid:
            self._own_search_ended(now, stream, route)
        elif stream is not None and stream.state is not State.JOINING:
            # We carry the stream but routed this resubscribe past it ("pretend the stream
            # doesn't exist"): we cannot be a new root for it.
            self._fail(route)
        elif may_become_root(route, self.location):
            stream = self._enter_tree(now, route, Change.BECAME_ROOT, parent=None)
            self._answer(now, stream, route, new_root=True)
            self.merges.first_look(now, stream, route)
            self.flow.carried(now, stream)
            self.leaving.prune(now, stream)
        else:
            self._fail(route)

    def _own_search_ended(self, now: float, stream: Stream, route: Route) -> None:
        if stream.state is State.ROOT:
            self.merges.looked(now, stream, route.lost)  # no other tree: still the root
        elif stream.state is State.RESTARTING:
            # Nobody closer than us outside our own subtree answered: we are the closest
            # node that routing can find, so the subtree keeps us as its root.
            self._change(stream, Change.BECAME_ROOT, parent=None)
            self.restarts.take_label(stream, None, None)
            self.stats.roots += 1
            self.flow.became_root(now, stream, None, takeover=True)
            self.flow.reported(now, stream, stream.subtree_high)
            self._complete_pending(now, stream)
            self.flow.carried(now, stream)
            self.refills.refill(now, stream)
        elif may_become_root(route, self.location):
            stream = self._enter_tree(now, route, Change.BECAME_ROOT, parent=None)
            self.merges.first_look(now, stream, route)
            self.flow.carried(now, stream)
        else:
            self._change(stream, Change.JOIN_FAILED, parent=None)
            reason = "no route to the stream's key: every peer refused the search"
            for client, member in stream.local.items():
                if member.receives:
                    self._deliver(client, SubscribeFailed(stream.key, reason))
            self.flow.abandon(stream, PublishError.NOT_CARRIED)
        self.leaving.prune(now, stream)

    def _fail(self, route: Route) -> None:
        self.stats.not_found += 1
        if route.upstream is not None and route.upstream in self.peers:
            self._send(route.upstream, DataNotFound(route.uid, route.key, route.htl, route.lost))

    def _on_success(
        self, now: float, peer: PeerId, reply: SubscribeSucceeded | SubscribeSucceededNewRoot
    ) -> None:
        route = self.searches.routes.get(reply.uid)
        if route is None or route.current != peer or route.key != reply.key:
            # A late answer to a search we already finished (timed out, or completed when we
            # joined by another path): the sender just listed us as a child; undo that.
            self.leaving.refuse_parent(peer, reply.key)
            return
        stream = self.streams.get(route.key)
        if (
            stream is not None
            and peer in stream.children
            and (stream.state is State.RESTARTING or route.uid == stream.restart_uid)
        ):
            # Spec: "a subtree never adopts its own descendant as parent". We are about to
            # take ``peer`` as parent while it is listed as our child: either the listing is
            # stale or the success went round our own subtree. We cannot tell which, so we
            # refuse, undo its adoption of us and try our next peer.
            self.stats.loops += 1
            self.leaving.leave(peer, route.key)
            self.searches.forward(now, route)
            self.leaving.settle(peer, route.key)
            return
        self.searches.drop_route(route)
        new_root = isinstance(reply, SubscribeSucceededNewRoot)
        if stream is not None and stream.carried:
            head_known = True
            if stream.join_uid == route.uid and stream.state is not State.JOINED:
                if stream.state is State.ROOT:
                    self.merges.merged(stream)  # our look found another tree: join it
                change = Change.ATTACHED if stream.state is State.RESTARTING else Change.MERGED
                self._change(stream, change, parent=peer)
                self.restarts.take_label(stream, *label_of(reply))
                self.flow.attached(stream, success_of(reply), route.last_seen, new_head(reply))
                self._complete_pending(now, stream)
                self.flow.carried(now, stream)
                self.refills.refill(now, stream)
            elif stream.state is State.JOINED and route.uid == stream.restart_uid:
                # We routed our restarting ancestor's resubscribe past ourselves and it found
                # the tree through ``peer``: hang from ``peer`` and leave the old parent (our
                # ancestor, which will attach below us), so no cycle closes.
                self.restarts.hang_from(now, stream, peer, reply, route.last_seen)
                # A root this very search made holds none of the tree's past, so we name no
                # head: the ancestor whose search it is then pushes all it has (chaos: told
                # our head, it pushed nothing, and the only copy of a packet stayed below
                # it). It is still caught up from us: we may hold what it lacks.
                head_known = not new_root
            elif stream.parent != peer:
                if may_hang_below(stream, route.uid, route.must_beat):
                    self.leaving.leave(peer, route.key)  # it joins our tree, through us
                elif may_move_to(stream, peer, reply, route):
                    self.restarts.hang_from(now, stream, peer, reply, route.last_seen)
                else:
                    self.leaving.leave(peer, route.key)
                    self._fail(route)  # answering it from here would put it below us
                    return
            self._answer(now, stream, route, new_root=False, head_known=head_known)
        else:
            stream = self._enter_tree(now, route, Change.ATTACHED, parent=peer, reply=reply)
            self._answer(now, stream, route, new_root=new_root)
            self.flow.carried(now, stream)
        self.leaving.prune(now, stream)
        self.leaving.settle(peer, route.key)

    # --- tree membership --------------------------------------------------------------------

    def _enter_tree(
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
        stream = self.streams.get(key)
        if stream is None:
            state = next_state(None, change)
            if state is None:
                raise LocalProtocolError(f"{change.value} cannot create a stream")
            stream = self._new_stream(key, state, parent, route.descriptor)
        else:
            self._change(stream, change, parent)
        self.restarts.take_label(stream, *label_of(reply))
        if change is Change.BECAME_ROOT:
            self.stats.roots += 1
            # A resubscribe that makes us root brings an existing tree: a takeover.
            takeover, ours = route.is_resubscribe, route.upstream is None
            self.flow.became_root(now, stream, route.last_seen, takeover=takeover, ours=ours)
        else:
            self.flow.attached(stream, success_of(reply), route.last_seen, new_head(reply))
        root = stream.state is State.ROOT
        if stream.local:
            subscribed = self.flow.subscribed(stream, root)
            for client, member in stream.local.items():
                if member.receives:
                    self._deliver(client, subscribed)
        self._complete_pending(now, stream)
        return stream

    def _new_stream(
        self, key: bytes, state: State, parent: PeerId | None, descriptor: bytes | None
    ) -> Stream:
        """Start carrying (or joining) ``key``."""
        stream = self.streams[key] = new_stream(key, state, parent, descriptor, self.config)
        return stream

    def _change(self, stream: Stream, change: Change, parent: PeerId | None) -> None:
        state = next_state(stream.state, change)
        if state is None:
            del self.streams[stream.key]
            return
        was_root = stream.state is State.ROOT
        stream.state = state
        stream.parent = parent
        if was_root and state is not State.ROOT:
            self.flow.children_changed(stream)  # its clients are shown what it holds
        if change is not Change.JOIN_FAILED:
            stream.join_uid = None

    def _complete_pending(self, now: float, stream: Stream) -> None:
        """Now that we carry ``stream``, answer the searches for it still running through us
        instead of letting them wander on: this coalesces concurrent joins."""
        routes = self.searches.routes
        for uid in self.searches.uids_for(stream.key):
            route = routes[uid]
            if route.upstream is None or self.restarts.may_accept(stream, uid, route.must_beat):
                self.searches.drop_route(route)
                self._answer(now, stream, route, new_root=False)

    def _answer(
        self, now: float, stream: Stream, route: Route, new_root: bool, head_known: bool = True
    ) -> None:
        """Tell whoever asked that the search succeeded, and adopt them as a child."""
        upstream = route.upstream
        if upstream is None or upstream not in self.peers:
            return
        if upstream == stream.parent:
            self._send(upstream, RejectedLoop(route.uid))
            return
        self._adopt(
            now,
            stream,
            upstream,
            route.uid,
            new_root,
            route.last_seen,
            route.must_beat,
            head_known=head_known,
        )

    def _adopt(
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
        if wait and owes and not self.admission.may_catch_up(now, stream, peer, uid, last_seen):
            return
        if (
            wait
            and head_known
            and not new_root
            and last_seen is not None
            and self.refills.serve_later(now, stream, peer, last_seen + 1, None, uid, must_beat)
        ):
            return
        stream.children[peer] = None
        self.keeping.unkeep(stream)
        reply = None if new_root else self.flow.success(uid, stream, last_seen, head_known)
        self._send(peer, reply or SubscribeSucceededNewRoot(uid, stream.key, stream.high))
        after = owed_after(reply, last_seen)
        owed = after != last_seen or not head_known
        own = self.refills.catch_up_later(now, stream, peer, after) if owed else None
        later = own is not None
        if owes and not later:
            self.flow.catch_up(stream, peer, after)
        if not later:
            self.flow.send_mark(stream, peer)  # how far it may show, after its catch-up
        if stream.state is State.RESTARTING:
            # Chaos: a detached node adopted a resubscriber that had seen 19, became root
            # holding nothing, and numbered 10 again.
            stream.claim(last_seen)
        self.flow.reported(now, stream, last_seen)
        self.refills.ask_newcomer(stream, peer, last_seen, own)

    @property
    def routes(self) -> dict[int, Route]:
        """The searches in flight here, by uid (``searches``)."""
        return self.searches.routes

    # --- plumbing -------------------------------------------------------------------------

    def _send(self, peer: PeerId, message: Message) -> None:
        self.out.send(peer, message)

    def _deliver(self, client: ClientId, event: ClientEvent) -> None:
        self.out.deliver(client, event)

    def _flush(self, now: float) -> list[Effect]:
        if self.flow.released:
            self.flow.release_held(now)  # (``credit``: answers made room for held publishes)
        if self.flow.backlogged:
            self.flow.drain(now)  # (``backlog``: a commit may have made room)
        if self.flow.marks_sent or self.flow.marks_due:
            self.flow.tell_marks(now)  # (``showing``: when marks went down, notices due)
        deadline = self._timers.earliest()
        if deadline is not None and deadline != self._announced:
            self.out.append(SetTimer(deadline))
        self._announced = deadline
        return self.out.take()
