"""ConfirmLapses (``overlay.core.confirm_lapses``) alone: which children a root does not wait
for, on which stream, after one of their numbers lapsed; explicit times, a deadline of 1 s."""

from __future__ import annotations

from overlay.core.confirm_lapses import QUIET, TRACKED, ConfirmLapses

KEY, OTHER = b"k" * 32, b"o" * 32


def test_a_child_is_waited_for_until_it_lapses_and_again_after_its_quiet() -> None:
    lapses = ConfirmLapses(1.0)
    assert lapses.waits_for(0.0, KEY, b"H")
    lapses.lapsed(10.0, KEY, b"H")
    assert not lapses.waits_for(10.0, KEY, b"H")
    assert not lapses.waits_for(10.0 + QUIET - 0.01, KEY, b"H")
    assert lapses.waits_for(10.0 + QUIET, KEY, b"H")
    assert len(lapses) == 0  # the entry ended with its quiet


def test_the_quiet_is_the_lapsed_streams_alone() -> None:
    """An honest relay whose hostile publisher lapses on one stream keeps confirmation on
    every other stream its link carries."""
    lapses = ConfirmLapses(1.0)
    lapses.lapsed(10.0, KEY, b"R")
    assert not lapses.waits_for(11.0, KEY, b"R")
    assert lapses.waits_for(11.0, OTHER, b"R")
    assert lapses.waits_for(11.0, KEY, b"Q")


def test_another_lapse_starts_the_quiet_again() -> None:
    lapses = ConfirmLapses(1.0)
    lapses.lapsed(10.0, KEY, b"H")
    lapses.lapsed(10.0 + QUIET - 1, KEY, b"H")
    assert not lapses.waits_for(10.0 + QUIET, KEY, b"H")


def test_memory_is_bounded_by_forgetting_the_least_recent() -> None:
    lapses = ConfirmLapses(1.0)
    for i in range(TRACKED + 10):
        lapses.lapsed(0.0, KEY, i.to_bytes(4, "big"))
    assert len(lapses) == TRACKED
    assert lapses.waits_for(1.0, KEY, (0).to_bytes(4, "big"))  # forgotten: waited for again
    assert not lapses.waits_for(1.0, KEY, (TRACKED + 9).to_bytes(4, "big"))
