"""Handshake slots: per address a refusal; in total an older one makes room, silent before
heard; a silent newcomer only once a slot has had its grace, else it is refused."""

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
    slots = HandshakeSlots(total=2, per_address=5, grace=1.0)
    oldest, middle = taken(slots, "a", 0.0), taken(slots, "b", 0.5)
    newest = taken(slots, "c", 1.0)
    assert len(slots) == 2
    assert oldest.evicted and oldest.scope.cancel_called
    assert not middle.evicted and not newest.evicted
    taken(slots, "a", 1.5)  # its address got its slot back


def test_a_heard_connection_outlives_silent_newcomers() -> None:
    slots = HandshakeSlots(total=3, per_address=5, grace=1.0)
    honest = taken(slots, "h")
    slots.hear(honest)
    silent = [taken(slots, "s") for _ in range(2)]
    later = [taken(slots, "s2", 1.0 + n) for n in range(10)]
    assert not honest.evicted and all(s.evicted for s in silent)
    assert sum(not s.evicted for s in later) == 2 and len(slots) == 3
    slots.release(honest)
    assert len(slots) == 2


def test_when_every_slot_is_heard_the_oldest_heard_makes_room() -> None:
    slots = HandshakeSlots(total=2, per_address=5, grace=1.0)
    first, second = taken(slots, "a", heard=True), taken(slots, "b", heard=True)
    third = taken(slots, "c", heard=True)
    assert first.evicted and not second.evicted and not third.evicted
    assert slots.take("d", 0.5) is Refusal.HANDSHAKES_FULL
    taken(slots, "d", 1.0)  # a silent one, once the oldest heard one had its grace
    assert second.evicted and not third.evicted


def test_silent_newcomers_wait_for_a_slot_s_grace_and_heard_ones_do_not() -> None:
    slots = HandshakeSlots(total=2, per_address=5, grace=1.0)
    old, young = taken(slots, "a", 0.0), taken(slots, "b", 0.5)
    assert slots.take("c", 0.9) is Refusal.HANDSHAKES_FULL
    assert not old.evicted and len(slots) == 2
    honest = taken(slots, "h", 0.9, heard=True)  # its message is in: room at once
    assert old.evicted and not young.evicted and not honest.evicted
    assert slots.take("c", 1.4) is Refusal.HANDSHAKES_FULL
    taken(slots, "c", 1.5)  # the young one had its second
    assert young.evicted and not honest.evicted
    assert slots.take("d", 1.6) is Refusal.HANDSHAKES_FULL  # only heard and young left
