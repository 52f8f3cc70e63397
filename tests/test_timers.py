"""TimerQueue: deadlines come out earliest first, ties in insertion order."""

from __future__ import annotations

from overlay.core.timers import TimerQueue


def test_empty_queue() -> None:
    timers = TimerQueue()
    assert timers.earliest() is None
    assert timers.pop_due(1e9) == []
    assert len(timers) == 0


def test_earliest_and_ordering() -> None:
    timers = TimerQueue()
    timers.add(30.0, ("route", 3, 1))
    timers.add(10.0, ("route", 1, 1))
    timers.add(20.0, ("route", 2, 1))
    assert timers.earliest() == 10.0
    assert len(timers) == 3
    assert timers.pop_due(100.0) == [("route", 1, 1), ("route", 2, 1), ("route", 3, 1)]
    assert timers.earliest() is None


def test_pop_due_is_inclusive_and_leaves_later_timers() -> None:
    timers = TimerQueue()
    timers.add(10.0, ("route", 1, 1))
    timers.add(20.0, ("route", 2, 1))
    assert timers.pop_due(9.999) == []
    assert timers.pop_due(10.0) == [("route", 1, 1)]
    assert timers.earliest() == 20.0
    assert len(timers) == 1


def test_equal_deadlines_keep_insertion_order() -> None:
    timers = TimerQueue()
    tokens = [("route", uid, 1) for uid in (5, 1, 4, 2, 3)]
    for token in tokens:
        timers.add(7.0, token)
    assert timers.pop_due(7.0) == tokens
