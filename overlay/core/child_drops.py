"""Children whose lost links held a root's numbering: one that keeps doing it is cut off.

A root that loses a child whose link closed holds numbering for ``lost_child_grace`` and
looks for a tree the lost subtree may make (``merges``). Any peer may join a stream as the
root's child and close its link, so a peer could hold the stream again and again at no cost
to itself. The root counts, per peer, the holds its lost links brought on: a peer that
brought on ``LIMIT`` within ``WINDOW`` seconds and asks to join again is cut off
(``DropPeer``, a fault: the runtime logs it and refuses the peer for a cooldown). An honest
child whose node crashed and restarted that often in a minute is better kept out a while
too: each of its returns costs every member of the stream a hold.

Bounded: at most ``TRACKED`` peers are remembered, the least recently counted forgotten
first, and a peer's count holds only the drops within the last ``WINDOW`` seconds.
"""

from __future__ import annotations

from collections import OrderedDict

from overlay.core.effects import PeerId

# Three holds a minute: a node that crashed twice and came back is still let in; one that
# joins and drops in a loop is cut off at its fourth join, having cost the stream about
# three seconds of holds.
LIMIT = 3
WINDOW = 60.0
TRACKED = 4096


class ChildDrops:
    """The holds each peer's lost child links brought on, per peer, in the last ``WINDOW``."""

    __slots__ = ("_drops",)

    def __init__(self) -> None:
        self._drops: OrderedDict[PeerId, list[float]] = OrderedDict()

    def dropped(self, now: float, peer: PeerId) -> None:
        """``peer``'s link as a root's child closed, and the root held numbering for it.
        Once per loss of the link: the root tells this for each stream the peer was its
        child on, all at the same moment, and an honest node carrying three of our streams
        that restarted once is no peer dropping its link three times."""
        times = [t for t in self._drops.pop(peer, []) if now - t < WINDOW]
        if not times or times[-1] != now:
            times.append(now)
        self._drops[peer] = times
        while len(self._drops) > TRACKED:
            self._drops.popitem(last=False)

    def too_many(self, now: float, peer: PeerId) -> int | None:
        """The holds ``peer`` brought on in the last ``WINDOW`` if they reach ``LIMIT``
        (then it is to be cut off); None otherwise."""
        times = self._drops.get(peer)
        if not times:
            return None
        recent = sum(1 for t in times if now - t < WINDOW)
        return recent if recent >= LIMIT else None
