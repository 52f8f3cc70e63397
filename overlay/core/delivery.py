"""Delivery to one local client: in packet-number order, exactly once, never a silent gap.

Each local client of a stream is a ``Member`` with a ``cursor``, the next packet number it
is owed. ``pump`` moves the cursor through the node's window as far as it can: a held packet
is delivered, a known hole or an evicted range becomes one ``Missed`` event, and anything not
yet arrived stops the pump until the window changes. The cursor only moves forward, so no
packet is delivered twice and none out of order.

Atomic members (Strymon) walk the same order but hold an epoch's data back until its marker
passes the cursor. Then the epoch is delivered whole, from the window, if the member was
there when it began (``since``) and the node holds every packet number from the epoch's
first to its marker; otherwise it is skipped and the client told so. Packets without an
epoch are delivered as they come.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from overlay.compiled_checks import compile_builder
from overlay.core.events import (
    ClientEvent,
    Epoch,
    EpochAborted,
    EpochSkipped,
    Missed,
    Packet,
)
from overlay.core.window import Window
from overlay.messages import MAX_PACKET, PacketKind, SubscribeData


@dataclass(slots=True, eq=False)
class Member:
    """A local client of one stream. ``receives`` is False for a client that only
    publishes (it keeps the node in the tree but is sent no packets)."""

    receives: bool = True
    atomic: bool = False
    # The next packet number owed; None until the node knows where the stream is (it is
    # joining), when a fresh client starts at the newest packet + 1.
    cursor: int | None = None
    # The first number from which this client has missed nothing (atomic completeness).
    since: int = 0


def as_event(packet: SubscribeData) -> Packet:
    return Packet(packet.key, packet.packet, packet.data, packet.epoch, packet.kind)


# ``as_event`` for many packets at once: each packet's fields as a tuple, a C call, and the
# events built by their slots (``compile_builder``), a run of packets costing a few calls.
_event_fields = attrgetter("key", "packet", "data", "epoch", "kind")
_events_of = compile_builder(Packet)


def pump(
    key: bytes,
    member: Member,
    window: Window,
    contiguous_from: int | None,
    until: int | None = None,
) -> list[ClientEvent]:
    """Deliver to ``member`` everything it is owed that the window can now give, up to
    ``until`` if it is set (what the root committed: ``overlay.core.commits``,
    ``overlay.core.showing``). Gaps stop there too: a number past it may yet be given to
    a packet, were the tree to lose what it holds there and number it again."""
    events: list[ClientEvent] = []
    cursor = member.cursor
    if cursor is None or not member.receives:
        return events
    bound = MAX_PACKET if until is None else until
    while cursor <= bound:
        if cursor < window.floor:
            events.append(Missed(key, cursor, min(window.floor - 1, bound)))
            cursor = min(window.floor, bound + 1)
            member.since = max(member.since, cursor)
            continue
        if not member.atomic:
            held = window.packets.run_from(cursor, bound)
            if held:
                events += _events_of(map(_event_fields, held))
                cursor += len(held)
                continue
        packet = window.get(cursor)
        if packet is not None:  # (an atomic member's: a plain member's were taken above)
            event = _atomic_event(key, member, window, contiguous_from, packet)
            if event is not None:
                events.append(event)
            cursor += 1
            continue
        last = window.missing_until(cursor)
        if last is None and contiguous_from is not None and cursor < contiguous_from:
            # Before the point from which this node has seen the stream (it joined later,
            # or skipped a hole): these will never arrive here.
            last = min(contiguous_from, window.next_held(cursor)) - 1
        if last is None:
            break
        last = min(last, bound)
        events.append(Missed(key, cursor, last))
        cursor = last + 1
        member.since = max(member.since, cursor)
    member.cursor = cursor
    return events


def _atomic_event(
    key: bytes,
    member: Member,
    window: Window,
    contiguous_from: int | None,
    packet: SubscribeData,
) -> ClientEvent | None:
    epoch = packet.epoch
    if epoch is None:
        return as_event(packet) if packet.kind is PacketKind.DATA else None
    if packet.kind is PacketKind.DATA:
        return None  # held back in the window until the epoch closes
    if packet.kind is PacketKind.EPOCH_ABORTED:
        return EpochAborted(key, epoch)
    first = packet.epoch_first
    if first is None or first < member.since:
        return EpochSkipped(key, epoch, "the epoch began before this subscriber joined")
    # Whole means every number from the epoch's first packet to its marker is held here: a
    # number not held may have been one of the epoch's (the node joined later, a packet was
    # lost, or it left the window).
    packets_ = window.packets
    if packets_.bisect_left(packet.packet) - packets_.bisect_left(first) != packet.packet - first:
        if first < window.floor:
            return EpochSkipped(key, epoch, "part of the epoch left the node's window")
        return EpochSkipped(key, epoch, "this node did not see the whole epoch")
    held = (packets_[n] for n in packets_.irange(first, packet.packet - 1))
    packets = tuple(as_event(p) for p in held if p.epoch == epoch and p.kind is PacketKind.DATA)
    return Epoch(key, epoch, packets, packet.packet)
