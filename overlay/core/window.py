"""The bounded window of recent packets one node keeps for one stream.

Every tree node keeps one (DESIGN, "Catch-up"): it serves a (re)subscriber with ``last_seen``
every later packet it still holds, in order, and it is where local clients read from. The
window records three things about packet numbers:

* ``packets``: the packets held, by number, in order (``packet_map``: replaying a range is a
  walk from one index, not a sort, and a packet's arrival and the oldest's eviction are
  O(1));
* ``holes``: ranges known to be missing (a parent said ``PacketsMissed``, or a packet came
  with a number past the one expected), which readers report instead of waiting on;
* ``floor``: everything below it was evicted or will never be accepted again.

Invariants: every held packet and every hole lies at or above ``floor``; holes never overlap
held packets; ``len(packets) <= max_packets``, ``len(holes) <= max_packets`` and the held
payload bytes stay within ``max_bytes`` (the newest packet is always kept, even if it alone is
larger), so a node's memory is bounded by its configuration, never by its traffic. Packets
from ``keep_from`` on, which a local client is still owed, are evicted only past twice those
bounds: a member shows them only once the root has committed them (``overlay.core.showing``),
which may be more than a window behind what it has received.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter

from sortedcontainers import SortedDict

from overlay.core.packet_map import PacketMap
from overlay.messages import SubscribeData

# A range of packet numbers known to be missing, both ends included.
Missing = tuple[int, int]
_data = attrgetter("data")  # (a packet's payload, for sums taken in C)
NOTHING_OWED = 2**64  # ``keep_from`` when no local client waits for a packet held here


class Window:
    __slots__ = (
        "bytes",
        "evicted",
        "floor",
        "holes",
        "keep_from",
        "max_bytes",
        "max_packets",
        "packets",
    )

    def __init__(self, max_packets: int, max_bytes: int) -> None:
        self.max_packets = max_packets
        self.max_bytes = max_bytes
        self.packets = PacketMap()
        self.holes: SortedDict[int, int] = SortedDict()  # first -> last
        self.floor = 0
        self.bytes = 0
        self.evicted = 0  # packets dropped to stay within bounds, for stats
        self.keep_from = NOTHING_OWED  # the lowest number a local client is owed (set by pump)

    def __len__(self) -> int:
        return len(self.packets)

    def get(self, number: int) -> SubscribeData | None:
        return self.packets.get(number)

    def missing_until(self, number: int) -> int | None:
        """If ``number`` lies in a known hole, the hole's last number; else None."""
        if not self.holes:
            return None  # (the common case, and a bisect of an empty map is not free)
        index = self.holes.bisect_right(number) - 1
        if index < 0:
            return None
        first, last = self.holes.peekitem(index)
        return last if first <= number <= last else None

    def next_held(self, number: int) -> int:
        """The smallest held packet number at or above ``number`` (2**64 if none)."""
        index = self.packets.bisect_left(number)
        return self.packets.peekitem(index)[0] if index < len(self.packets) else 2**64

    def accepts(self, number: int) -> bool:
        """Whether ``number`` is new here: not held, not below the floor, not in a hole."""
        return (
            number >= self.floor
            and number not in self.packets
            and self.missing_until(number) is None
        )

    def accepts_run(self, first: int, count: int) -> bool:
        """Whether ``accepts`` holds for each of ``first .. first + count - 1``, as far as
        telling it needs no look at each: none is below the floor, in a hole, or held
        (False says nothing: look at each)."""
        packets = self.packets
        return (
            first >= self.floor
            and not self.holes
            and (not packets or packets.peekitem(-1)[0] < first)
            and count > 0
        )

    def add(self, packet: SubscribeData) -> None:
        """Hold ``packet`` (the caller checked ``accepts``), evicting the oldest to fit."""
        packets = self.packets
        packets[packet.packet] = packet
        self.bytes += len(packet.data)
        if len(packets) > self.max_packets or self.bytes > self.max_bytes:
            self._evict()

    def add_run(self, run: list[SubscribeData], data_bytes: int | None = None) -> None:
        """Hold ``run``, consecutive packets past every number held (the caller checked
        ``accepts``), evicting the oldest to fit: ``add`` for each, in one pass.
        ``data_bytes``: the run's payload bytes, if the caller has counted them."""
        packets = self.packets
        packets.extend(run)
        self.bytes += sum(map(len, map(_data, run))) if data_bytes is None else data_bytes
        self._evict()

    def _evict(self) -> None:
        """Drop the oldest packets while the window is past its bounds (see ``add``)."""
        packets = self.packets
        held, count = self.bytes, len(packets)
        max_packets, max_bytes = self.max_packets, self.max_bytes
        if count > max_packets and held <= max_bytes and not self.holes:
            # Past the packet bound only (a window fills by count long before by bytes):
            # as many of the oldest go at once as the rule below drops one at a time,
            # those past twice the bound and then those no client is owed, down to the
            # bound. (Bytes only fall as packets go, so they never hold one back.)
            forced = max(count - 2 * max_packets, 0)
            free = max(packets.bisect_left(self.keep_from) - forced, 0)
            drop = min(forced + free, count - max_packets, count - 1)
            if drop:
                number = packets.peekitem(drop - 1)[0]
                gone = packets.pop_firsts(drop)
                held -= sum(map(len, map(_data, gone)))
                count -= drop
                self.evicted += drop
                if number >= self.floor:
                    self.floor = number + 1
        while count > 1 and (count > max_packets or held > max_bytes):
            if (
                packets.first() >= self.keep_from
                and count <= 2 * max_packets
                and (held <= 2 * max_bytes)
            ):
                break  # a local client is owed it still
            number, old = packets.pop_first()
            held -= len(old.data)
            count -= 1
            self.evicted += 1
            if self.holes:
                self._raise_floor(number + 1)
            elif number >= self.floor:
                self.floor = number + 1  # (``_raise_floor`` with no hole to trim)
        self.bytes = held

    def mark_missing(self, first: int, last: int) -> list[Missing]:
        """Record that ``first..last`` will not arrive; returns the sub-ranges that were not
        already held, missing or below the floor (what readers have not been told)."""
        first = max(first, self.floor)
        fresh: list[Missing] = []
        start: int | None = None
        number = first
        while number <= last:
            known = number in self.packets
            hole_end = None if known else self.missing_until(number)
            if known or hole_end is not None:
                if start is not None:
                    fresh.append((start, number - 1))
                    start = None
                number = number + 1 if hole_end is None else hole_end + 1
                continue
            if start is None:
                start = number
            # Jump to the next held packet or hole instead of stepping one number at a time:
            # a hostile range may span 2**63 numbers.
            number = min(self._next_known(number), last + 1)
        if start is not None:
            fresh.append((start, last))
        for a, b in fresh:
            self.holes[a] = b
        # Holes are memory too: a parent reporting every other number missing would add one
        # per report and only eviction of packets trims them. Past ``max_packets`` holes the
        # oldest is forgotten by raising the floor past it (evicting any packet below it);
        # readers report numbers below the floor as missing, just as they report holes.
        while len(self.holes) > self.max_packets:
            self._forget_below(self.holes.peekitem(0)[1] + 1)
        return fresh

    def reopen(self, last: int, limit: int) -> list[Missing]:
        """Forget the newest ``limit`` holes at or below ``last`` (the parts at or below it):
        those numbers are no longer known missing, just not held. Returns them, oldest
        first. Work is bounded by ``limit`` and the number of holes."""
        reopened: list[Missing] = []
        index = self.holes.bisect_right(last)
        while index > 0 and len(reopened) < limit:
            index -= 1
            first, end = self.holes.peekitem(index)
            del self.holes[first]
            if end > last:
                self.holes[last + 1] = end
                end = last
            reopened.append((first, end))
        reopened.reverse()
        return reopened

    def _next_known(self, number: int) -> int:
        """The smallest held or missing number above ``number`` (or a number past all)."""
        candidates = []
        index = self.packets.bisect_right(number)
        if index < len(self.packets):
            candidates.append(self.packets.peekitem(index)[0])
        index = self.holes.bisect_right(number)
        if index < len(self.holes):
            candidates.append(self.holes.peekitem(index)[0])
        return min(candidates) if candidates else 2**64

    def replay(self, start: int, end: int) -> Iterator[SubscribeData | Missing]:
        """``start..end`` in order, as held packets and missing ranges (anything not held,
        evicted or a hole, is reported missing, never skipped in silence)."""
        if start > end:
            return
        if start < self.floor:
            yield (start, min(self.floor - 1, end))
            start = self.floor
        expected = start
        for number in self.packets.irange(start, end):
            if number > expected:
                yield (expected, number - 1)
            yield self.packets[number]
            expected = number + 1
        if expected <= end:
            yield (expected, end)

    def held_in(self, start: int, end: int) -> int:
        """How many packets ``replay(start, end)`` would yield, in O(log n): the frames a
        catch-up of that range costs (its PacketsMissed are a few bytes each, and at most
        one more than its packets)."""
        if start > end:
            return 0
        count: int = self.packets.bisect_right(end) - self.packets.bisect_left(start)
        return count

    def payload_in(self, start: int, end: int) -> int:
        """The payload bytes of the packets held in ``start..end``."""
        packets = self.packets
        return sum(len(packets[number].data) for number in packets.irange(start, end))

    def _forget_below(self, floor: int) -> None:
        while self.packets and self.packets.first() < floor:
            _, old = self.packets.pop_first()
            self.bytes -= len(old.data)
            self.evicted += 1
        self._raise_floor(floor)

    def _raise_floor(self, floor: int) -> None:
        if floor > self.floor:
            self.floor = floor
        while self.holes:
            first, last = self.holes.peekitem(0)
            if first >= self.floor:
                break
            del self.holes[first]
            if last >= self.floor:
                self.holes[self.floor] = last
                break
