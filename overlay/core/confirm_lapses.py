"""Children whose numbers lapse unconfirmed: not waited for again on that stream, a while.

A root holds a peer's publish, numbered, until the publisher's node confirms the number
(``confirming``). Past ``confirm_deadline``, with a later packet waiting behind it, the
root sends it down unconfirmed: a *lapse* of the child the publish came through. For
``QUIET`` deadlines after a lapse the root does not wait for that child on that stream: a
publish that comes through it goes down as soon as its turn comes, as if the root did not
confirm publishes (``confirm_publishes`` off, for that child and stream alone). So a child
that never confirms costs the stream one deadline per ``QUIET`` deadlines, not one per
publish. Nothing ends the quiet early: a confirmation of a packet not waited for proves
nothing, and a late one could be forged (the packet's uid went down with it).

Why not cut it off: the lapse is charged to the child the publish came through, and the
root cannot tell a hostile child from an honest relay with a hostile publisher below it (or
a slow path). Cutting an honest relay off would tear its subtree out of every stream its
link carries. Not waiting costs only the packets that come through that child on that
stream: for a while they lose what confirmation gives them (the partition race,
``confirming``).

Bounded: at most ``TRACKED`` (stream, child) pairs are remembered, the least recently
lapsed forgotten first, and an entry ends with its quiet.
"""

from __future__ import annotations

from collections import OrderedDict

from overlay.core.effects import PeerId

QUIET = 30  # deadlines a child is not waited for after a lapse
TRACKED = 4096


class ConfirmLapses:
    """Per (stream key, child): until when the root does not wait for its confirmations."""

    __slots__ = ("_quiet", "_until")

    def __init__(self, confirm_deadline: float) -> None:
        self._quiet = QUIET * confirm_deadline
        self._until: OrderedDict[tuple[bytes, PeerId], float] = OrderedDict()

    def lapsed(self, now: float, key: bytes, peer: PeerId) -> None:
        """A number of stream ``key`` that came through ``peer`` went down unconfirmed."""
        self._until.pop((key, peer), None)
        self._until[key, peer] = now + self._quiet
        while len(self._until) > TRACKED:
            self._until.popitem(last=False)

    def waits_for(self, now: float, key: bytes, peer: PeerId) -> bool:
        """Whether a publish of stream ``key`` that comes through ``peer`` now waits for
        its confirmation."""
        if not self._until:
            return True
        until = self._until.get((key, peer))
        if until is None:
            return True
        if now < until:
            return False
        del self._until[key, peer]
        return True

    def __len__(self) -> int:
        return len(self._until)
