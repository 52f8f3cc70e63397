"""The root's watch on its oldest unconfirmed number: one publisher cannot freeze a stream.

A root sends packets down in number order, and a peer's publish only once the publisher's
node has confirmed its number (``confirming``). So the oldest pending number, unconfirmed,
holds back every packet numbered after it: a child that publishes and never confirms would
freeze the stream until ``confirm_timeout``. This watch bounds that delay. Each time a
stream's oldest pending number changes, a timer is armed ``confirm_wait`` ahead; if that
number is still the oldest and still unconfirmed when it fires, the root drops that
publish and announces its number missed, a hole no other publish ever takes, and the
packets after it go down under their own numbers (``Confirming.unconfirmed_head``). So
an honest packet waits at most ``confirm_wait`` behind a publish that is never confirmed.

Strikes. A child whose number was dropped this way takes a strike; its next confirmation
clears them. A child with ``STRIKES`` in a row is cut off (``DropPeer``, a fault): an honest
publisher's node confirms within a round trip, and one that keeps failing costs every other
publisher that delay again and again. Strikes are kept for at most ``TRACKED`` peers.
"""

from __future__ import annotations

from collections import OrderedDict

from overlay.core.effects import PeerId
from overlay.core.timers import TimerQueue

CONFIRM_TIMER = "confirm"

# Numbers in a row a child leaves unconfirmed before it is cut off: one may be a link that
# broke under the confirmation, two a loaded one; three is a peer that does not confirm.
STRIKES = 3
# Peers whose strikes are remembered (the oldest forgotten first): a bound on memory however
# many identities an attacker brings.
TRACKED = 4096


class ConfirmWatch:
    """Timers on each root stream's oldest pending number, and strikes per child."""

    def __init__(self, wait: float, timers: TimerQueue) -> None:
        self.wait = wait
        self._timers = timers
        self._tokens = 0
        self._armed: dict[int, tuple[bytes, int]] = {}  # token -> (stream key, number)
        self._watching: dict[bytes, int] = {}  # stream key -> the number its timer watches
        self.changed: dict[bytes, None] = {}  # streams whose oldest pending number may differ
        self._strikes: OrderedDict[PeerId, int] = OrderedDict()

    def moved(self, key: bytes) -> None:
        """``key``'s pending numbers changed; ``arm`` looks at them after the event."""
        self.changed[key] = None

    def arm(self, now: float, heads: dict[bytes, int | None]) -> None:
        """After an event: for each changed stream whose oldest pending number (``heads``;
        None: nothing pending) is not the one watched, arm a timer ``wait`` from now."""
        self.changed.clear()
        for key, head in heads.items():
            if head is None:
                self._watching.pop(key, None)
                continue
            if self._watching.get(key) == head:
                continue
            self._watching[key] = head
            self._tokens += 1
            self._armed[self._tokens] = (key, head)
            self._timers.add(now + self.wait, (CONFIRM_TIMER, self._tokens, 0))

    def fired(self, token: int) -> tuple[bytes, int] | None:
        """A timer fired: the (stream key, number) it watched, if it is still the one
        watched for that stream; None for a stale timer."""
        armed = self._armed.pop(token, None)
        if armed is None or self._watching.get(armed[0]) != armed[1]:
            return None
        del self._watching[armed[0]]
        return armed

    def strike(self, peer: PeerId) -> int:
        """``peer`` left a number unconfirmed: its strikes in a row now."""
        count = self._strikes.pop(peer, 0) + 1
        self._strikes[peer] = count
        while len(self._strikes) > TRACKED:
            self._strikes.popitem(last=False)
        return count

    def forgive(self, peer: PeerId) -> None:
        """``peer`` confirmed a number: its strikes are cleared."""
        if self._strikes:
            self._strikes.pop(peer, None)
