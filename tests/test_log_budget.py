"""LogBudget: a peer that misbehaves in a loop cannot flood the log, and the log still says
how many lines it left out."""

from __future__ import annotations

from overlay.runtime.log_budget import LogBudget


def test_beyond_the_burst_lines_are_counted_and_the_next_one_says_how_many() -> None:
    now = [0.0]
    budget = LogBudget(lambda: now[0], burst=3, period=60.0)
    assert [budget.allow() for _ in range(5)] == [0, 0, 0, None, None]
    now[0] = 59.9
    assert budget.allow() is None
    now[0] = 60.0  # the first three lines are a period old
    assert budget.allow() == 3
    assert budget.allow() == 0
