"""How far each stream's numbering got, remembered past the stream and past a restart.

Why. A root numbers a stream from the state it carries, and nothing else says where the
numbering stood. When every node that carried a stream's state is gone (a root forgot an
idle stream after ``keep_idle``; or every holder crashed, and one came back with a new boot
id), the next root founds the stream afresh and numbers from 0 again: numbers given before
are given a second time, and a consumer that keeps the last number it processed skips the
new packets. A crash of the root, its successor and the publisher's node within seconds
is enough.

What. Every node notes the highest number it has seen given for each stream: a packet
stored (at the root, once it goes down), or a range announced missed. Not a number a root
gave a publish still waiting for its publisher's confirmation (``confirming``): nobody was
shown it, and, remembered, it would come back as a claim that nobody pushes, announced
missed to subscribers who lost nothing; the publisher's node pushes its claim up if it
holds one (``push_claims``), and a root takes a push beyond its head. The
note outlives the stream (the core keeps it, bounded, least recently raised dropped
first), and each raise is also an effect, ``Remember``, that a driver may keep on disk and
hand back to the next start (``Node(remembered=...)``). A node that becomes a stream's
root holding none of its packets takes what it remembers as a claim, as it takes a
resubscriber's (``Takeover.became_root``): numbers up to it may still be held below, so
they are holes its subtree may fill in a grace, and new packets are numbered after it. A
stream that comes back numbers on from where this node last saw it; a root holding only a
claim tells fresh children, and any tree it merges into, its claimed head
(``joining.claimed``).

Bounds. It is only as good as the node that remembers: a root founded where no holder of
the old numbering ever was still starts at 0. The note is exact (one effect per new
highest number), not a reservation ahead: a reservation would make every restarted node
that becomes root skip numbers the tree is still delivering.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping

from overlay.core.effects import Remember
from overlay.messages import MAX_PACKET


class Memory:
    """The highest packet number seen per stream key, for up to ``capacity`` keys."""

    __slots__ = ("_capacity", "_high", "_note")

    def __init__(
        self,
        capacity: int,
        note: Callable[[Remember], None],
        restored: Mapping[bytes, int] | None = None,
    ) -> None:
        self._capacity = capacity
        self._note = note
        self._high: OrderedDict[bytes, int] = OrderedDict()
        for key, number in (restored or {}).items():
            # A driver's file is outside the core's control: keep only what could be a
            # number this core gave, so a damaged file cannot push numbering to its end.
            if isinstance(key, bytes) and type(number) is int and 0 <= number < MAX_PACKET:
                self._high[key] = number
        while len(self._high) > capacity:
            self._high.popitem(last=False)

    def saw(self, key: bytes, number: int) -> None:
        """Stream ``key`` has had packet ``number``: remember it if it is the newest."""
        high = self._high
        if number <= high.get(key, -1):
            return
        high[key] = number
        high.move_to_end(key)
        if len(high) > self._capacity:
            high.popitem(last=False)
        self._note(Remember(key, number))

    def last(self, key: bytes) -> int | None:
        """The highest number this node saw given for ``key``, if it remembers one."""
        return self._high.get(key)

    def __len__(self) -> int:
        return len(self._high)
