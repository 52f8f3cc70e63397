"""Location swapping: two nodes trade locations when that shortens their links (Freenet 0.7).

Why. In a darknet the links follow trust between people, so the graph cannot be rewired
into the small world greedy routing needs; the locations move instead. Sandberg showed that
nodes swapping locations by a Metropolis-Hastings rule (``keyspace.swapping``) bring the
graph's link lengths to the 1/d law, after which greedy routing finds the closest node in
few hops, as on a graph built for it.

How. Every ``swap_interval`` (with a random phase, so nodes do not start together) a node
that may swap starts one:

1. It sends ``SwapRequest(uid, htl, commitment)`` to a random peer. Each hop passes it to a
   random peer other than the one it came from, one less ``htl`` each time; the node where
   the budget ends (or that has no other peer) is the *partner*. A random walk of 10 hops
   on a small-diameter graph ends at a close-to-uniform node, which is what the chain's
   proposal needs.
2. The partner answers ``SwapReply(uid, commitment)``, back along the walk.
3. The starter reveals ``SwapCommit(uid, nonce, location, neighbours, away)``; the partner checks
   it against the starter's commitment, decides, and reveals ``SwapComplete`` likewise;
   the starter checks that and decides the same way.

Commit, then reveal. A commitment is SHA-256 over the swap's uid, the end's role (starter
or partner), a fresh 32-byte nonce, its location, its neighbours' locations and where its
streams' keys lie (``commitment``; the keys: see Trees, below). Neither end sees the
other's nonce or claims before it has bound itself to its own, so neither can choose its
nonce, or change its claims, after seeing the other's. The decision (``decide``) is
Sandberg's rule (``keyspace.swapping.swap_gain``) on the two reveals, with the coin drawn
from both nonces: both ends compute the same answer from the same bytes, and neither
controls the coin. Nothing checks the claims themselves: an end that lies about its
location or its neighbours' from the start (or a hop on the walk that plays partner to each
end) can make the rule say yes, and so choose where the other end goes. Freenet's
swapping has the same weakness; the limits below bound how often.

Accountability. Every hop keeps what each side committed to as it passed (the starter's
from the peer behind, the partner's from the peer ahead), and checks each reveal against it
before passing it on. So a reveal that does not match its commitment is caught by the first
hop it reaches, which got both from the same linked peer: that peer cheated, or passed a
changed message on, and either way it is cut off (``DropPeer``, logged by the driver). A
reply or reveal from a peer that is not where the swap stands is ignored: it may be late.

On yes, each end takes the other's location (``relocate``: the node tells its peers in a
new Hello). If the partner's reveal is lost on the way back, the partner has moved and the
starter has not: two nodes share a location for a while, which routing tolerates (ties go
by id), as Freenet's swapping does. Each end's wait, and each hop's, starts again when the
starter's reveal passes, so a slow walk does not strand the starter's answer.

Limits. A node takes part in one swap at a time, as starter or partner. A peer may make it
its partner (a walk that ends here) once per ``swap_interval``, and one whose swap left it
waiting for a reveal in vain not for ``PARTNER_PENALTY`` intervals: so no peer keeps it
busy, or moves it, more often than that. It relays at most ``max_swap_walks`` walks, at
most a quarter of them from one peer, and refuses the rest (``SwapRejected``); every swap
and walk is forgotten after ``swap_timeout``. Uids of the walks it took on are remembered
for loop detection like a search's: a walk that comes back, or a replayed request, is
refused.

Trees. A node swaps only while it roots no stream, routes no search, is joining or
restarting no stream nor in a subtree that restarts, and keeps at most ``MAX_AWAY``
streams. Its reveal names where the keys of the streams it keeps lie (``away``: for each,
which ``AWAY_CELLS``-th of the circle), and a swap goes ahead only if neither end moves
toward a key it named, by a margin of one such arc (``decide``, so both ends agree). A
root would leave its tree where its key no longer leads; a member that moved toward the
key could come closer than its root and make the root restart with its closer peer inside
its own subtree, which refuses the resubscribe, so the tree would go looking elsewhere while
other trees of the stream look for it, and two such merges crossing make a cycle (seen in
the simulator's darknet with streams). A member that moves only away from its keys comes
no closer than it stood, and a root restarts for a peer that moved only if it moved toward
the key (``links``): a member may stand closer than its root (it joined where its search
first met the tree), and moving away must not make the root hand its tree into its own
subtree. A member keeps its parent and children: a tree's links follow peers, not
locations. The other end takes the member's old place; where that is closer to a key than
the key's root, it is a closer new peer to the root (it cannot be a member of that tree:
it too would have had to move away from the key), and the root hands its tree on as to a
node that just linked, as the takeover rules cover. An end that joined a tree since it
committed withdraws before revealing (``SwapRejected``), and nobody moves; only the
starter, once it has revealed, cannot withdraw, and then stays put (``swap_halves``), as
if the partner's reveal were lost. An end that left a tree meanwhile goes ahead (a bound
the less). What a reveal tells the swap's other end and the walk's hops of the streams a
node follows is a few bits a stream: a key's arc, not the key's location, which any list of
candidate stream names would match exactly.

A node that does not swap (``swap_interval`` 0, as where ids give locations) refuses every
swap message it could act on, and relays none.
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

from keyspace.location import distance
from keyspace.swapping import swap_gain
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.recent import RecentIds
from overlay.core.stats import NodeStats
from overlay.core.timers import TimerQueue
from overlay.messages import (
    DIGEST_SIZE,
    MAX_NEIGHBOURS,
    SwapCommit,
    SwapComplete,
    SwapRejected,
    SwapReply,
    SwapRequest,
)

_START = "swap-start"
_END = "swap-end"
_COMMITMENT = b"overlay location swap"
_COIN = b"overlay location swap coin"
STARTER, PARTNER = b"S", b"P"  # the roles a commitment names

# Streams a node may keep and still swap: its reveal lists where their keys lie.
MAX_AWAY = 32
# A reveal names a key only by which of this many equal arcs of the circle it lies in:
# enough to keep a member from moving toward it, a few bits rather than the key's 64.
AWAY_CELLS = 256
_CELL = 1.0 / AWAY_CELLS
# Intervals a peer may not make this node its partner after a swap of its left the node
# waiting for a reveal in vain (see the notes).
PARTNER_PENALTY = 10


@dataclass(frozen=True, slots=True)
class Reveal:
    """What one end of a swap commits to and later reveals. ``away``: the locations of the
    stream keys it carries, which it may not move toward (see the notes)."""

    nonce: bytes
    location: float
    neighbours: tuple[float, ...]
    away: tuple[float, ...] = ()


def commitment(uid: int, reveal: Reveal, role: bytes) -> bytes:
    """SHA-256 over the swap's uid, the end's ``role`` and everything ``reveal`` holds. The
    role keeps a partner from answering with the starter's own commitment. Every field
    before the two lists has a fixed length, and the lists' lengths come first, so no two
    reveals share an encoding."""
    neighbours, away = reveal.neighbours, reveal.away
    body = struct.pack(
        f">Qc32sdII{len(neighbours)}d{len(away)}d",
        uid,
        role,
        reveal.nonce,
        reveal.location,
        len(neighbours),
        len(away),
        *neighbours,
        *away,
    )
    return hashlib.sha256(_COMMITMENT + body).digest()


def _without(locations: tuple[float, ...], location: float) -> list[float]:
    """``locations`` less one entry equal to ``location``: the a-b link, which
    ``swap_gain`` must not count."""
    rest = list(locations)
    if location in rest:
        rest.remove(location)
    return rest


def away_cell(key: float) -> float:
    """The middle of the ``AWAY_CELLS``-th of the circle that ``key`` lies in: what a
    reveal names for a key (see the notes)."""
    return (math.floor(key * AWAY_CELLS) % AWAY_CELLS + 0.5) / AWAY_CELLS


def keeps_away(end: Reveal, location: float) -> bool:
    """Whether ``location`` is no closer than ``end`` stands now to any key in the cells
    it names: farther from each cell's middle by at least a cell's width (a key lies
    within half a width of its cell's middle, so it is then no closer to the key)."""
    here = end.location
    return all(distance(location, cell) >= distance(here, cell) + _CELL for cell in end.away)


def decide(uid: int, starter: Reveal, partner: Reveal) -> bool:
    """Whether the swap goes ahead: neither end moves toward a key it carries, and
    Sandberg's rule on the two reveals says yes, with the coin taken from both nonces; so
    both ends reach the same answer and neither chose it."""
    if not keeps_away(starter, partner.location) or not keeps_away(partner, starter.location):
        return False
    gain = swap_gain(
        starter.location,
        partner.location,
        _without(starter.neighbours, partner.location),
        _without(partner.neighbours, starter.location),
    )
    if gain >= 1.0:
        return True
    seed = _COIN + uid.to_bytes(8, "big") + starter.nonce + partner.nonce
    coin = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") / 2.0**64
    return coin < gain


@dataclass(slots=True)
class _Own:
    """A swap this node is an end of: the starter's (``theirs`` None until the partner
    commits) or the partner's (``theirs`` is then the starter's commitment)."""

    uid: int
    via: PeerId  # the linked peer the swap's messages come and go through
    mine: Reveal
    theirs: bytes | None  # the other end's commitment
    started: bool
    wait: int  # the deadline timer that ends it (``_wait``)


@dataclass(slots=True)
class _Walk:
    """A swap this node relays: where it came from and went, and both commitments."""

    back: PeerId  # toward the starter
    ahead: PeerId  # toward the partner
    starter: bytes  # the starter's commitment, as ``back`` passed it
    wait: int  # the deadline timer that ends it (``_wait``)
    partner: bytes | None = None  # the partner's, as ``ahead`` passed it
    revealed: bool = False  # the starter's reveal went ahead


class Swaps:
    """This node's part in location swaps: its own, and the walks it relays."""

    __slots__ = (
        "_armed",
        "_bounds",
        "_config",
        "_entropy",
        "_next_partner",
        "_out",
        "_own",
        "_peers",
        "_relocate",
        "_rng",
        "_seen",
        "_stats",
        "_timers",
        "_waits",
        "walks",
    )

    def __init__(
        self,
        config: NodeConfig,
        rng: random.Random,
        entropy: Callable[[int], bytes],  # nonces: unpredictable to peers (the runtime's OS)
        stats: NodeStats,
        peers: PeerTable,
        timers: TimerQueue,
        out: Outbox,
        relocate: Callable[[float, float], None],  # (now, location): ``Node.relocate``
        # The keys a swap must not move this node toward, or None while it may not swap.
        bounds: Callable[[], tuple[float, ...] | None],
    ) -> None:
        self._config = config
        self._rng = rng
        self._entropy = entropy
        self._stats = stats
        self._peers = peers
        self._timers = timers
        self._out = out
        self._relocate = relocate
        self._bounds = bounds
        self._armed = False
        self._own: _Own | None = None
        self.walks: dict[int, _Walk] = {}
        # When each linked peer may next make us its partner (see the notes).
        self._next_partner: dict[PeerId, float] = {}
        self._waits = 0  # deadline timers armed (each names the wait it ends)
        self._seen = RecentIds(config.seen_uid_ttl, 64 * config.max_swap_walks)
        timers.on(_START, self._on_start_timer)
        timers.on(_END, self._on_end_timer)

    @property
    def enabled(self) -> bool:
        return self._config.swap_interval > 0

    def arm(self, now: float) -> None:
        """Start the round of swaps, if swapping is on (called as peers' Hellos come)."""
        if self.enabled and not self._armed:
            self._armed = True
            interval = self._config.swap_interval
            self._timers.add(now + self._rng.uniform(0.0, interval), (_START, 0, 0))

    # --- starting ---------------------------------------------------------------------

    def _free(self) -> bool:
        """Whether this node may be an end of a swap now (see the notes)."""
        return (
            self.enabled
            and self._own is None
            and len(self._peers) > 0
            and self._bounds() is not None
        )

    def _reveal(self) -> Reveal:
        locations = sorted(peer.location for peer in self._peers)[:MAX_NEIGHBOURS]
        away = self._bounds() or ()
        return Reveal(self._entropy(DIGEST_SIZE), self._peers.own, tuple(locations), away)

    def _still(self, own: _Own) -> bool:
        """Whether this node may still make the swap it committed to: it may swap, and it
        keeps no stream whose key it did not name (one it joined since could lie where
        it would go; leaving one only lifts a bound)."""
        bounds = self._bounds()
        return bounds is not None and set(bounds) <= set(own.mine.away)

    def _on_start_timer(self, now: float, _uid: int, _attempt: int) -> None:
        interval = self._config.swap_interval
        self._timers.add(now + interval * self._rng.uniform(0.5, 1.5), (_START, 0, 0))
        if self._free():
            self.start(now)

    def start(self, now: float) -> bool:
        """Start a swap now, if this node may; True if it did."""
        if not self._free():
            return False
        uid = self._rng.getrandbits(64)
        via = self._rng.choice([peer.id for peer in self._peers])
        mine = self._reveal()
        self._own = _Own(uid, via, mine, None, True, self._wait(now, uid))
        self._seen.add(uid, now)
        self._stats.swap_attempts += 1
        self._out.send(via, SwapRequest(uid, self._config.swap_htl, commitment(uid, mine, STARTER)))
        return True

    # --- messages ---------------------------------------------------------------------

    def on_request(self, now: float, peer: PeerId, message: SwapRequest) -> None:
        uid = message.uid
        own = self._own
        if (
            not self.enabled
            or uid in self.walks
            or (own is not None and own.uid == uid)
            or self._seen.contains(uid, now)
        ):
            self._refuse(peer, uid)  # (a loop, a replay, or a node that does not swap)
            return
        htl = min(message.htl, self._config.swap_htl) - 1
        others = [p.id for p in self._peers if p.id != peer]
        if htl <= 0 or not others:
            if not self._free() or now < self._next_partner.get(peer, now):
                self._refuse(peer, uid)
                return
            self._next_partner[peer] = now + self._config.swap_interval
            mine = self._reveal()
            self._own = _Own(uid, peer, mine, message.commitment, False, self._wait(now, uid))
            self._out.send(peer, SwapReply(uid, commitment(uid, mine, PARTNER)))
        else:
            walks = self.walks
            limit = self._config.max_swap_walks
            if len(walks) >= limit or 4 * sum(w.back == peer for w in walks.values()) >= limit:
                self._refuse(peer, uid)
                return
            ahead = self._rng.choice(others)
            walks[uid] = _Walk(peer, ahead, message.commitment, self._wait(now, uid))
            self._stats.swap_walks += 1
            self._out.send(ahead, SwapRequest(uid, htl, message.commitment))
        self._seen.add(uid, now)  # (only a walk taken on: refusals cost no memory)

    def on_reply(self, now: float, peer: PeerId, message: SwapReply) -> None:
        uid = message.uid
        walk = self.walks.get(uid)
        if walk is not None:
            if peer == walk.ahead and walk.partner is None:
                walk.partner = message.commitment
                self._out.send(walk.back, message)
            return
        own = self._mine(uid, peer, started=True)
        if own is None or own.theirs is not None:
            return
        if not self._still(own):
            # Joined or left a tree since it started: withdraw before revealing; nobody
            # moves.
            self._own = None
            self._stats.swaps_withdrawn += 1
            self._out.send(peer, SwapRejected(uid))
            return
        own.theirs = message.commitment
        own.wait = self._wait(now, uid)  # (the partner's answer may take as long again)
        mine = own.mine
        self._out.send(peer, SwapCommit(uid, mine.nonce, mine.location, mine.neighbours, mine.away))

    def on_commit(self, now: float, peer: PeerId, message: SwapCommit) -> None:
        """The starter's reveal, on its way to the partner."""
        uid = message.uid
        theirs = Reveal(message.nonce, message.location, message.neighbours, message.away)
        walk = self.walks.get(uid)
        if walk is not None:
            if peer == walk.back and walk.partner is not None and not walk.revealed:
                if self._cheated(peer, uid, theirs, walk.starter, STARTER):
                    del self.walks[uid]
                    self._out.send(walk.ahead, SwapRejected(uid))
                    return
                walk.revealed = True
                walk.wait = self._wait(now, uid)  # (as the starter's: see the notes)
                self._out.send(walk.ahead, message)
            return
        own = self._mine(uid, peer, started=False)
        if own is None:
            return
        assert own.theirs is not None, "a partner has the starter's commitment"
        self._own = None
        if self._cheated(peer, uid, theirs, own.theirs, STARTER):
            return
        if not self._still(own):
            # Joined or left a tree since it answered: withdraw; nobody moves.
            self._stats.swaps_withdrawn += 1
            self._out.send(peer, SwapRejected(uid))
            return
        mine = own.mine
        self._out.send(
            peer, SwapComplete(uid, mine.nonce, mine.location, mine.neighbours, mine.away)
        )
        if decide(uid, theirs, mine):
            self._moved(now, theirs.location)

    def on_complete(self, now: float, peer: PeerId, message: SwapComplete) -> None:
        """The partner's reveal, on its way back to the starter."""
        uid = message.uid
        theirs = Reveal(message.nonce, message.location, message.neighbours, message.away)
        walk = self.walks.get(uid)
        if walk is not None:
            if peer == walk.ahead and walk.partner is not None and walk.revealed:
                del self.walks[uid]
                if self._cheated(peer, uid, theirs, walk.partner, PARTNER):
                    self._out.send(walk.back, SwapRejected(uid))
                    return
                self._out.send(walk.back, message)
            return
        own = self._mine(uid, peer, started=True)
        if own is None or own.theirs is None:
            return  # (or a reveal before the partner's commitment: nothing to check it by)
        self._own = None
        if self._cheated(peer, uid, theirs, own.theirs, PARTNER):
            return
        if decide(uid, own.mine, theirs):
            if self._still(own):
                self._moved(now, theirs.location)
            else:
                self._stats.swap_halves += 1  # (see the notes: the partner moved alone)

    def on_rejected(self, now: float, peer: PeerId, message: SwapRejected) -> None:
        uid = message.uid
        walk = self.walks.get(uid)
        if walk is not None:
            if peer in (walk.ahead, walk.back):
                del self.walks[uid]
                self._out.send(walk.back if peer == walk.ahead else walk.ahead, message)
            return
        own = self._own
        if own is not None and own.uid == uid and peer == own.via:
            self._own = None
            if own.started:
                self._stats.swaps_rejected += 1

    def lost_peer(self, peer: PeerId) -> None:
        """``peer``'s link is gone: the swaps through it cannot finish. The other side of
        each walk is told, so its ends stop waiting."""
        self._next_partner.pop(peer, None)
        own = self._own
        if own is not None and own.via == peer:
            self._own = None
        for uid, walk in list(self.walks.items()):
            if peer in (walk.back, walk.ahead):
                del self.walks[uid]
                self._out.send(walk.back if peer == walk.ahead else walk.ahead, SwapRejected(uid))

    # --- plumbing ---------------------------------------------------------------------

    def _mine(self, uid: int, peer: PeerId, started: bool) -> _Own | None:
        """Swap ``uid``, if this node is its starter (``started``) or its partner, and
        ``peer`` the link its messages come through."""
        own = self._own
        if own is None or own.uid != uid or own.started != started or peer != own.via:
            return None
        return own

    def _wait(self, now: float, uid: int) -> int:
        """Arm a deadline ``swap_timeout`` from now for swap ``uid``; the number that names
        it, so that an earlier deadline of the same swap ends nothing."""
        self._waits += 1
        self._timers.add(now + self._config.swap_timeout, (_END, uid, self._waits))
        return self._waits

    def _refuse(self, peer: PeerId, uid: int) -> None:
        self._stats.swaps_refused += 1
        self._out.send(peer, SwapRejected(uid))

    def _cheated(
        self, peer: PeerId, uid: int, reveal: Reveal, committed: bytes, role: bytes
    ) -> bool:
        """Whether ``reveal`` from ``peer`` differs from what ``peer`` committed to (see the
        notes); if so ``peer`` is cut off."""
        if commitment(uid, reveal, role) == committed:
            return False
        self._stats.swap_cheats += 1
        self._out.drop(peer, "revealed a location swap other than the one it committed to")
        return True

    def _moved(self, now: float, location: float) -> None:
        self._stats.swaps += 1
        if location != self._peers.own:
            self._relocate(now, location)

    def _on_end_timer(self, now: float, uid: int, wait: int) -> None:
        walk = self.walks.get(uid)
        if walk is not None and walk.wait == wait:
            del self.walks[uid]
        own = self._own
        if own is not None and own.uid == uid and own.wait == wait:
            self._own = None
            self._stats.swap_timeouts += 1
            if not own.started:
                # Its starter never revealed: that peer keeps us waiting no more for a while.
                penalty = PARTNER_PENALTY * self._config.swap_interval
                self._next_partner[own.via] = now + penalty
