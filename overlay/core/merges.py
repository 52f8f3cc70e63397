"""Looking again: a root that took over a tree checks that no other tree of its stream exists
before it numbers anything, and joins that tree if one does. One tree per stream.

Why. When a root dies, each of its orphaned subtrees restarts at once and routes a
resubscribe. Two of them can miss each other: one's search passes the other while that one
is detached and refuses it (``restarts``, race 3), or has not yet joined anything, or spends
its HTL inside its own labelled subtree; both end as root of a split tree, even when the
two roots are each other's peers. Nothing in the spec merges them afterwards.

How. A takeover already holds numbering for ``takeover_grace`` (``publishing``, "Taking
over"). When the grace ends, before numbering anything, the root *looks again*: it repeats
its restart search, labelling its subtree (SubscribeRestarted, confirmations) and routing a
ResubscribeRequest with must-beat its own location, while staying root and holding numbers
for as long as the search runs. By then the other restarts have settled, so the search meets
any other tree that routing can reach:

* Found: a node closer to the key than us, outside our subtree (the label keeps our own
  members from accepting), took us as its child. We join its tree with our whole subtree
  (ROOT -> JOINED, ``Change.MERGED``), exactly as a restarting node attaches: what we hold
  beyond the new parent's head goes up to its root with the original uids and numbers
  (``push_up``), and the publishes that waited for our grace go up to be numbered there.
* Not found: we stay root; the labels end (RestartEnded), and so does the grace.

A new tree looks too, at once and before it numbers anything (``Merges.first_look``): the
search that made its root may have lost a branch to a dead link. A look, like a probe,
starts with a wider budget than a subscribe (``NodeConfig.check_htl``).

A look joins only through a node closer to the key than its root (must-beat; Spec: "If we
have the key, and our location is closer to the target key than the must-beat location, we
send a SubscribeSucceeded"); while two
roots look at once, the members of each carry its label and accept only the search of a root
farther than their own (``restarts``), so the two never join each other. A root looks once
per takeover: a look that finds nothing is not repeated, so a root with a closer member of
its own tree (which the label makes refuse) does not flap. Except, at most ``RELOOKS`` times
each, with a fresh uid:

* A child that leaves while the look runs takes away a subtree that carries the look's label
  and so refused it, and a closer member of that subtree may become a root of its own
  meanwhile, which the closer root's look, routing toward the key, never finds.
* A look that a closer peer outside our tree (not our child) may have refused: that peer can
  be in another tree whose root looked at the same moment, and whose label refused us, while
  its own look missed us (typically two roots that took over from one dead root). Our labels
  come off, and we look again after a random pause of up to a heartbeat interval, so that
  the two looks part. A root whose closer peer is in its own tree pays these extra looks,
  holding numbering meanwhile, whenever a look after a takeover, a lost child or a new
  tree's start finds nothing (a probe round's look, ``probes``, is not repeated).
* A look whose search was lost beyond a broken link (DataNotFound ``lost``): a relay whose
  next hop dropped its link before answering cannot tell "nothing there" from "found, and
  the answer died with the link". Looked again the same way, after the same pause.
* A look that a member of another tree refused only for its label (closer than our
  location, or that tree's root, which takes any look once its own is over, but detached
  or looking under an origin no closer than ours: ``restarts``, race 3), which also comes
  back ``lost``. That tree's root is looking at the same moment, and its own look, which
  our members would take, may miss us: two roots that took over from one dead root look
  at about the same time, each look is spent in the other's labelled tree or its own, and
  both number the same packets. After the pause its labels are off, and our look joins
  its tree. It costs a root whose look meets a restarting or looking subtree one more
  look, numbering held meanwhile.

As for the first case, a root that loses a child to death or restart at any time (not by
Unsubscribe) holds numbering for a grace and looks, as after a takeover: the subtree's new
top, if closer, is then still in its own takeover grace, so it has numbered nothing either.

Numbering across a merge. Neither root has numbered a packet since its takeover when it
looks, so both trees still share the dead root's numbering: a merge never puts two packets
under one number. Packets the old root numbered that only the joining side holds reach the
other side through ``push_up`` under their own numbers, and publishers' acks from the old
root keep their meaning. (A split that outlives a takeover's look, two sides of a partition
each numbering under its own root, is not merged here but by the roots' probes:
``probes``.)
"""

from __future__ import annotations

import random
from collections.abc import Callable

from overlay.core.child_drops import ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.refills import Refills
from overlay.core.restarts import Restarts
from overlay.core.routing import Route
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.core.takeover import RECOVER_TIMER
from overlay.core.timers import TimerQueue

# Looks one takeover may repeat because a child left while one ran: a few cover a
# subtree that came off mid-look; more would hold numbering for as long as churn goes on.
RELOOKS = 3


class Merges:
    """A root's looks for another tree of its stream (see the module notes), and the end of
    its grace (``RECOVER_TIMER``), which a look may hold on."""

    __slots__ = (
        "_child_drops",
        "_closer_stranger",
        "_config",
        "_flow",
        "_fresh_uid",
        "_peers",
        "_probe_after_look",
        "_refills",
        "_restarts",
        "_rng",
        "_routes",
        "_stats",
        "_streams",
        "_timers",
        "location",
    )

    def __init__(
        self,
        location: float,
        config: NodeConfig,
        rng: random.Random,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        routes: dict[int, Route],
        peers: PeerTable,
        timers: TimerQueue,
        flow: PacketFlow,
        child_drops: ChildDrops,
        restarts: Restarts,
        refills: Refills,
        fresh_uid: Callable[[], int],
        closer_stranger: Callable[[Stream], bool],
        probe_after_look: Callable[[float, Stream], None],
    ) -> None:
        self.location = location
        self._config = config
        self._rng = rng
        self._stats = stats
        self._streams = streams
        self._routes = routes  # our searches and those we relay (``searches``)
        self._peers = peers
        self._timers = timers
        self._flow = flow
        self._child_drops = child_drops
        self._restarts = restarts
        self._refills = refills
        self._fresh_uid = fresh_uid  # (``searches``)
        self._closer_stranger = closer_stranger  # (``probes``)
        self._probe_after_look = probe_after_look  # (``probes``)
        timers.on(RECOVER_TIMER, self.on_recover_timer)

    def on_recover_timer(self, now: float, token: int, again: int) -> None:
        """A root's takeover grace ended (``takeover``), unless a look runs first; the
        children waiting on its stream are served if they can be now (``refills``)."""
        if not self._look_first(now, token):
            key = self._flow.takeover.recovering.get(token)
            self._flow.on_recover_timer(now, token, again)
            self._refills.served(now, key)

    def _look_first(self, now: float, token: int) -> bool:
        """A root's takeover grace (timer ``token``) may be over: look again before it ends.
        True: the grace goes on (a look started, or one is still running)."""
        key = self._flow.takeover.recovering.get(token)
        stream = None if key is None else self._streams.get(key)
        if (
            stream is None
            or stream.state is not State.ROOT
            or stream.root.recover_token != token
            or stream.root.recover_until is None
            or now < stream.root.recover_until
        ):
            return False
        if stream.root.looking is not None:
            if stream.root.looking in self._restarts.awaiting or stream.join_uid in self._routes:
                self._hold_numbers(now, stream)  # the search is still out
                return True
            # Neither confirming nor searching: the search ended on a path that did not
            # report back. It found nothing; waiting on would hold numbering for ever.
            self._stats.lost_looks += 1
            self.looked(now, stream)
            return True
        if not stream.root.look_due or stream.restart_uid is not None:
            return False
        stream.root.look_due = False
        self.start_look(now, stream)
        return True

    def first_look(self, now: float, stream: Stream, route: Route) -> None:
        """A new tree (``route``, a subscribe, made us its root) looks for another of its
        stream before it numbers anything, at once: there is no old tree to report in a
        grace (a resubscribe that makes us root brings one: a takeover, which has its
        grace and then looks; ``Takeover.became_root``). The search that ended here may
        have lost a branch that reached a closer root (a link cut while the search waited
        beyond it), leaving two roots that number the same packets. Called once whoever
        asked is adopted, so that the look's label reaches it too: unlabelled, that child
        would refuse the look's success on its way back through it. A node with no peer is
        the whole network (``searches``): there is nowhere to look."""
        if not route.is_resubscribe and self._peers and not stream.root.look_due:
            # (look_due: a root that took a remembered claim, ``Takeover.became_root``, has a
            # grace for its subtree to push up the claimed numbers first, and looks after it)
            self._flow.reserve(stream)
            self.start_look(now, stream)

    def start_look(self, now: float, stream: Stream, trail: int | None = None) -> None:
        """Label our subtree with a fresh uid and route the look's search, along ``trail``
        (or the one a crossing left, ``crossed``) if any: the key under which the relays
        of a probe, its answer or another look noted their way (``probes``). The uid is
        fresh whatever the trail: two roots that one search crossed follow the same trail,
        and a uid that names a search here already, or that members keep as a label seen,
        would not label them again (``Restarts.on_restarted``), leaving members below them
        free to take the look's own search: a cycle with no root."""
        stream.root.look_lost = False
        self._stats.looks += 1
        if trail is None:
            trail, stream.root.crossed = stream.root.crossed, None
        stream.root.look_trail = trail
        uid = self._fresh_uid()
        stream.root.looking = uid
        self._hold_numbers(now, stream)
        self._restarts.originate(now, stream, uid)

    def lost_child(self, now: float, stream: Stream, peer: PeerId, at_once: bool) -> None:
        """A child of ``stream`` died or restarted. At a root, its subtree is coming off,
        and a member closer to the key than us may become a root of its own, whose look,
        routing toward the key, will not find us: so we hold numbering for a grace and look,
        as after a takeover; otherwise two roots number the same packets. A link that
        closed (``at_once``) closed for the subtree's top at the same moment, and its
        restart is a few round trips: the grace is ``lost_child_grace``. A child lost to
        silence may be noticed by its subtree a heartbeat interval later than by us: the
        whole ``takeover_grace``. The hold counts against ``peer`` (``child_drops``), and
        so does a drop while a hold or look is on already: it makes the look run again
        (``look_lost``), so a peer dropping its link faster than a look ends would hold the
        stream without ever being counted."""
        if stream.state is not State.ROOT:
            return
        self._child_drops.dropped(now, peer)
        if stream.root.looking is None and not stream.root.look_due:
            stream.root.look_due = True
            stream.root.relooks = 0
            config = self._config
            grace = config.takeover_grace
            if at_once:
                grace = min(grace, config.lost_child_grace)
            self._flow.hold(now, stream, grace)

    def _hold_numbers(self, now: float, stream: Stream) -> None:
        """Keep the grace on while a look's search runs (it ends sooner, one way or the
        other: ``looked`` or ``merged``)."""
        stream.root.recover_until = now + self._config.request_timeout
        self._timers.add(stream.root.recover_until, (RECOVER_TIMER, stream.root.recover_token, 0))

    def looked(self, now: float, stream: Stream, lost: bool = False) -> None:
        """The look found no other tree: stay root, end the labels and the grace; or, if
        a child left while it ran, a closer peer outside our tree may have refused it, or
        its search was ``lost`` beyond a link that broke, look once more (up to
        ``RELOOKS`` times)."""
        stream.root.looking = stream.join_uid = None
        if stream.root.crossed is not None and stream.state is State.ROOT:
            # A closer root's probe crossed us while this look ran: follow its way back
            # (``probes``), whatever this look missed.
            self.start_look(now, stream)
            return
        if stream.root.look_lost and stream.root.relooks < RELOOKS and stream.state is State.ROOT:
            # The child took away a subtree carrying this look's label, which refused the
            # search: a closer member of it may since have become a root, and a fresh uid
            # is one it will accept. Otherwise two roots both number from the same point.
            stream.root.relooks += 1
            self.start_look(now, stream)
            return
        self._restarts.take_label(stream, None, None)
        stranger = stream.state is State.ROOT and (lost or self._closer_stranger(stream))
        if stranger and stream.root.relooks < RELOOKS:
            # See the module notes: two roots that look together can miss each other and
            # number the same packets. Our labels are off now, so the other root's look can
            # reach us. A search lost beyond a broken link may have found a closer root
            # whose success died with the link: the pause lets it redial.
            stream.root.relooks += 1
            stream.root.look_due = True
            stream.root.recover_until = now + self._rng.uniform(
                0.0, self._config.heartbeat_interval
            )
            self._timers.add(
                stream.root.recover_until, (RECOVER_TIMER, stream.root.recover_token, 0)
            )
            return
        stream.root.recover_until = now
        self._flow.on_recover_timer(now, stream.root.recover_token)
        self._probe_after_look(now, stream)

    def merged(self, stream: Stream) -> None:
        """The look found another tree and we are about to join it: no longer a root, so
        the grace is over (the caller attaches us, ``Change.MERGED``)."""
        self._stats.merges += 1
        stream.root.probe_misses = stream.root.cross_misses = 0
        stream.root.crossed = None
        stream.root.looking = None
        stream.root.recover_until = None
