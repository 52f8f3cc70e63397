"""ConfirmLapses (``overlay.core.confirm_lapses``) alone: which children a root cuts off for
numbers that lapse unconfirmed, with explicit times and a deadline of 1 s."""

from __future__ import annotations

from overlay.core.confirm_lapses import LIMIT, TRACKED, ConfirmLapses


def test_a_third_lapse_two_deadlines_after_the_first_cuts_the_child_off() -> None:
    lapses = ConfirmLapses(1.0)
    assert lapses.lapsed(10.0, b"H") is None
    assert lapses.lapsed(10.5, b"H") is None
    assert lapses.lapsed(11.0, b"H") is None  # three, but within two deadlines
    assert lapses.lapsed(12.0, b"H") == LIMIT + 1
    assert len(lapses) == 0  # cut off: forgotten, a new link starts afresh


def test_a_burst_of_lapses_at_one_moment_is_not_enough() -> None:
    lapses = ConfirmLapses(1.0)
    assert [lapses.lapsed(10.0, b"H") for _ in range(50)] == [None] * 50


def test_a_confirmation_forgives_the_lapses_before_it() -> None:
    lapses = ConfirmLapses(1.0)
    lapses.lapsed(10.0, b"H")
    lapses.lapsed(11.0, b"H")
    lapses.confirmed(b"H")
    assert lapses.lapsed(12.0, b"H") is None
    assert lapses.lapsed(13.0, b"H") is None
    assert lapses.lapsed(14.0, b"H") == LIMIT  # counted from 12.0


def test_peers_are_counted_apart() -> None:
    lapses = ConfirmLapses(1.0)
    for now in (10.0, 11.0):
        lapses.lapsed(now, b"A")
        lapses.lapsed(now, b"B")
    lapses.confirmed(b"A")
    assert lapses.lapsed(12.0, b"A") is None
    assert lapses.lapsed(12.0, b"B") == LIMIT


def test_memory_is_bounded_by_forgetting_the_least_recent() -> None:
    lapses = ConfirmLapses(1.0)
    for i in range(TRACKED + 10):
        lapses.lapsed(0.0, i.to_bytes(4, "big"))
    assert len(lapses) == TRACKED
    # The first peer was forgotten: its next lapses count from scratch.
    first = (0).to_bytes(4, "big")
    assert lapses.lapsed(5.0, first) is None and lapses.lapsed(6.0, first) is None
