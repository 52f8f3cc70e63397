"""Packets that come ahead of a gap a member has asked its new parent to fill.

A member that moves below a new parent for a search routed past it (``Restarts.hang_from``)
may lack packets below that parent's head, and asks for them (``FillRequest``). The parent's
catch-up for the search, already on its way, can overtake that question: its packets come
above the gap before the answer does. Taken as they came, the first of them would announce
the gap missed (``Broadcast.on_data``), and the answer, arriving later, would be an old
number nobody waits for: a subscriber below the moved member told ``Missed`` for a packet
the tree held and had acknowledged.

So while the question covers the member's next number, packets above it wait here, in
number order, and go on once the gap is filled (the answer's packets), announced by the
parent (its ``PacketsMissed``), or given up: after ``fill_timeout`` (``NodeConfig``), on
the member's next change of parent, or when the packets waiting reach a window's bounds.
Giving up announces what is still lacking missed, as the packets would have without this
wait, so the wait can delay a packet by at most ``fill_timeout`` and never loses one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sortedcontainers import SortedDict

from overlay.messages import SubscribeData

EARLY_TIMER = "early"


@dataclass(slots=True, eq=False)
class EarlyPackets:
    """A question for ``first..last`` out to the parent, and the packets above the gap that
    came before its answer, bounded by ``max_packets`` and ``max_bytes``."""

    first: int
    last: int
    token: int
    max_packets: int
    max_bytes: int
    # By number, so the lowest is at hand whatever order they came in (a window's worth).
    packets: SortedDict[int, SubscribeData] = field(default_factory=SortedDict)
    bytes: int = 0

    def covers(self, next_in: int) -> bool:
        """Whether the question still covers ``next_in``, the member's next number."""
        return self.first <= next_in <= self.last

    def hold(self, packet: SubscribeData) -> bool:
        """Keep ``packet`` until its turn; False if that would pass the bounds (then the
        caller gives the wait up)."""
        if packet.packet in self.packets:
            return True  # (a duplicate: the one held is the same packet)
        size = len(packet.data)
        if len(self.packets) >= self.max_packets or self.bytes + size > self.max_bytes:
            return False
        self.packets[packet.packet] = packet
        self.bytes += size
        return True

    def pop_lowest(self) -> SubscribeData | None:
        if not self.packets:
            return None
        packet: SubscribeData = self.packets.popitem(0)[1]
        self.bytes -= len(packet.data)
        return packet

    def lowest(self) -> int | None:
        return self.packets.keys()[0] if self.packets else None
