"""Probing: a root asks, now and then, whether a closer root of its stream exists, and
merges its tree into that one's if so. One tree per stream, whatever happened before.

Why. A takeover's look (``merges``) runs once, right after the takeover. A split that
outlives it stays: two sides of a partition each make a root, and when the partition heals
nothing else brings them together; the same holds for a node cut off alone, which becomes
the root of a tree of one. So a root checks, periodically and cheaply.

How. Every ``probe_interval`` (in whole heartbeat rounds, so no timer of its own) a root
that is not in the middle of a repair routes a RootProbe toward its key, by the rules of a
search (``routing``): greedy, the HTL rule, and backtracking to the next-closest peer when
the way below one ends (ProbeAnswer with no root carries the budget left, as DataNotFound
does). A root closer to the key than the asker answers it (ProbeAnswer with its location),
settled or in a repair (a look of its own may miss the asker's tree, say when a partition
heals while the closer root looks, and both roots would go on numbering); every other node
passes it on, tree member or not, keeping only what backtracking needs, for at most
``_PATHS`` probes at once. A node that sees the same probe twice answers "none" with the
budget it got (as RejectedLoop does). Backtracking matters: a root is often a local minimum
of greedy routing, and a node that joined late may hang off the graph by a link or two,
which a single greedy path misses, so that two roots never find each other.
Besides its rounds, a root probes when a new link comes up after a lost one
(``probe_new_links``) and when a look of its finds no other tree (``probe_after_look``).

A root with a peer closer to the key that is not its child looks at its probe round instead
of probing: greedy routing from that peer would not end at us, and it may hang in another
tree whose root is *farther* than we are, which our probes never meet (as with two roots
that took over from one dead root, each with members closer than either). Its look,
must-beat our location, is accepted there, and our tree joins that one. A look that finds
nothing counts as a miss, as below.

Only a strictly closer root answers a probe, so of two roots only the farther one learns of
the other, and it alone acts: it *looks*, exactly as after a takeover (``merges``): it labels
its subtree, holds numbering while the search runs and routes a ResubscribeRequest with
must-beat its own location, which members of the other tree accept and its own refuse; its
tree then joins the closer one's with its whole subtree.

Trails. A farther root also learns of a closer one when the closer one's probe crosses it:
the probe's must-beat is that root's location. Then it looks too, at once if settled, or as
its next look if in a repair (as often as the backoff below allows). A closer origin's look
(a ResubscribeRequest, must-beat its origin's location) that a looking root passes on, its
label refusing it, is news of the same kind and makes the root's next look follow it back:
two roots that took over from one dead root look in step, each look refused in the other's
labelled tree, and the farther root's own looks stay in its tree when that tree holds the
nodes closest to the key; the closer origin takes the look even while it looks itself
(``restarts``, race 3). Either way the look follows
the path it learned rather than greedy order, since greedy order from a farther root often
leads into its own tree, whose members refuse the look and use up its budget (a root
beside a closer one across the 0/1 wrap, or one whose only closer peer is its own member,
would look in vain indefinitely). Every node that relays a probe or a resubscribe notes the
peer it came from under a key derived from its uid (``back_trail``), and every node that
relays a found root's answer notes the peer it came from under another (``ahead_trail``). A
look names that key (ResubscribeRequest ``trail``) beside a fresh uid of its own, and each
of its hops tries the noted peer first (``Probes.first_hop``; a member of another tree sends
it up that tree before that), then greedy order: back to the closer root that crossed it,
or on to the closer root that answered. Hops along a trail spend ``TRAIL_HTL`` rather than
a look's budget, and a relay on it tries no other peer (``Searches.forward``). The uid is
fresh because two roots that one search crossed follow the same trail, and a uid used twice
would not label anew the members that saw it first (``restarts``), whose subtrees could
then take the look: a cycle. Without a trail, a root's look tries first its closest peer
that is closer than itself and not its child.

A probe itself changes nothing, so a lying answer or a forged crossing costs one look, and
a look that misses backs off the next: crossing looks come at most once per probe interval,
doubled for each miss up to 32 intervals, and never with probes off. That interval runs from
the last look a probe made on news of a closer root (a crossing, an answer), not from a look
past a closer peer, which is only a guess. A look holds
numbering while it runs (up to ``request_timeout`` if a hop accepts it and goes silent). A
flood of probes costs what a flood of searches does, with no state kept beyond ``_PATHS``
probes and ``_PATHS`` trails. Two farther roots crossed by one probe follow one trail, each
look under a uid of its own.

Numbering. A split on whose two sides publishers publish gives two packets one number; a
probe merges the trees but cannot undo that (see the README). With publishers on one side
only, the other side's root numbers nothing, and the merge is lossless.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from keyspace.location import is_closer, key_location
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.merges import RELOOKS
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.recent import RecentIds
from overlay.core.routing import Route, advance
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.messages import ProbeAnswer, RootProbe

# Probes in flight through one node whose state it keeps; the oldest is forgotten past this
# (its answer is then dropped here, and its root simply probes again next time).
_PATHS = 1024


def back_trail(uid: int) -> int:
    """The key under which the relays of search ``uid`` (a probe or a resubscribe) note
    the peer it came from: a look that follows it back toward the root or restart origin
    that sent it names this key (ResubscribeRequest ``trail``). Derived one way, so that no
    peer can pick a search's uid to make its trail overwrite another's."""
    return _derived(uid, b"back")


def ahead_trail(uid: int) -> int:
    """The key under which the relays of a probe's answer note the peer it came from: a
    look that follows it on toward the closer root that answered names this key."""
    return _derived(uid, b"ahead")


def _derived(uid: int, tag: bytes) -> int:
    digest = hashlib.blake2b(uid.to_bytes(8, "big") + tag, digest_size=8).digest()
    return int.from_bytes(digest, "big")


# A root whose looks keep failing to reach a closer root its probes find probes at most
# this many doublings of ``probe_interval`` apart (32 rounds: 16 minutes by default).
_MAX_BACKOFF = 5


@dataclass(slots=True)
class ProbeHop:
    """One probe passing through this node: where it came from (None: ours) and what
    backtracking needs."""

    probe: RootProbe  # as we send it on: our budget and best location
    upstream: PeerId | None
    tried: set[PeerId] = field(default_factory=set)
    current: PeerId | None = None


class Probes:
    """The root probes passing through this node, the trails looks follow, and whether a
    link was ever lost."""

    __slots__ = (
        "_config",
        "_flow",
        "_out",
        "_peers",
        "_probes",
        "_rng",
        "_seen",
        "_start_look",
        "_stats",
        "_streams",
        "location",
        "lost_a_link",
        "trails",
    )

    def __init__(
        self,
        location: float,
        config: NodeConfig,
        rng: random.Random,
        stats: NodeStats,
        peers: PeerTable,
        streams: dict[bytes, Stream],
        out: Outbox,
        flow: PacketFlow,
        seen: RecentIds,  # uids seen lately, for loops (shared with ``searches``)
        start_look: Callable[[float, Stream, int | None], None],  # (``merges``)
    ) -> None:
        self.location = location
        self._config = config
        self._rng = rng
        self._stats = stats
        self._peers = peers
        self._streams = streams
        self._out = out
        self._flow = flow
        self._seen = seen
        self._start_look = start_look
        self._probes: OrderedDict[int, ProbeHop] = OrderedDict()  # root probes via us
        self.trails: OrderedDict[int, PeerId] = OrderedDict()  # looks' first hops
        self.lost_a_link = False  # whether a peer ever went away (``probe_new_links``)

    @property
    def in_flight(self) -> int:
        """How many probes through this node it keeps state for (at most ``_PATHS``)."""
        return len(self._probes)

    def trail_hop(self, route: Route) -> PeerId | None:
        """The peer the trail a look follows names here, if it names one."""
        return None if route.trail is None else self.trails.get(route.trail)

    def first_hop(self, route: Route) -> PeerId | None:
        """Where a look goes before greedy order: the peer the trail it follows names here,
        or, for a root's own look without one, the closest peer closer than the root that
        is not its child (greedy order would go into its own tree)."""
        hop = self.trail_hop(route)
        if hop is not None or route.upstream is not None:
            return hop
        stream = self._streams.get(route.key)
        if stream is None or stream.state is not State.ROOT:
            return None
        return self._closest_stranger(stream)

    def probe_roots(self, now: float, beats: int) -> None:
        """Called once per heartbeat round (``beats``: rounds so far): every
        ``probe_interval``, probe from each root that is settled (no takeover grace, look
        or restart running)."""
        interval = self._config.probe_interval
        every = max(1, round(interval / self._config.heartbeat_interval))
        if interval <= 0 or beats % every:
            return
        round_ = beats // every
        for stream in list(self._streams.values()):
            if not _settled_root(stream) or round_ % (1 << stream.root.probe_misses):
                continue
            if self.closer_stranger(stream):
                self._look_past(now, stream)
            else:
                self._probe(now, stream)

    def closer_stranger(self, stream: Stream) -> bool:
        """Whether a peer that is not our child is closer to the key than we are. Greedy
        routing from it would not end here: it may be a member of another tree of the
        stream, whose root is farther than we are and so never answers our probe (two
        roots that took over from one dead root, each with members closer than either,
        would otherwise never meet)."""
        return self._closest_stranger(stream) is not None

    def _closest_stranger(self, stream: Stream) -> PeerId | None:
        """The peer closest to the key among those closer than we are that are not our
        children, if any: where a root's look goes first (``first_hop``)."""
        target = stream.target
        best: PeerId | None = None
        best_loc = self.location
        for peer in self._peers:
            if peer.id not in stream.children and is_closer(target, peer.location, best_loc):
                best, best_loc = peer.id, peer.location
        return best

    def _look_past(self, now: float, stream: Stream) -> None:
        """Look (``merges``) instead of probing: its search, must-beat our location, goes
        to that closer peer, which accepts it if it is in another tree, and our tree joins
        that one. If it is in ours (the look's label makes it refuse) the look finds
        nothing, and counts as a miss, so the next comes half as often. Not repeated when
        it finds nothing (``merges``): no other root looks at the same moment as a rule,
        and a root whose closer peer is in its own tree would hold its numbering for every
        repeat, each probe round."""
        self._probe_look(now, stream, relooks=RELOOKS, found=False)

    def _probe_look(
        self,
        now: float,
        stream: Stream,
        relooks: int,
        trail: int | None = None,
        found: bool = True,
    ) -> None:
        """Look for another tree, holding numbering while the search runs; ``relooks``: the
        repeats already spent (``merges``); ``trail``: a probe's trail to follow, if any;
        ``found``: a probe showed a closer root (not a guess from a closer peer). Counted
        as a miss until the look merges (``Merges.merged`` clears it), so a look that
        cannot reach the other tree is not made every round."""
        stream.root.relooks = relooks
        _count_look(now, stream, found)
        self._flow.hold(now, stream)
        self._start_look(now, stream, trail)

    def _trail(self, trail: int, peer: PeerId) -> None:
        """Remember ``peer`` as the first hop of a look that follows ``trail``
        (``first_hop`` prefers it), for at most ``_PATHS`` trails."""
        self.trails[trail] = peer
        self.trails.move_to_end(trail)
        if len(self.trails) > _PATHS:
            self.trails.popitem(last=False)

    def probe_new_links(self, now: float) -> None:
        """A peer we had no link to says Hello, and we have lost links before: probe from
        each settled root now, not at the next round. A partition that heals comes back
        this way, and until a probe's look merges the other side's root, both roots number
        publishes: waiting for the next round would leave a whole probe interval of
        packets numbered twice. At most one such probe per heartbeat
        interval per root, and none from a root whose looks keep failing to reach the
        closer one (``probe_misses``), so link churn cannot multiply them. A node that
        never lost a link is still growing its first links, which cut nothing apart."""
        if not self.lost_a_link:
            return
        for stream in self._streams.values():
            if (
                _settled_root(stream)
                and not stream.root.probe_misses
                and (
                    stream.root.probed_at is None
                    or now - stream.root.probed_at >= self._config.heartbeat_interval
                )
            ):
                self._probe(now, stream)

    def probe_after_look(self, now: float, stream: Stream) -> None:
        """A root's look found no other tree and its grace is over: probe now, not at the
        next round. The look can only reach a closer root; a farther one beside us numbers
        on unless it learns of us, and our probe tells it if it crosses it (a trail). So a
        root that took over while a partition healed, after the other side's root probed on
        the new links and found nobody, meets it now rather than a probe interval later,
        while both number the same packets. Not with probes off or backing off, nor from a
        root with a closer peer outside its tree, whose rounds look instead (``probe_roots``)
        and whose looks past that peer have just run out. At most one a heartbeat interval,
        so link churn that makes looks cannot multiply probes; kept apart from the probes
        on new links (``probed_at``), which one sent just before a partition heals must not
        silence."""
        last = stream.root.looked_probe_at
        if (
            self._config.probe_interval > 0
            and _settled_root(stream)
            and not stream.root.probe_misses
            and not self.closer_stranger(stream)
            and (last is None or now - last >= self._config.heartbeat_interval)
        ):
            stream.root.looked_probe_at = now
            self._probe(now, stream, on_link=False)

    def _probe(self, now: float, stream: Stream, on_link: bool = True) -> None:
        """Send a probe from ``stream``'s root; ``on_link``: it counts toward the probes on
        new links' limit (``probe_new_links``)."""
        uid = self._rng.getrandbits(64)
        self._seen.add(uid, now)
        self._stats.probes += 1
        if on_link:
            stream.root.probed_at = now
        location = self.location
        probe = RootProbe(uid, stream.key, self._config.check_htl, location, location)
        self._probe_on(ProbeHop(probe, None))

    def on_probe(self, now: float, peer: PeerId, probe: RootProbe) -> None:
        stream = self._streams.get(probe.key)
        location = self.location
        if (
            stream is not None
            and stream.state is State.ROOT
            and is_closer(stream.target, location, probe.must_beat)
        ):
            self._out.send(peer, ProbeAnswer(probe.uid, probe.key, location, 0))
            return
        if self._seen.contains(probe.uid, now):
            # A loop: the sender tries its next peer with the same budget.
            self._out.send(peer, ProbeAnswer(probe.uid, probe.key, None, probe.htl))
            return
        self._seen.add(probe.uid, now)
        self._trail(back_trail(probe.uid), peer)
        # Progress resets a probe to the budget it started with, not a subscribe's: the
        # closest node may sit in the other tree, with the closer root more than max_htl
        # hops past it when churn has taken that root's ring links; reset to max_htl, the
        # probe would run out short of that root every round.
        best_loc, htl, _ = advance(
            location,
            key_location(probe.key),
            probe.best_loc,
            probe.htl,
            self._config.check_htl,
            self._config.check_htl,
        )
        onward = RootProbe(probe.uid, probe.key, htl, best_loc, probe.must_beat)
        self._probe_on(ProbeHop(onward, peer, {peer}))
        if stream is not None:
            self._crossed(now, stream, probe.must_beat, back_trail(probe.uid))

    def on_look_relayed(
        self, now: float, peer: PeerId, uid: int, key: bytes, must_beat: float
    ) -> None:
        """A ResubscribeRequest from ``peer`` (a restart's, or a root's look, must-beat its
        origin's location) goes on from here, past our copy of its stream if we have one:
        note the way back to its origin, as for a probe, and if we are a root farther from
        the key than that origin, look that way (``_crossed``). Two roots that took over
        from one dead root look at about the same moments: each look passes through the
        other tree while its label refuses it, the farther root's own looks, routed toward
        the key, stay inside its own tree (which holds the nodes closest to the key), and
        after their repeats both number the same packets. The closer origin accepts the
        farther root's look even while it looks itself (``restarts``, race 3)."""
        back = back_trail(uid)
        self._trail(back, peer)
        stream = self._streams.get(key)
        if stream is not None and self._crossed(now, stream, must_beat, back, probe=False):
            self._stats.looks_crossed += 1

    def _crossed(
        self, now: float, stream: Stream, origin: float, back: int, probe: bool = True
    ) -> bool:
        """A search from a root or restart origin at ``origin`` (a ``probe``, or a look)
        passed through us, and ``back`` names its trail back there. If we are a root
        farther from the key than that origin, it exists, and the way to it is that trail:
        our own probes would never learn of it (only a closer root answers), and our looks,
        routed toward the key, may spend their budget inside our own tree, refused by our
        own members every round. A root in a repair makes its next look this one
        (``Merges.start_look``, ``Merges.looked``; in a grace with no look due, one becomes
        due): a look already running may miss the other tree (a partition that heals while
        a root made on its far side looks), and both would number. True: we look that way.

        A crossing counts as a miss until the look merges, and each miss doubles the time
        before the next crossing counts (a probe interval, doubled for each miss), so
        forged crossings buy looks ever more rarely, and never with probes off. A probe's
        counts toward the probe backoff (``_may_trail``); a look's toward one of its own
        (``_may_cross``), and as one of the repair's repeated looks (``RELOOKS``,
        ``merges``), so that an honest restart's crossing whose look then misses (its
        origin joined our tree meanwhile) does not hold back the probes a healed partition
        needs (``probe_new_links``, ``probe_after_look``). A look's crossing counts only
        in a repair: at a settled root an honest one never comes (a root takes any
        resubscribe, unless its uid is one of our old labels, which a peer can replay). A
        hostile peer that forges one while we look, and is the first hop of the look it
        brings on (its trail leads there), holds our numbering for that look's
        ``request_timeout``: as often as this backoff allows, whatever repairs it brings
        on by dropping its link; a takeover starts the backoff again
        (``Takeover.became_root``)."""
        interval = self._config.probe_interval
        if (
            stream.state is not State.ROOT
            or not is_closer(stream.target, origin, self.location)
            or (not probe and _settled_root(stream))
            or not (
                _may_trail(now, stream, interval) if probe else _may_cross(now, stream, interval)
            )
        ):
            return False
        self._stats.splits_found += 1
        if _settled_root(stream):
            self._probe_look(now, stream, relooks=0, trail=back)
            return True
        if probe:
            _count_look(now, stream)
        else:
            stream.root.crossed_at = now
            stream.root.cross_misses = min(stream.root.cross_misses + 1, _MAX_BACKOFF)
            stream.root.relooks += 1
        stream.root.crossed = back
        if stream.root.looking is None and stream.root.recover_until is not None:
            stream.root.look_due = True  # looked at the grace's end (``merges``)
        return True

    def lost_peer(self, peer: PeerId) -> None:
        """``peer`` is gone: every probe waiting on its answer backtracks past it, as a
        search does (``Searches.lost_peer``). Otherwise a probe sent to a peer that had
        died unnoticed (a root probes on each new link, and a partition that heals brings
        new links while the dead are still being noticed) would be lost there, and two
        roots would number side by side until the next probe round. A probe that came
        from ``peer`` is kept: a link that drops and comes back at once (the same node,
        redialled) still waits for its answer. A link was lost, too: a new one may now be
        a way back (``probe_new_links``)."""
        self.lost_a_link = True
        for hop in [h for h in self._probes.values() if h.current == peer]:
            hop.current = None
            self._stats.probes_rerouted += 1
            self._probe_on(hop)

    def _probe_on(self, hop: ProbeHop) -> None:
        """Send ``hop``'s probe to the closest peer it has not tried, or, with no peer or
        budget left, answer "none" to whoever sent it."""
        probe = hop.probe
        peers = self._peers
        nxt = peers.closest(key_location(probe.key), hop.tried) if probe.htl > 0 else None
        if nxt is None:
            self._probes.pop(probe.uid, None)
            if hop.upstream is not None and hop.upstream in peers:
                self._out.send(hop.upstream, ProbeAnswer(probe.uid, probe.key, None, probe.htl))
            return
        hop.tried.add(nxt.id)
        hop.current = nxt.id
        self._probes[probe.uid] = hop
        if len(self._probes) > _PATHS:
            self._probes.popitem(last=False)
        self._out.send(nxt.id, probe)

    def on_answer(self, now: float, peer: PeerId, answer: ProbeAnswer) -> None:
        hop = self._probes.get(answer.uid)
        if hop is None or hop.current != peer or hop.probe.key != answer.key:
            return  # not one we wait for from this peer (late, forgotten, or made up)
        if answer.root is None:
            # Nothing below that peer: backtrack with the budget it left.
            hop.probe = dataclasses.replace(hop.probe, htl=min(answer.htl, hop.probe.htl))
            self._probe_on(hop)
            return
        del self._probes[answer.uid]
        self._trail(ahead_trail(answer.uid), peer)
        if hop.upstream is not None:
            if hop.upstream in self._peers:
                self._out.send(hop.upstream, answer)
            return
        stream = self._streams.get(answer.key)
        if (
            stream is None
            or not _settled_root(stream)
            or not is_closer(stream.target, answer.root, self.location)
        ):
            return
        # A closer root exists: look for its tree, as after a takeover (``merges``).
        self._stats.splits_found += 1
        self._probe_look(now, stream, relooks=0, trail=ahead_trail(answer.uid))


def _count_look(now: float, stream: Stream, found: bool = True) -> None:
    """A probe-made look starts (or is due): a miss until it merges (``Merges.merged``
    clears the count), and, if a probe ``found`` a closer root, the time the backoff of the
    next crossing's look is measured from. A look past a closer peer is a guess, and does
    not hold back a crossing: a closer root's probe is news it had not. Otherwise a root
    whose closer peers are its own members, looking past them at each probe round, can
    start a backoff just before every crossing and never merge with the closer root."""
    if found:
        stream.root.trailed_at = now
    stream.root.probe_misses = min(stream.root.probe_misses + 1, _MAX_BACKOFF)


def _may_cross(now: float, stream: Stream, interval: float) -> bool:
    """Whether a closer origin's look crossing ``stream``'s looking root may make it look
    along that look's trail: probes are on, the repair has a repeated look left, and the
    last such look is a probe interval back, doubled for each that did not merge."""
    last = stream.root.crossed_at
    return (
        interval > 0
        and stream.root.relooks < RELOOKS
        and (last is None or now - last >= interval * (1 << stream.root.cross_misses))
    )


def _may_trail(now: float, stream: Stream, interval: float) -> bool:
    """Whether a crossing probe may make ``stream``'s root look now: probes are on, and the
    last probe-made look is a probe interval back, doubled for each look that missed."""
    last = stream.root.trailed_at
    return interval > 0 and (
        last is None or now - last >= interval * (1 << stream.root.probe_misses)
    )


def _settled_root(stream: Stream) -> bool:
    """A root with no repair under way: attached, no grace, look or restart running."""
    return (
        stream.state is State.ROOT
        and stream.restart_origin is None
        and stream.restart_uid is None
        and stream.root.looking is None
        and stream.root.recover_until is None
        and not stream.root.look_due
    )
