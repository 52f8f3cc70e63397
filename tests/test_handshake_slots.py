"""Handshake slots: per address a refusal; in total an older one makes room, silent before
heard; a crowded backlog's silent newcomer is refused unless a silent slot had its grace."""

from __future__ import annotations

from overlay.runtime.handshake_slots import HandshakeSlots, Slot
from overlay.runtime.refusals import Refusal


def taken(slots: HandshakeSlots, address: str, now: float = 0.0, **kwargs: bool) -> Slot:
    slot = slots.take(address, now, **kwargs)
    assert isinstance(slot, Slot), slot
    return slot


def test_one_address_past_its_share_is_refused_until_a_slot_comes_back() -> None:
    slots = HandshakeSlots(total=10, per_address=2)
    first = taken(slots, "10.0.0.1")
    taken(slots, "10.0.0.1")
    assert slots.take("10.0.0.1", 0.0) is Refusal.ADDRESS_FULL
    taken(slots, "10.0.0.2")
    slots.release(first)
    slots.release(first)  # idempotent
    taken(slots, "10.0.0.1")
    assert len(slots) == 3


def test_past_the_total_the_oldest_is_evicted() -> None:
    slots = HandshakeSlots(total=2, per_address=5)
    oldest, middle = taken(slots, "a"), taken(slots, "b")
    newest = taken(slots, "c")
    assert len(slots) == 2
    assert oldest.evicted and oldest.scope.cancel_called
    assert not middle.evicted and not newest.evicted
    taken(slots, "a")  # its address got its slot back


def test_a_heard_connection_outlives_silent_newcomers() -> None:
    slots = HandshakeSlots(total=3, per_address=5)
    honest = taken(slots, "h")
    slots.hear(honest)
    silent = [taken(slots, "s") for _ in range(2)]
    later = [taken(slots, "s2") for _ in range(10)]
    assert not honest.evicted and all(s.evicted for s in silent)
    assert sum(not s.evicted for s in later) == 2 and len(slots) == 3
    slots.release(honest)
    assert len(slots) == 2


def test_when_every_slot_is_heard_the_oldest_heard_makes_room() -> None:
    slots = HandshakeSlots(total=2, per_address=5)
    first, second = taken(slots, "a", heard=True), taken(slots, "b", heard=True)
    third = taken(slots, "c", heard=True)
    assert first.evicted and not second.evicted and not third.evicted


def test_crowded_silent_newcomers_wait_for_a_silent_slot_s_grace() -> None:
    slots = HandshakeSlots(total=2, per_address=5, grace=1.0)
    old, young = taken(slots, "a", 0.0), taken(slots, "b", 0.5)
    assert slots.take("c", 0.9, crowded=True) is Refusal.HANDSHAKES_FULL
    assert not old.evicted and len(slots) == 2
    honest = taken(slots, "h", 0.9, heard=True, crowded=True)  # its message is in: room
    assert old.evicted and not young.evicted and not honest.evicted
    assert slots.take("c", 1.4, crowded=True) is Refusal.HANDSHAKES_FULL
    taken(slots, "c", 1.5, crowded=True)  # the young one had its second
    assert young.evicted and not honest.evicted
    taken(slots, "d", 1.5)  # not crowded: the oldest silent goes, as ever
