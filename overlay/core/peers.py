"""The connected peers of one node, and the greedy choice among them.

A peer is known once its ``Hello`` arrived: from then on we know its location, which routing
needs, and its boot id, which tells a restart from a reconnect. Once it sends ``Neighbours``
we also know where its own peers are, and the greedy choice becomes friend-of-a-friend: a
peer ranks by the closest location it *reaches* (its own or one of its neighbours'), then by
its own distance, then by id. On a small-world graph that shortens routes markedly, and it
keeps greedy routing exact: a node that is not the closest has a ring neighbour that is
closer, so the chosen peer reaches something closer, and every two hops make progress.

A peer is no nearer a target for being linked to us, so our own location never counts in
its reach. A peer's announcement is kept as it came, sorted, our location in it: the same
tuple then serves every node the peer told (in the simulator, one message object reaches
them all), where a copy without each receiver's location cost every node a tuple per peer,
the largest part of an idle node's memory at 10^5 nodes. The rank skips the entries equal
to our location instead (``_beside``), which picks exactly what a copy without them would.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field

from keyspace.location import distance
from overlay.core.effects import PeerId

# No location: what a table that skips no location of its own compares against.
NOWHERE = -1.0


def _beside(around: tuple[float, ...], i: int, own: float) -> tuple[float, float]:
    """The sorted ``around``'s nearest entries below and above position ``i`` (wrapping),
    passing over entries equal to ``own``; (NOWHERE, NOWHERE) if every entry is ``own``."""
    n = len(around)
    below = i - 1
    while around[below % n] == own:
        below -= 1
        if below < i - 1 - n:
            return NOWHERE, NOWHERE
    above = i
    while around[above % n] == own:
        above += 1
    return around[below % n], around[above % n]


@dataclass(slots=True)
class Peer:
    id: PeerId
    location: float
    boot_id: int
    heard: float = 0.0  # core time of the last message from this peer (liveness)
    # Sorted locations of the peer's peers, ours among them: what it announced last.
    neighbours: tuple[float, ...] = field(default=())

    def reach(self, target: float, own: float = NOWHERE) -> float:
        """Distance from ``target`` to the closest location this peer is or is linked to,
        ``own`` (the asking node's location) aside."""
        best = distance(target, self.location)
        around = self.neighbours
        if around:
            # On the circle the nearest location is one of the two sorted neighbours of the
            # target's position (wrapping at the ends).
            i = bisect_left(around, target)
            below, above = around[i - 1], around[i % len(around)]
            if below == own or above == own:
                below, above = _beside(around, i, own)
            if below >= 0.0:
                best = min(best, distance(target, below), distance(target, above))
        return best


class PeerTable:
    """Connected peers by id, in the order they connected (iteration is deterministic)."""

    __slots__ = ("_own", "_peers", "get")

    def __init__(self, own: float = NOWHERE) -> None:
        """``own``: the location of the node whose peers these are (``Peer.reach``)."""
        self._own = own
        self._peers: dict[PeerId, Peer] = {}
        # The record of a peer, or None: the dict's own ``get``, bound once, since every
        # message a node receives looks its sender up (a Python method around it cost a
        # frame per message, 4% of a 64,000-node simulation).
        self.get: Callable[[PeerId], Peer | None] = self._peers.get

    @property
    def own(self) -> float:
        """The location of the node whose peers these are."""
        return self._own

    def move(self, own: float) -> None:
        """The node took another location (a swap: ``swaps``)."""
        self._own = own

    def add(self, peer_id: PeerId, location: float, boot_id: int, now: float) -> Peer | None:
        """Record a peer's Hello, heard at ``now``; returns the previous record if the peer
        was known."""
        previous = self._peers.get(peer_id)
        record = self._peers[peer_id] = Peer(peer_id, location, boot_id, now)
        if previous is not None and previous.boot_id == boot_id:
            # The same run of the peer: a new Hello moves it (``swaps``), its links stay.
            record.neighbours = previous.neighbours
        return previous

    def remove(self, peer_id: PeerId) -> Peer | None:
        return self._peers.pop(peer_id, None)

    def __contains__(self, peer_id: object) -> bool:
        return peer_id in self._peers

    def __len__(self) -> int:
        return len(self._peers)

    def __iter__(self) -> Iterator[Peer]:
        return iter(self._peers.values())

    def closest(self, target: float, exclude: Container[PeerId]) -> Peer | None:
        """The best next hop toward ``target`` among peers not in ``exclude``: the one that
        reaches closest (friend-of-a-friend), then the closest itself, then the lower id.

        A linear scan: a node has tens of peers, and a scan beats keeping one sorted order
        per key being routed. Every routing hop makes one, so ``Peer.reach`` and
        ``distance`` are written out inline (the same arithmetic: on the circle,
        ``min(d, 1 - d)`` is ``1 - d`` exactly when ``d > 0.5``), and the rank tuple is
        built only for a peer that may beat the best.
        """
        best: Peer | None = None
        best_rank: tuple[float, float, bytes] = (2.0, 2.0, b"")
        best_reach = 2.0
        here = self._own
        for peer in self._peers.values():
            if peer.id in exclude:
                continue
            own = abs(target - peer.location)
            if own > 0.5:
                own = 1.0 - own
            reach = own
            around = peer.neighbours
            if around:
                i = bisect_left(around, target)
                low, high = around[i - 1], around[i % len(around)]
                if low == here or high == here:
                    low, high = _beside(around, i, here)
                if low >= 0.0:
                    below = abs(target - low)
                    if below > 0.5:
                        below = 1.0 - below
                    above = abs(target - high)
                    if above > 0.5:
                        above = 1.0 - above
                    reach = min(reach, below, above)
            if reach > best_reach:
                continue
            rank = (reach, own, peer.id)
            if rank < best_rank:
                best, best_rank, best_reach = peer, rank, reach
        return best
