"""Children whose numbers lapse unconfirmed: one that keeps letting them is cut off.

A root holds a peer's publish, numbered, until the publisher's node confirms the number
(``confirming``). Past ``confirm_deadline``, with a later packet waiting behind it, the
root sends it down unconfirmed: a *lapse* of the child the publish came through. An honest
child lapses only when its path is slow, and its confirmation still comes, late; a late
one that names a packet the root sent down under that uid forgives the child, as an
on-time one does. A child that has lapsed ``LIMIT`` times, over at least ``SPAN``
deadlines, with no confirmation in between, is cut off (``DropPeer``, a fault: the runtime
logs it and refuses the peer for a cooldown). Each lapse cost the stream up to one
deadline; a hostile child that publishes and never confirms costs it a few seconds once,
not a stall per publish for as long as it stays.

An honest child whose confirmations take longer than ``SPAN`` deadlines is cut off too: a
path that slow holds every packet behind it that long, and its subtree is better served
rejoining elsewhere.

Bounded: at most ``TRACKED`` peers are remembered, the least recently lapsed forgotten
first; a confirmation from a peer forgets it.
"""

from __future__ import annotations

from collections import OrderedDict

from overlay.core.effects import PeerId

LIMIT = 3
SPAN = 2  # deadlines between the first lapse counted and the one that cuts off
TRACKED = 4096


class ConfirmLapses:
    """Per peer: the time of its first lapse since it last confirmed, and how many since."""

    __slots__ = ("_lapses", "_span")

    def __init__(self, confirm_deadline: float) -> None:
        self._span = SPAN * confirm_deadline
        self._lapses: OrderedDict[PeerId, tuple[float, int]] = OrderedDict()

    def lapsed(self, now: float, peer: PeerId) -> int | None:
        """A number that came through ``peer`` went down unconfirmed (or was dropped): the
        lapses since its last confirmation if that makes it one to cut off, else None."""
        first, count = self._lapses.pop(peer, (now, 0))
        count += 1
        self._lapses[peer] = (first, count)
        while len(self._lapses) > TRACKED:
            self._lapses.popitem(last=False)
        if count >= LIMIT and now - first >= self._span:
            del self._lapses[peer]
            return count
        return None

    def confirmed(self, peer: PeerId) -> None:
        """``peer`` confirmed a number, on time or late: its lapses are forgiven."""
        if self._lapses:
            self._lapses.pop(peer, None)

    def __len__(self) -> int:
        return len(self._lapses)
