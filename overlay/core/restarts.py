"""Restarts: how a subtree that lost its way to the root finds a tree again without a cycle.

Spec, "When something changes": the node that lost its parent (the *origin*) sends
SubscribeRestarted down its subtree and routes a ResubscribeRequest whose must-beat location
is its own; "a node with the stream accepts it only if it is closer to the key than must_beat
and has not seen a SubscribeRestarted with that uid", so the subtree never adopts its own
ancestor. That rule alone leaves three races, each of which can close a cycle:

1. The resubscribe can overtake the SubscribeRestarted it depends on: the one goes down the
   subtree hop by hop, the other takes any route, and a deep member that has not yet heard
   the restart accepts it. So every member **confirms** (RestartConfirmed, once its own
   children have), and the origin routes its request only when the whole subtree has.
2. A member that joins the subtree during the restart never saw the SubscribeRestarted. So
   every SubscribeSucceeded carries the sender's restart *label* (uid, origin location),
   and the new member is labelled from the moment it joins.
3. Two detached subtrees can adopt each other. So a detached member accepts a resubscribe
   only if its own origin is closer to the key than the request's must-beat, the
   requester's origin. Detached subtrees then hang below one another only in strictly
   decreasing distance of their origins, which no cycle can do; the closest origin finds
   an attached tree or becomes the root, and the others end up below it.

A label is dropped (RestartEnded) when its origin is attached again, and replaced (a new
SubscribeRestarted) when the origin attached below another detached subtree. Labels only
ever overstate how far a subtree's true top is from the key, never understate it, so a
stale one refuses more than it must, never less.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import Refills
from overlay.core.stats import NodeStats
from overlay.core.streams import Change, State, Stream
from overlay.core.timers import TimerQueue
from overlay.messages import (
    FillRequest,
    RestartConfirmed,
    RestartEnded,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)

RESTART_TIMER = "restart"


class Restarts:
    """The restarts this node originates or relays (see the module notes): the labels, the
    confirmations, and the restarts (and looks, ``merges``) still waiting for them."""

    __slots__ = (
        "_change",
        "_config",
        "_flow",
        "_fresh_uid",
        "_leave",
        "_linger",
        "_out",
        "_peers",
        "_prune",
        "_refills",
        "_start_own_search",
        "_stats",
        "_streams",
        "_timers",
        "awaiting",
        "location",
    )

    def __init__(
        self,
        location: float,
        config: NodeConfig,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        peers: PeerTable,
        timers: TimerQueue,
        out: Outbox,
        flow: PacketFlow,
        refills: Refills,
        change: Callable[[Stream, Change, PeerId | None], None],
        start_own_search: Callable[[float, Stream, float | None, int | None], None],
        fresh_uid: Callable[[], int],
        leave: Callable[[PeerId, bytes], None],
        linger: Callable[[float, Stream], None],
        prune: Callable[[float, Stream], None],
    ) -> None:
        self.location = location
        self._config = config
        self._stats = stats
        self._streams = streams
        self._peers = peers
        self._timers = timers
        self._out = out
        self._flow = flow
        self._refills = refills
        self._change = change  # (``Membership.change``)
        self._start_own_search = start_own_search  # (``Subscribing.start_own_search``)
        self._fresh_uid = fresh_uid  # (``searches``)
        self._leave = leave  # (``leaving``)
        self._linger = linger  # (``leaving``)
        self._prune = prune  # (``leaving``)
        # Restart (and look) uid -> key, while the subtree confirms: the origin routes the
        # search once it has (or ``confirm_timeout`` passed). Read by ``searches`` too: one
        # uid names one search.
        self.awaiting: dict[int, bytes] = {}
        timers.on(RESTART_TIMER, self.on_restart_timer)

    def hang_from(
        self,
        now: float,
        stream: Stream,
        peer: PeerId,
        reply: SubscribeSucceeded | SubscribeSucceededNewRoot,
        last_seen: int | None,
    ) -> None:
        """Leave our parent for ``peer``, whose success ``reply`` a search routed past us
        brought back, taking our subtree along."""
        old = stream.parent
        success = success_of(reply)
        # ``last_seen`` is the search's, not ours. A member that has processed nothing yet
        # has its own point all the same (its clients' cursors, the start its children were
        # told): it resumes there, never past it, and asks for the rest below. Resuming at
        # the search's point would tell its clients that packets the tree holds were
        # missed.
        own = self._flow.resume_point(stream)
        if own is not None and (last_seen is None or own < last_seen):
            last_seen = own
        self._change(stream, Change.REPARENTED, peer)
        self.take_label(stream, *label_of(reply))
        self._flow.attached(stream, success, last_seen, new_head(reply))
        # ``peer`` may be the old parent itself: the search went up through it (it routed
        # the ancestor's resubscribe on too) before leaving the subtree. Leaving it then
        # orphans us: a child naming a parent that has dropped it, its publishes refused
        # there for ever.
        if old is not None and old != peer and old in self._peers:
            self._leave(old, stream.key)
        head = None if success is None else success.last_packet
        if stream.next_in is not None and head is not None and stream.next_in <= head:
            # The success answered the search's own resume point, not ours: ask for what we
            # lack below the new parent's head, as a child's FillRequest. Otherwise the next
            # packet reaches our subtree as a gap, and it is told those numbers were missed.
            self._out.send(peer, FillRequest(stream.key, stream.next_in, head))
            self._flow.expect_fill(now, stream, stream.next_in, head)
        self._refills.refill(now, stream)

    def child_gone(self, now: float, stream: Stream, peer: PeerId, died: bool = False) -> None:
        del stream.children[peer]
        if stream.catching_up is not None:
            stream.catching_up.discard(peer)
        self._flow.children_changed(stream)  # a root may have nobody left to wait for
        if stream.root.looking is not None:
            stream.root.look_lost = True  # see ``merges``: the look may have missed its subtree
        if died:
            self._linger(now, stream)  # (only if nobody else needs us: ``leaving``)
        if stream.idle:
            self._prune(now, stream)
        elif stream.confirming is not None:
            stream.confirming.discard(peer)
            self._check_confirmed(now, stream)

    def restart(self, now: float, stream: Stream, change: Change) -> None:
        """Become the origin of a restart: label the subtree, and route the resubscribe
        (must beat: our location) once every child has confirmed."""
        self._stats.restarts += 1
        # A root's look running now is over: the restart's label replaces its own. Kept as
        # running, it would end as lost at the grace of the takeover that follows when the
        # restart finds nobody, leaving the look that takeover made due never started, and
        # the root neither looking nor probing again (``merges``).
        stream.root.looking = None
        self._change(stream, change, None)
        self.originate(now, stream, self._fresh_uid())

    def originate(self, now: float, stream: Stream, uid: int) -> None:
        """Label our subtree with restart ``uid`` (a restart's, or a look's: ``merges``) as
        its origin, and route the search once every child has confirmed, or
        ``confirm_timeout`` passed."""
        self._label(stream, uid, self.location)
        self.awaiting[uid] = stream.key
        if stream.confirming:
            self._timers.add(now + self._config.confirm_timeout, (RESTART_TIMER, uid, 0))
        else:
            self._route_restart(now, stream)

    def _route_restart(self, now: float, stream: Stream) -> None:
        uid = stream.restart_uid
        assert uid is not None
        del self.awaiting[uid]
        stream.confirming = None
        self._start_own_search(now, stream, self.location, uid)

    def _label(self, stream: Stream, uid: int, origin: float) -> None:
        """Take restart ``uid`` as our subtree's label and pass it to every child, each of
        which confirms once its own subtree has."""
        stream.restart_uid = uid
        stream.restart_origin = origin
        stream.restarts_seen.append(uid)
        stream.confirming = set(stream.children)
        # What we hold, and what we claimed before, stay claimed: a member that told us of
        # newer packets may have moved away since, and then only our claim still says that
        # the tree had them. A claim too high only leaves numbers unused; one forgotten
        # lets a root we become give those numbers again. Kept within one window of our
        # own head, so a stale or false claim cannot make every later takeover skip more.
        kept = stream.subtree_high
        stream.subtree_high = stream.high
        if kept is not None:
            held = -1 if stream.high is None else stream.high
            head = max(held, -1 if stream.next_in is None else stream.next_in - 1)
            stream.claim(min(kept, head + self._config.window_packets))
        message = SubscribeRestarted(uid, stream.key, origin)
        for child in stream.children:
            self._out.send(child, message)

    def take_label(self, stream: Stream, uid: int | None, origin: float | None) -> None:
        """We hang from a new parent (or are the root now) whose label is ``uid``/``origin``:
        our subtree takes it, or drops ours if the new parent is attached."""
        old = stream.restart_uid
        if uid is None or origin is None:
            stream.restart_uid = stream.restart_origin = None
            stream.confirming = None
            if old is not None:
                for child in stream.children:
                    self._out.send(child, RestartEnded(old, stream.key))
        elif uid != old:
            self._label(stream, uid, origin)

    def on_restarted(self, now: float, peer: PeerId, message: SubscribeRestarted) -> None:
        """Relay a restart (or a new label) from our parent down the subtree, and confirm
        it once the subtree has. A uid seen before is not relayed again: should parent
        links ever close a cycle, restarts would otherwise chase each other round it for
        ever. It is confirmed at once, unless it is our label and our subtree has not yet
        confirmed it: then the confirmation follows once it has. Answering the repeat
        early would tell the origin our subtree is labelled while a deep member still is
        not, and its search could then be accepted there: a look that joins a member of its
        own tree closes a cycle with no root."""
        key = message.key
        stream = self._streams.get(key)
        if stream is None or stream.parent != peer or not stream.carried:
            # Not our parent: the sender must not wait for us, nor keep us as a child.
            self._out.send(peer, RestartConfirmed(message.uid, key))
            self._leave(peer, key)
            return
        if message.uid in stream.restarts_seen:
            if message.uid != stream.restart_uid or not stream.confirming:
                self._out.send(peer, RestartConfirmed(message.uid, key, stream.subtree_high))
            return
        self._label(stream, message.uid, message.origin)
        self._check_confirmed(now, stream)

    def on_restart_confirmed(self, now: float, peer: PeerId, message: RestartConfirmed) -> None:
        stream = self._streams.get(message.key)
        if (
            stream is not None
            and stream.restart_uid == message.uid
            and stream.confirming is not None
            and peer in stream.confirming
        ):
            stream.confirming.discard(peer)
            # Passed up with our own confirmation: an origin whose own search makes it root
            # numbers above what its subtree holds: an origin lagging behind its subtree
            # would otherwise number again packets its subtree already holds.
            stream.claim(message.last_seen)
            self._check_confirmed(now, stream)

    def _check_confirmed(self, now: float, stream: Stream) -> None:
        """Once no child is left to confirm: the origin routes its resubscribe; any other
        member confirms to its parent."""
        if stream.confirming is None or stream.confirming:
            return
        stream.confirming = None
        uid = stream.restart_uid
        if uid is None:
            return
        if self.awaiting.get(uid) == stream.key and (
            stream.state is State.RESTARTING or stream.root.looking == uid
        ):
            self._route_restart(now, stream)
        elif stream.parent is not None:
            self._out.send(stream.parent, RestartConfirmed(uid, stream.key, stream.subtree_high))

    def on_restart_ended(self, now: float, peer: PeerId, uid: int, key: bytes) -> None:
        """Our subtree's origin is attached again: relay that down and drop the label; our
        waiters' clocks, stood still meanwhile (``refills``), start again."""
        stream = self._streams.get(key)
        if stream is None or stream.parent != peer or stream.restart_uid != uid:
            return
        stream.restart_uid = stream.restart_origin = None
        stream.confirming = None
        for child in stream.children:
            self._out.send(child, RestartEnded(uid, key))
        self._refills.restart_fill_clocks(now, stream)

    def on_restart_timer(self, now: float, uid: int, attempt: int) -> None:
        """Some member has not confirmed within ``confirm_timeout``: route anyway; a tree
        that never reattached is worse than the small risk a slow member brings."""
        key = self.awaiting.get(uid)
        if key is None:
            return
        stream = self._streams.get(key)
        if (
            stream is None
            or stream.restart_uid != uid
            or (stream.state is not State.RESTARTING and stream.root.looking != uid)
        ):
            del self.awaiting[uid]  # the stream is gone, or moved on to a newer restart
            return
        self._stats.confirm_timeouts += 1
        self._route_restart(now, stream)


def success_of(
    reply: SubscribeSucceeded | SubscribeSucceededNewRoot | None,
) -> SubscribeSucceeded | None:
    """The success that tells its receiver the tree's head (None: a new root's, empty)."""
    return reply if isinstance(reply, SubscribeSucceeded) else None


def new_head(reply: SubscribeSucceeded | SubscribeSucceededNewRoot | None) -> int | None:
    """Where a new root's numbering goes on from (None: a new stream, or not a new root's)."""
    return reply.last_packet if isinstance(reply, SubscribeSucceededNewRoot) else None


def label_of(
    reply: SubscribeSucceeded | SubscribeSucceededNewRoot | None,
) -> tuple[int | None, float | None]:
    """The restart label a success hands its receiver (a new root's tree is attached)."""
    if isinstance(reply, SubscribeSucceeded):
        return reply.restart, reply.origin
    return None, None
