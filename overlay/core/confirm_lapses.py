"""Children whose numbers lapse unconfirmed: not waited for again, for a while.

A root holds a peer's publish, numbered, until the publisher's node confirms the number
(``confirming``). Past ``confirm_deadline``, with a later packet waiting behind it, the
root sends it down unconfirmed: a *lapse* of the child the publish came through. For
``QUIET`` deadlines after a lapse the root does not wait for that child at all: a publish
that comes through it goes down as soon as its turn comes, as if the root did not confirm
publishes (``confirm_publishes`` off, for that child alone). A confirmation from the child
that comes in time, for a number still pending, ends the quiet at once. So a child that
never confirms costs the stream one deadline per ``QUIET`` deadlines, not one per publish.

Why not cut it off: the lapse is charged to the child the publish came through, and the
root cannot tell a hostile child from an honest relay with a hostile publisher below it (or
a slow path). Cutting an honest relay off would tear its subtree out of every stream its
link carries. Not waiting costs only the packets that come through that child: for a while
they lose what confirmation gives them (the partition race, ``confirming``).

A late confirmation forgives nothing: the packet's uid went down with it, so anyone could
forge one.

Bounded: at most ``TRACKED`` peers are remembered, the least recently lapsed forgotten
first, and an entry ends with its quiet.
"""

from __future__ import annotations

from collections import OrderedDict

from overlay.core.effects import PeerId

QUIET = 30  # deadlines a child is not waited for after a lapse
TRACKED = 4096


class ConfirmLapses:
    """Per peer: until when the root does not wait for its confirmations."""

    __slots__ = ("_quiet", "_until")

    def __init__(self, confirm_deadline: float) -> None:
        self._quiet = QUIET * confirm_deadline
        self._until: OrderedDict[PeerId, float] = OrderedDict()

    def lapsed(self, now: float, peer: PeerId) -> None:
        """A number that came through ``peer`` went down unconfirmed (or was dropped)."""
        self._until.pop(peer, None)
        self._until[peer] = now + self._quiet
        while len(self._until) > TRACKED:
            self._until.popitem(last=False)

    def waits_for(self, now: float, peer: PeerId) -> bool:
        """Whether a publish that comes through ``peer`` now waits for its confirmation."""
        until = self._until.get(peer)
        if until is None:
            return True
        if now < until:
            return False
        del self._until[peer]
        return True

    def confirmed(self, peer: PeerId) -> None:
        """``peer`` confirmed a pending number in time: its quiet ends."""
        if self._until:
            self._until.pop(peer, None)

    def __len__(self) -> int:
        return len(self._until)
