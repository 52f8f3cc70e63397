"""Handshake slots: per address a refusal, in total the oldest makes room."""

from __future__ import annotations

from overlay.runtime.handshake_slots import HandshakeSlots


def test_one_address_past_its_share_is_refused_until_a_slot_comes_back() -> None:
    slots = HandshakeSlots(total=10, per_address=2)
    first, second = slots.take("10.0.0.1"), slots.take("10.0.0.1")
    assert first is not None and second is not None
    assert slots.take("10.0.0.1") is None
    assert slots.take("10.0.0.2") is not None
    slots.release(first)
    slots.release(first)  # idempotent
    assert slots.take("10.0.0.1") is not None and len(slots) == 3


def test_past_the_total_the_oldest_is_evicted() -> None:
    slots = HandshakeSlots(total=2, per_address=5)
    oldest, middle = slots.take("a"), slots.take("b")
    assert oldest is not None and middle is not None
    newest = slots.take("c")
    assert newest is not None and len(slots) == 2
    assert oldest.evicted and oldest.scope.cancel_called
    assert not middle.evicted and not newest.evicted
    assert slots.take("a") is not None  # its address got its slot back
