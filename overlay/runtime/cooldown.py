"""Cooldowns: a peer cut off for a fault is refused for a while when it comes back.

Cutting a peer off (``Refusals``) is worth little if it can redial at once and do it again:
each round costs the node a handshake, a link and the core's work on whatever it sends. So
a peer cut off *for what it did* (``FAULTS``: a protocol violation, a lie about its
location, reading too slowly) starts a cooldown, and until it ends the node refuses that
node id at the handshake (``Refusal.COOLDOWN``), and its own dialler waits it out too.

* Repeats cost more: the first cooldown is ``FIRST`` seconds and each fault while the peer
  is remembered doubles it, up to ``LONGEST``. A peer that stays out of trouble for
  ``QUIET`` seconds after its cooldown ends is forgiven: its next fault starts from
  ``FIRST`` again.
* An honest disconnect starts nothing: a peer that closed its link, went silent (the
  core's ``DropPeer(fault=False)``), lost its connection, lost a duplicate-link tie-break
  or was turned away because the node is full did nothing wrong.
* Node ids cost nothing to make, so the source address of an accepted link that faulted is
  struck too, and refused at accept, before any handshake work. One address may be the
  home of several honest nodes (a NAT, an operator's testnet on one host), so one node's
  fault must not shut out its neighbours: an address is refused only from its
  ``ADDRESS_ALLOWANCE``-th fault within a quiet period, for ``FIRST`` doubling from there.
  Links this node dialled are not struck by address: their address is the peer's listening
  port, not where its connections come from.
* Vouched peers (``[peers] trusted``, ``overlay.runtime.vouching``) are the operator's own
  nodes: a fault of theirs is a bug in a node the operator runs (say, two versions mixed in
  an upgrade). They still cool down, so a fault loop does not spin, but from ``FIRST /
  TRUSTED_SHORTER`` up to ``TRUSTED_LONGEST`` only, so a fixed node is back within a
  minute without anyone clearing anything; and their faults do not strike their address.

Bounded memory: each table keeps at most its capacity of records and forgets the one
struck longest ago to make room. An attacker making fresh ids floods the id table and
pushes out older records; the address table, a quarter the size (addresses are scarcer
than ids), is what holds it off.

Invariant: ``len(ids) <= capacity`` and ``len(addresses) <= max(1, capacity // 4)``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from overlay.runtime.refusals import Refusal

# The reasons a link is closed for that are the peer's fault. Not LINKS_FULL (the node was
# full), not HANDSHAKE (no id was proven; the handshake slots bound that cost already).
# A slow reader cools down too: reconnecting at once would only refill its queue; and so
# does an id without the work the network asks (``vouching``), which no redial can mend,
# and a vouch that does not verify (``neighbour_vouches``): a lie.
FAULTS = frozenset(
    {
        Refusal.PEER_PROTOCOL,
        Refusal.PEER_DROPPED,
        Refusal.LOCATION,
        Refusal.ID_WORK,
        Refusal.VOUCH,
        Refusal.SLOW_PEER,
        Refusal.QUEUES_FULL,
    }
)

# Long enough that a redial loop costs the node one handshake a half-minute, short enough
# that an honest peer cut off by a transient fault (a bug since fixed, a slow moment) is not
# kept out for long.
FIRST = 30.0
# An hour: the doubling reaches it by the eighth fault in a row, when the peer's fault is
# no accident; longer would only keep a repaired node out after its operator fixed it.
LONGEST = 3600.0
# An hour without a fault after the last cooldown ended: the peer is behaving, forget it.
QUIET = 3600.0
# Vouched peers: a sixth of FIRST (5 s), at most a minute (module notes).
TRUSTED_SHORTER = 6.0
TRUSTED_LONGEST = 60.0
# Faults from one address within a quiet period before the address itself is refused.
ADDRESS_ALLOWANCE = 3
# Records kept per node: 4,096 ids at about 200 bytes each is under a megabyte.
DEFAULT_CAPACITY = 4096


K = TypeVar("K")


@dataclass(slots=True)
class _Record:
    faults: int
    until: float  # refused until then (a record under its allowance: the last fault's time)


class _Table(Generic[K]):
    """Records by key, the least recently struck first; at most ``capacity`` of them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._records: OrderedDict[K, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def strike(self, key: K, now: float, quiet: float) -> _Record:
        """One more fault of ``key``: its record, moved to the newest end (the caller sets
        ``until``). A record quiet for ``quiet`` seconds past its ``until`` starts over."""
        record = self._records.pop(key, None)
        if record is None or now - record.until >= quiet:
            record = _Record(0, now)
        record.faults += 1
        self._records[key] = record
        while len(self._records) > self.capacity:
            self._records.popitem(last=False)
        return record

    def remaining(self, key: K, now: float) -> float:
        record = self._records.get(key)
        return 0.0 if record is None else max(0.0, record.until - now)


class Cooldowns:
    """The node's cooldown records by node id and by address (module notes). ``clock``:
    seconds, monotonic (the node's trio clock)."""

    def __init__(self, clock: Callable[[], float], *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"the cooldown capacity must be positive, got {capacity}")
        self._clock = clock
        self.ids: _Table[bytes] = _Table(capacity)
        self.addresses: _Table[str] = _Table(max(1, capacity // 4))

    def cut_off(self, peer: bytes, address: str | None, *, trusted: bool) -> float:
        """``peer`` (connected from ``address`` if it dialled us, else None) was cut off
        for a fault: start or lengthen its cooldown; returns how long it lasts."""
        now = self._clock()
        if trusted:
            first, longest = FIRST / TRUSTED_SHORTER, TRUSTED_LONGEST
        else:
            first, longest = FIRST, LONGEST
        record = self.ids.strike(peer, now, QUIET)
        cooldown = _doubled(first, record.faults, longest)
        record.until = now + cooldown
        if address is not None and not trusted:
            by_address = self.addresses.strike(address, now, QUIET)
            over = by_address.faults - ADDRESS_ALLOWANCE
            if over >= 0:
                by_address.until = now + _doubled(FIRST, over + 1, LONGEST)
            else:
                by_address.until = now
        return cooldown

    def peer_remaining(self, peer: bytes) -> float:
        """Seconds ``peer`` is still refused for; 0.0 if it is not."""
        return self.ids.remaining(peer, self._clock())

    def address_remaining(self, address: str) -> float:
        """Seconds connections from ``address`` (an IP, no port) are still refused for."""
        return self.addresses.remaining(address, self._clock())


def _doubled(first: float, faults: int, longest: float) -> float:
    """``first`` doubled for each fault after the first, at most ``longest``."""
    return min(longest, first * 2.0 ** min(faults - 1, 64))
