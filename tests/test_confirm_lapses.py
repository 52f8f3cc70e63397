"""ConfirmLapses (``overlay.core.confirm_lapses``) alone: which children a root does not wait
for after one of their numbers lapsed, with explicit times and a deadline of 1 s."""

from __future__ import annotations

from overlay.core.confirm_lapses import QUIET, TRACKED, ConfirmLapses


def test_a_child_is_waited_for_until_it_lapses_and_again_after_its_quiet() -> None:
    lapses = ConfirmLapses(1.0)
    assert lapses.waits_for(0.0, b"H")
    lapses.lapsed(10.0, b"H")
    assert not lapses.waits_for(10.0, b"H")
    assert not lapses.waits_for(10.0 + QUIET - 0.01, b"H")
    assert lapses.waits_for(10.0 + QUIET, b"H")
    assert len(lapses) == 0  # the entry ended with its quiet


def test_another_lapse_starts_the_quiet_again() -> None:
    lapses = ConfirmLapses(1.0)
    lapses.lapsed(10.0, b"H")
    lapses.lapsed(10.0 + QUIET - 1, b"H")
    assert not lapses.waits_for(10.0 + QUIET, b"H")


def test_a_confirmation_in_time_ends_the_quiet_of_that_child_only() -> None:
    lapses = ConfirmLapses(1.0)
    lapses.lapsed(10.0, b"A")
    lapses.lapsed(10.0, b"B")
    lapses.confirmed(b"A")
    assert lapses.waits_for(11.0, b"A") and not lapses.waits_for(11.0, b"B")


def test_memory_is_bounded_by_forgetting_the_least_recent() -> None:
    lapses = ConfirmLapses(1.0)
    for i in range(TRACKED + 10):
        lapses.lapsed(0.0, i.to_bytes(4, "big"))
    assert len(lapses) == TRACKED
    assert lapses.waits_for(1.0, (0).to_bytes(4, "big"))  # forgotten: waited for again
    assert not lapses.waits_for(1.0, (TRACKED + 9).to_bytes(4, "big"))
