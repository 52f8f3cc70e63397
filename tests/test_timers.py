"""TimerQueue: deadlines come out earliest first, ties in insertion order."""

from __future__ import annotations

import pytest

from overlay.core.timers import TimerQueue


def test_empty_queue() -> None:
    timers = TimerQueue()
    assert timers.earliest() is None
    assert list(timers.due(1e9)) == []
    assert len(timers) == 0


def test_earliest_and_ordering() -> None:
    timers = TimerQueue()
    timers.add(30.0, ("route", 3, 1))
    timers.add(10.0, ("route", 1, 1))
    timers.add(20.0, ("route", 2, 1))
    assert timers.earliest() == 10.0
    assert len(timers) == 3
    assert list(timers.due(100.0)) == [("route", 1, 1), ("route", 2, 1), ("route", 3, 1)]
    assert timers.earliest() is None


def test_due_is_inclusive_and_leaves_later_timers() -> None:
    timers = TimerQueue()
    timers.add(10.0, ("route", 1, 1))
    timers.add(20.0, ("route", 2, 1))
    assert list(timers.due(9.999)) == []
    assert list(timers.due(10.0)) == [("route", 1, 1)]
    assert timers.earliest() == 20.0
    assert len(timers) == 1


def test_equal_deadlines_keep_insertion_order() -> None:
    timers = TimerQueue()
    tokens = [("route", uid, 1) for uid in (5, 1, 4, 2, 3)]
    for token in tokens:
        timers.add(7.0, token)
    assert list(timers.due(7.0)) == tokens


def test_a_handler_that_raises_loses_only_its_own_timer() -> None:
    """``Node.handle_timer`` takes each due timer off the queue as it runs it: should its
    handler raise, the timers due after it are still queued for the next call."""
    timers = TimerQueue()
    for uid in (1, 2, 3):
        timers.add(5.0, ("route", uid, 1))
    due = timers.due(5.0)
    assert next(due) == ("route", 1, 1)
    del due  # the handler of the first raised
    assert list(timers.due(5.0)) == [("route", 2, 1), ("route", 3, 1)]


def test_timers_added_while_due_ones_run_wait_for_the_next_call() -> None:
    timers = TimerQueue()
    timers.add(5.0, ("route", 1, 1))
    ran = []
    for token in timers.due(5.0):
        ran.append(token)
        timers.add(5.0, ("route", 2, 1))  # due already, but added by a handler
    assert ran == [("route", 1, 1)]
    assert list(timers.due(5.0)) == [("route", 2, 1)]


def test_run_calls_each_kinds_handler_in_deadline_order() -> None:
    timers = TimerQueue()
    calls: list[tuple[str, float, int, int]] = []
    timers.on("route", lambda now, uid, attempt: calls.append(("route", now, uid, attempt)))
    timers.on("mark", lambda now, uid, attempt: calls.append(("mark", now, uid, attempt)))
    timers.add(20.0, ("mark", 0, 0))
    timers.add(10.0, ("route", 7, 2))
    timers.add(30.0, ("route", 8, 1))
    timers.run(25.0)
    assert calls == [("route", 25.0, 7, 2), ("mark", 25.0, 0, 0)]
    assert timers.earliest() == 30.0


def test_a_kind_has_one_handler() -> None:
    timers = TimerQueue()
    timers.on("route", lambda now, uid, attempt: None)
    with pytest.raises(ValueError, match="route"):
        timers.on("route", lambda now, uid, attempt: None)
