"""The confirmation watch alone: timers on the oldest pending number, strikes per child."""

from __future__ import annotations

from overlay.core.confirm_watch import CONFIRM_TIMER, STRIKES, TRACKED, ConfirmWatch
from overlay.core.timers import TimerQueue

KEY = b"k" * 32


def watch() -> tuple[ConfirmWatch, TimerQueue]:
    timers = TimerQueue()
    return ConfirmWatch(2.0, timers), timers


def test_a_new_oldest_number_arms_one_timer_wait_ahead() -> None:
    w, timers = watch()
    w.moved(KEY)
    w.arm(10.0, {KEY: 5})
    assert not w.changed and timers.earliest() == 12.0
    w.arm(11.0, {KEY: 5})  # the same number: no second timer
    assert len(timers) == 1
    [(kind, token, _)] = list(timers.due(12.0))
    assert kind == CONFIRM_TIMER and w.fired(token) == (KEY, 5)


def test_a_timer_for_a_number_no_longer_oldest_is_stale() -> None:
    w, timers = watch()
    w.arm(0.0, {KEY: 5})
    w.arm(1.0, {KEY: 6})  # 5 went down; 6 is the oldest now
    tokens = [token for _, token, _ in timers.due(3.0)]
    assert [w.fired(t) for t in tokens] == [None, (KEY, 6)]


def test_nothing_pending_disarms() -> None:
    w, timers = watch()
    w.arm(0.0, {KEY: 5})
    w.arm(1.0, {KEY: None})
    [(_, token, _)] = list(timers.due(2.0))
    assert w.fired(token) is None


def test_strikes_count_in_a_row_and_a_confirmation_clears_them() -> None:
    w, _ = watch()
    assert [w.strike(b"H") for _ in range(STRIKES - 1)] == list(range(1, STRIKES))
    w.forgive(b"H")
    assert w.strike(b"H") == 1


def test_strikes_are_kept_for_a_bounded_number_of_peers() -> None:
    w, _ = watch()
    w.strike(b"first")
    for i in range(TRACKED):
        w.strike(i.to_bytes(4, "big"))
    assert w.strike(b"first") == 1  # forgotten: the oldest went first
