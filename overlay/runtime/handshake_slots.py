"""Slots for connections that have not authenticated yet: how many, and from where.

Every byte from a peer is hostile until checked, and before its handshake a connection is
nothing but a cost: a task, a socket, a buffer, up to ``handshake_timeout`` of waiting. The
slots bound that cost per node, whatever connects:

* at most ``per_address`` at once from one IP address; one more is refused at accept,
  before any task or buffer exists for it (the accept loop closes it at once, so refused
  connections never wait in the listen backlog or hold a file descriptor);
* at most ``total`` at once from everywhere; one more takes the slot of the *oldest*, whose
  handshake is cancelled. An honest handshake takes a round trip, so the oldest slots are
  the ones that stalled: under a flood of connections that never finish, the handshake
  timeout shrinks to the time ``total`` newer connections take to arrive, and an honest
  peer still gets in, where refusing the newcomer instead would leave the door shut for as
  long as the flood keeps it full.

Invariant: ``len(self)`` never exceeds ``total``, and no address holds more than
``per_address`` slots.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import trio


@dataclass(eq=False, slots=True)
class Slot:
    """One connection's place; its handshake runs inside ``scope``."""

    address: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    evicted: bool = False  # its scope was cancelled to make room for a newer connection


class HandshakeSlots:
    """The slots of one node's listeners (module notes)."""

    def __init__(self, total: int, per_address: int) -> None:
        if total < 1 or per_address < 1:
            raise ValueError(f"slots must be positive, got {total} and {per_address}")
        self.total = total
        self.per_address = per_address
        self._held: dict[Slot, None] = {}  # in order of arrival: the first is the oldest
        self._by_address: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._held)

    def take(self, address: str) -> Slot | None:
        """A slot for a connection from ``address``, evicting the oldest if every slot is
        held; None if ``address`` holds its share already."""
        if self._by_address[address] >= self.per_address:
            return None
        if len(self._held) >= self.total:
            oldest = next(iter(self._held))
            oldest.evicted = True
            oldest.scope.cancel()
            self.release(oldest)
        slot = Slot(address)
        self._held[slot] = None
        self._by_address[address] += 1
        return slot

    def release(self, slot: Slot) -> None:
        """The connection authenticated, failed or was evicted (idempotent)."""
        if slot in self._held:
            del self._held[slot]
            self._by_address[slot.address] -= 1
            if not self._by_address[slot.address]:
                del self._by_address[slot.address]
