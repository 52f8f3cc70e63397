"""Slots for connections that have not authenticated yet: how many, and from where.

Every byte from a peer is hostile until checked, and before its handshake a connection is
nothing but a cost: a task, a socket, a buffer, up to ``handshake_timeout`` of waiting. The
slots bound that cost per node, whatever connects:

* at most ``per_address`` at once from one IP address; one more is refused at accept,
  before any task or buffer exists for it (the accept loop closes it at once, so refused
  connections never wait in the listen backlog or hold a file descriptor);
* at most ``total`` at once from everywhere; one more takes the slot of an older one, whose
  handshake is cancelled. An honest handshake takes a round trip, so the oldest slots are
  the ones that stalled: under a flood of connections that never finish, the handshake
  timeout shrinks to the time ``total`` newer connections take to arrive, and an honest
  peer still gets in, where refusing every newcomer would leave the door shut for as long
  as the flood keeps it full.

Which older one: a connection is *silent* until its whole first handshake message has
come in, and *heard* from then on (``hear``), one round trip from done. A flood that never
finishes its first message cannot push a heard connection out: the oldest silent slot goes
first, and the oldest heard one only when every slot is heard (a flood that sends whole
first messages, and pays for it with a connection each, competes with honest ones by age
as before).

A newcomer whose first message is in at accept (an honest peer's: it sends it as soon as
it connects) takes that slot at once. A newcomer still silent takes it only if it has been
held for ``grace``; otherwise it is refused at accept (``Refusal.HANDSHAKES_FULL``), which
costs a close and no task. Every slot taken within ``grace`` and still silent is a flood:
evicting for each of its connections would cost a task and a cancelled handshake apiece,
thousands a second, and slow the node's links and clients down with them.

Invariant: ``len(self)`` never exceeds ``total``, and no address holds more than
``per_address`` slots.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import trio

from overlay.runtime.refusals import Refusal

# How long a connection keeps its slot against silent newcomers: a first message follows
# its connect at once, so this is many round trips even across the world. It bounds the
# evictions a silent flood brings on at a third of ``total`` a second, each a task and a
# cancelled handshake: at one second, they took over a third of a node's time under 5,000
# connecting attackers (``testnet.bench.hostile_connections``).
GRACE = 3.0


@dataclass(eq=False, slots=True)
class Slot:
    """One connection's place; its handshake runs inside ``scope``."""

    address: str
    since: float  # when it was taken (the node's clock)
    heard: bool = False  # its whole first handshake message came in
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    evicted: bool = False  # its scope was cancelled to make room for a newer connection


class HandshakeSlots:
    """The slots of one node's listeners (module notes)."""

    def __init__(self, total: int, per_address: int, *, grace: float = GRACE) -> None:
        if total < 1 or per_address < 1:
            raise ValueError(f"slots must be positive, got {total} and {per_address}")
        self.total = total
        self.per_address = per_address
        self.grace = grace
        # Each in order of arrival (heard: of being heard): the first is the oldest.
        self._silent: dict[Slot, None] = {}
        self._heard: dict[Slot, None] = {}
        self._by_address: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._silent) + len(self._heard)

    @property
    def full(self) -> bool:
        return len(self) >= self.total

    def take(self, address: str, now: float, *, heard: bool = False) -> Slot | Refusal:
        """A slot for a connection from ``address``, evicting an older one if every slot
        is held (module notes); else why not: ADDRESS_FULL if ``address`` holds its share,
        HANDSHAKES_FULL if the newcomer is silent and no slot has had its grace.
        ``heard``: the connection's first message is in already."""
        if self._by_address[address] >= self.per_address:
            return Refusal.ADDRESS_FULL
        if self.full:
            victim = next(iter(self._silent if self._silent else self._heard))
            if not heard and now - victim.since < self.grace:
                return Refusal.HANDSHAKES_FULL
            victim.evicted = True
            victim.scope.cancel()
            self.release(victim)
        slot = Slot(address, now, heard)
        (self._heard if heard else self._silent)[slot] = None
        self._by_address[address] += 1
        return slot

    def hear(self, slot: Slot) -> None:
        """``slot``'s first message came in in full: it is no longer evicted for silence."""
        if slot in self._silent:
            del self._silent[slot]
            slot.heard = True
            self._heard[slot] = None

    def release(self, slot: Slot) -> None:
        """The connection authenticated, failed or was evicted (idempotent)."""
        held = self._heard if slot.heard else self._silent
        if slot in held:
            del held[slot]
            self._by_address[slot.address] -= 1
            if not self._by_address[slot.address]:
                del self._by_address[slot.address]
